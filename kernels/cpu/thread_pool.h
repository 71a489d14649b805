// A small persistent pool for the fast CPU path.
//
// ParallelFor cuts [0, n) into chunks that the caller and the workers claim from
// one atomic word, so a worker that is asleep, late or descheduled delays
// nothing it has not started: on a shared 2-core box the caller often does
// most chunks itself, and a job too small to be worth a helper is finished by
// the caller before the helper arrives (it then costs a few atomic operations).
//
// Idle workers spin for a bounded time (spin_us, default 50 us: long enough to
// span the serial gaps between the jobs of a forward pass, short enough not to
// hold a core when the machine is shared), pausing the core between checks,
// then block on a futex (Linux; std::atomic::wait elsewhere). The caller wakes
// sleeping workers only when the work left after its own first chunk would
// take it longer than a wake-up (~30 us), so small jobs never pay for a system
// call. A caller waiting for the last chunk of a worker spins for the same
// bounded time, then blocks too.
//
// On a shared machine a worker can be descheduled in the middle of a chunk, and
// the caller then waits out another process's time slice: milliseconds, on a
// job of microseconds. The pool notices (the job took longer than the caller's
// own pace says it would have alone, and the caller waited >= 200 us for a
// worker: a worker merely microseconds late is not a stall), and each pool
// thread samples, every >= 5 ms of split jobs, how long it waited for a CPU
// while runnable (Linux schedstat): more than 5% means another busy process
// shares these cores.
// Either way the next jobs run on the caller only (the workers fall asleep),
// for 5 ms, doubling to 500 ms while retries keep hurting and resetting once a
// backoff's length passes without. So 2 threads stay about as fast as 1 when
// the other core is busy.
//
// One job at a time: a ParallelFor issued from inside a job (nested) or while
// another thread's job is running runs inline on its calling thread instead of
// waiting. fn must not throw.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace verity::kernels {

// Where a pool reads the time and each thread's run-queue wait. The stall,
// backoff and contention rules decide on these readings alone (spinning is
// bounded by the real clock whatever this says), so a test can replace them
// and make those decisions deterministic (kernels/cpu/kernels_test.cc).
class PoolClock {
 public:
  virtual ~PoolClock() = default;
  virtual std::chrono::steady_clock::time_point Now() const = 0;
  // Nanoseconds the calling thread has spent runnable but waiting for a CPU
  // since it started; -1 when unknown.
  virtual int64_t RunDelayNs() const = 0;
  // steady_clock and /proc/thread-self/schedstat (Linux; -1 elsewhere).
  static const PoolClock& System();
};

class ThreadPool {
 public:
  // `threads` counts the caller: threads - 1 workers are started (none for 1).
  // `clock` (default PoolClock::System()) must outlive the pool.
  explicit ThreadPool(int threads, int spin_us = 50, const PoolClock* clock = nullptr);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint ranges covering [0, n) exactly once;
  // returns when all are done. Every range but the last is a multiple of
  // `grain` long (so every range starts at a multiple of grain), and n < 2 * grain
  // (or a pool of one thread) runs fn(0, n) right here.
  void ParallelFor(int n, const std::function<void(int, int)>& fn, int grain = 1);

  // Counters for tests and diagnostics (relaxed; approximate while jobs run).
  struct Stats {
    uint64_t jobs = 0;           // ParallelFor calls that were split
    uint64_t inline_jobs = 0;    // ParallelFor calls run entirely on the caller
    uint64_t worker_chunks = 0;  // chunks run by workers (the rest by callers)
    uint64_t wakes = 0;          // futex wake-ups issued for sleeping workers
    uint64_t sleeps = 0;         // times a worker went to sleep
    uint64_t asleep = 0;         // workers blocked on the futex now (or about to be)
    uint64_t caller_sleeps = 0;  // times a caller went to sleep waiting for a worker's chunk
    uint64_t stalls = 0;         // split jobs slower than the caller alone, after a >= 200 us wait for a worker
    uint64_t solo_jobs = 0;      // jobs run on the caller alone in a backoff
    uint64_t contended = 0;      // windows in which a pool thread waited for a CPU > 5% of the time
  };
  Stats stats() const;

 private:
  void WorkerLoop();
  // Claims and runs chunks of job generation `gen` until none are left; returns
  // how many it ran.
  int RunChunks(uint32_t gen);
  void WakeWorkers();
  void WaitForChunks();
  // Jobs run on the caller alone until now + the backoff, which doubles.
  void Backoff(std::chrono::steady_clock::time_point now);
  void MaybeResetBackoff(std::chrono::steady_clock::time_point now);
  // ParallelFor's steps, all on the caller that holds busy_.
  // Sets the job's fields, then publishes its generation to the workers.
  void PublishJob(int n, const std::function<void(int, int)>& fn, int max_chunks, int grain);
  // Claims and runs chunks until none are left to claim, waking sleeping
  // workers after the first when worth it; returns how many it ran.
  int RunCallerChunks(int n, const std::function<void(int, int)>& fn, std::chrono::steady_clock::time_point start);
  // Every kSampleEvery split jobs, counts a window in which the caller waited for a CPU.
  void SampleCallerRunDelay(std::chrono::steady_clock::time_point start);
  // Waits for the chunks workers still hold; backs off when the helpers made
  // the job slower than the caller alone, resets the backoff when they helped.
  void AwaitHelpers(std::chrono::steady_clock::time_point start, int mine);

  std::vector<std::thread> workers_;
  const int spin_us_;
  const PoolClock& clock_;
  const uint64_t id_;  // tells this pool's caller-side samples from another pool's

  // The current job; written only while no chunk of it can be claimed.
  const std::function<void(int, int)>* job_ = nullptr;
  int job_n_ = 0, chunk_ = 1, chunks_ = 0;

  // Hot words on their own cache lines: workers poll epoch_, everyone claims
  // from claim_, finishers count down pending_.
  // Bits 63..32: job generation; 31..16: chunk count; 15..0: next unclaimed chunk.
  alignas(64) std::atomic<uint64_t> claim_{0};
  alignas(64) std::atomic<uint32_t> epoch_{0};  // job generation published to workers
  std::atomic<int> sleeping_workers_{0};
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<uint32_t> pending_{0};  // chunks of the current job not yet finished
  std::atomic<int> caller_sleeping_{0};
  alignas(64) std::atomic<bool> busy_{false};  // a job is running (guards against concurrent callers)
  // Straggler backoff: until solo_until_ (steady_clock ticks) jobs run on the
  // caller; backoff_ns_ is the next backoff (only the busy_ holder touches it).
  std::atomic<int64_t> solo_until_{0};
  int64_t backoff_ns_;
  int64_t last_backoff_end_ = 0;
  // Contended windows reported by the workers and callers (each samples its
  // own run-queue wait every few split jobs); the busy_ holder compares.
  std::atomic<uint64_t> contended_{0};
  uint64_t contended_seen_ = 0;

  alignas(64) std::atomic<uint64_t> jobs_{0}, inline_jobs_{0}, worker_chunks_{0}, wakes_{0}, sleeps_{0}, stalls_{0},
      solo_jobs_{0}, caller_sleeps_{0};
};

}  // namespace verity::kernels
