// A small persistent pool for the fast CPU path. ParallelFor cuts [0, n) into
// chunks that the caller and the workers claim from one atomic counter, so a
// worker the OS has descheduled delays nothing it has not started (on a shared
// 2-core box the caller often does most chunks itself). Idle workers spin
// briefly before sleeping: a forward pass issues dozens of short jobs per token.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
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
  // Calls fn(begin, end) over disjoint ranges covering [0, n) exactly once;
  // returns when all are done.
  void ParallelFor(int n, const std::function<void(int, int)>& fn);

 private:
  void WorkerLoop();
  // Claims and runs chunks of job generation `gen` until none are left.
  void RunChunks(uint32_t gen);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  // The current job; written only while no chunk of it can be claimed.
  const std::function<void(int, int)>* job_ = nullptr;
  int job_n_ = 0, chunk_ = 1, chunks_ = 0;
  // Bits 63..32: job generation; 31..16: chunk count; 15..0: next unclaimed chunk.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> done_{0};
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace verity::kernels
