#include "kernels/cpu/thread_pool.h"

namespace verity::kernels {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; i++) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

static void Band(int n, int parts, int index, int* begin, int* end) {
  *begin = static_cast<int>(static_cast<long>(n) * index / parts);
  *end = static_cast<int>(static_cast<long>(n) * (index + 1) / parts);
}

void ThreadPool::ParallelFor(int n, const std::function<void(int, int)>& fn) {
  if (workers_.empty() || n < 2) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_n_ = n;
    pending_ = static_cast<int>(workers_.size());
    generation_++;
  }
  start_cv_.notify_all();
  int b, e;
  Band(n, size(), 0, &b, &e);
  fn(b, e);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  long seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job;
    int n;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
    }
    int b, e;
    Band(n, size(), index, &b, &e);
    (*job)(b, e);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }
}

}  // namespace verity::kernels
