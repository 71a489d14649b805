#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace verity::kernels {
namespace {
// How long an idle worker spins before it sleeps; a sleeping worker costs a
// futex wake-up (tens of microseconds on a virtual machine) per job.
constexpr auto kSpin = std::chrono::microseconds(2000);
// Chunks per thread: small enough to balance, large enough to amortize a claim.
constexpr int kChunksPerThread = 4;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; i++) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunChunks(uint32_t gen) {
  for (;;) {
    // Generation, chunk count and next chunk come from one atomic word, so a
    // late worker can never claim past the end of a finished job, and the job
    // fields it reads after a successful claim are that job's (the caller does
    // not rewrite them until every claimed chunk is done).
    uint64_t cur = claim_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(cur >> 32) != gen) return;  // a newer job: not ours
    const int count = static_cast<int>((cur >> 16) & 0xffffu), c = static_cast<int>(cur & 0xffffu);
    if (c >= count) return;                                // nothing left
    if (!claim_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) continue;
    const int begin = c * chunk_, end = std::min(job_n_, begin + chunk_);
    (*job_)(begin, end);
    done_.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int n, const std::function<void(int, int)>& fn) {
  if (workers_.empty() || n < 2) {
    fn(0, n);
    return;
  }
  // No chunk of the previous job is claimable (all were done), so the job
  // fields may be rewritten before the new generation is published.
  const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
  job_ = &fn;
  job_n_ = n;
  chunks_ = std::min({n, size() * kChunksPerThread, 0xffff});
  chunk_ = (n + chunks_ - 1) / chunks_;
  chunks_ = (n + chunk_ - 1) / chunk_;
  done_.store(0, std::memory_order_relaxed);
  claim_.store((static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(chunks_) << 16), std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.store(gen, std::memory_order_release);
  }
  if (sleeping_.load() > 0) start_cv_.notify_all();
  RunChunks(gen);
  while (done_.load(std::memory_order_acquire) != chunks_) std::this_thread::yield();
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  for (;;) {
    uint32_t gen = generation_.load(std::memory_order_acquire);
    const auto spin_until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 0; gen == seen && !stop_.load(std::memory_order_relaxed); i++) {
      gen = generation_.load(std::memory_order_acquire);
      if ((i & 255) == 255 && std::chrono::steady_clock::now() > spin_until) break;
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      sleeping_++;
      start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      sleeping_--;
      gen = generation_.load();
    }
    if (stop_.load()) return;
    seen = gen;
    RunChunks(gen);
  }
}

}  // namespace verity::kernels
