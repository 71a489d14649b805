// A small persistent pool: ParallelFor splits [0, n) into one contiguous band
// per thread (the caller runs band 0) and returns when every band is done.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace verity::kernels {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) over disjoint bands covering [0, n) exactly once.
  void ParallelFor(int n, const std::function<void(int, int)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(int, int)>* job_ = nullptr;
  int job_n_ = 0;
  long generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace verity::kernels
