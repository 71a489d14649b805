#include "kernels/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>

#if defined(__linux__)
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace verity::kernels {
namespace {

// Chunks per thread: enough that a late or descheduled worker leaves little for
// the others to wait on, few enough that claims stay cheap.
constexpr int kChunksPerThread = 4;
constexpr int kMaxChunks = 0xffff;
// A sleeping worker is woken for a job only when the work left after the
// caller's first chunk would take the caller at least this long alone: about
// what a futex wake-up takes to bring a worker to a chunk on a virtual machine.
constexpr auto kWakeWorth = std::chrono::microseconds(30);
// After a job that helpers made slower, or when a pool thread waited for a CPU
// (the cores are shared with another busy process), jobs run on the
// caller alone for a backoff from kBackoffMin, doubling up to kBackoffMax while
// retries hurt; it resets once a backoff's length passes with none.
constexpr std::chrono::nanoseconds kBackoffMin = std::chrono::milliseconds(5);
constexpr std::chrono::nanoseconds kBackoffMax = std::chrono::milliseconds(500);
// A job counts as stalled (helpers hurt) only when the caller also waited at
// least this long for a worker's chunk. A descheduled worker costs the rest of
// another process's time slice (milliseconds); a worker that merely finished
// its last chunk a few microseconds late did not hurt. Without this floor,
// such jitter on q8_0's ~15 us matrix-vector jobs set off backoffs that kept
// ~80% of a 2-thread decode's jobs on the caller alone (bf16 and q8_0 decode
// on the ~110M synth: 30-50% slower than with no stall backoff at all).
constexpr auto kStallWait = std::chrono::microseconds(200);

// The job a thread is running chunks of (a nested ParallelFor runs inline).
thread_local const ThreadPool* t_running = nullptr;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Blocks while *word == expected (or until woken; callers re-check).
inline void FutexWait(std::atomic<uint32_t>& word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  word.wait(expected);
#endif
}
inline void FutexWake(std::atomic<uint32_t>& word, int count) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
#else
  if (count == 1) {
    word.notify_one();
  } else {
    word.notify_all();
  }
#endif
}

// The system clock: steady_clock, and the scheduler's own account of how long
// the calling thread waited for a CPU while runnable
// (/proc/thread-self/schedstat, field 2, in ns), read through a descriptor
// each thread opens once and closes when it exits.
class SystemClock : public PoolClock {
 public:
  std::chrono::steady_clock::time_point Now() const override { return std::chrono::steady_clock::now(); }
  int64_t RunDelayNs() const override {
#if defined(__linux__)
    thread_local const Schedstat stat;
    if (stat.fd < 0) return -1;
    char buf[96];
    const ssize_t n = ::pread(stat.fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return -1;
    buf[n] = '\0';
    unsigned long long cpu = 0, wait = 0;
    if (std::sscanf(buf, "%llu %llu", &cpu, &wait) != 2) return -1;
    return static_cast<int64_t>(wait);
#else
    return -1;
#endif
  }

 private:
#if defined(__linux__)
  struct Schedstat {
    Schedstat() : fd(::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}
    ~Schedstat() {
      if (fd >= 0) ::close(fd);
    }
    int fd;
  };
#endif
};

// Whether a thread waited for a CPU more than 5% of a >= 5 ms window. A pool
// thread that does shares its core with another busy process; on this box's
// quiet 2-core VM the figure is ~0.5% (kernel threads), with one busy
// neighbour ~35%.
class RunDelaySampler {
 public:
  using Clock = std::chrono::steady_clock;
  // Starts a new window now (after a sleep, whose time is not a wait).
  void Rebase(const PoolClock& c, Clock::time_point now) {
    started_ = true;
    last_ = now;
    last_delay_ = c.RunDelayNs();
  }
  // True when the window that ends now (if it is long enough to judge) had
  // the thread waiting for a CPU more than 5% of it. The first call only
  // starts a window.
  bool Contended(const PoolClock& c, Clock::time_point now) {
    if (started_ && now - last_ < kWindow) return false;
    const int64_t d = c.RunDelayNs();
    const bool contended = started_ && d >= 0 && last_delay_ >= 0 && (d - last_delay_) * 20 > (now - last_).count();
    started_ = true;
    last_ = now;
    last_delay_ = d;
    return contended;
  }

 private:
  static constexpr std::chrono::nanoseconds kWindow = std::chrono::milliseconds(5);
  bool started_ = false;
  Clock::time_point last_;
  int64_t last_delay_ = -1;
};
// Split jobs (worker participations) between looks at the clock for a sample.
constexpr int kSampleEvery = 8;

// Spins (pausing) until done() or spin_us have passed; returns done().
template <class Done>
bool SpinUntil(const Done& done, int spin_us) {
  if (done()) return true;
  if (spin_us <= 0) return false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (int i = 1;; i++) {
    CpuRelax();
    if (done()) return true;
    if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) return done();
  }
}

// Pool ids start at 1: 0 marks a caller that has sampled for no pool yet.
std::atomic<uint64_t> g_next_pool_id{1};

}  // namespace

const PoolClock& PoolClock::System() {
  static const SystemClock clock;
  return clock;
}

ThreadPool::ThreadPool(int threads, int spin_us, const PoolClock* clock)
    : spin_us_(std::max(0, spin_us)),
      clock_(clock ? *clock : PoolClock::System()),
      id_(g_next_pool_id.fetch_add(1, std::memory_order_relaxed)),
      backoff_ns_(kBackoffMin.count()) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word");
  for (int i = 1; i < threads; i++) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_seq_cst);
  epoch_.fetch_add(1, std::memory_order_seq_cst);
  FutexWake(epoch_, INT_MAX);
  for (auto& t : workers_) t.join();
}

ThreadPool::Stats ThreadPool::stats() const {
  Stats s;
  s.jobs = jobs_.load(std::memory_order_relaxed);
  s.inline_jobs = inline_jobs_.load(std::memory_order_relaxed);
  s.worker_chunks = worker_chunks_.load(std::memory_order_relaxed);
  s.wakes = wakes_.load(std::memory_order_relaxed);
  s.sleeps = sleeps_.load(std::memory_order_relaxed);
  s.asleep = static_cast<uint64_t>(std::max(0, sleeping_workers_.load(std::memory_order_relaxed)));
  s.caller_sleeps = caller_sleeps_.load(std::memory_order_relaxed);
  s.stalls = stalls_.load(std::memory_order_relaxed);
  s.solo_jobs = solo_jobs_.load(std::memory_order_relaxed);
  s.contended = contended_.load(std::memory_order_relaxed);
  return s;
}

int ThreadPool::RunChunks(uint32_t gen) {
  int ran = 0;
  for (;;) {
    // Generation, chunk count and next chunk come from one atomic word, so a
    // late worker can never claim past the end of a finished job, and the job
    // fields it reads after a successful claim are that job's (the caller does
    // not rewrite them until every claimed chunk is done).
    uint64_t cur = claim_.load(std::memory_order_acquire);
    if (static_cast<uint32_t>(cur >> 32) != gen) return ran;  // a newer job: not ours
    const int count = static_cast<int>((cur >> 16) & 0xffffu), c = static_cast<int>(cur & 0xffffu);
    if (c >= count) return ran;  // nothing left
    if (!claim_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) continue;
    const int begin = c * chunk_, end = std::min(job_n_, begin + chunk_);
    (*job_)(begin, end);
    ran++;
    // The last chunk done wakes a caller that went to sleep waiting for it
    // (seq_cst pairs with the caller's store of caller_sleeping_ then load of
    // pending_: one of the two sees the other).
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_sleeping_.load(std::memory_order_seq_cst) != 0)
      FutexWake(pending_, 1);
  }
}

void ThreadPool::WakeWorkers() {
  // Pairs with WorkerLoop: a worker registers in sleeping_workers_ and then
  // re-reads epoch_ (both seq_cst), the caller bumped epoch_ and then reads
  // sleeping_workers_, so a worker about to sleep is always either seen here
  // or sees the new epoch itself.
  if (sleeping_workers_.load(std::memory_order_seq_cst) > 0) {
    FutexWake(epoch_, INT_MAX);
    wakes_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ThreadPool::WaitForChunks() {
  if (SpinUntil([&] { return pending_.load(std::memory_order_acquire) == 0; }, spin_us_)) return;
  caller_sleeps_.fetch_add(1, std::memory_order_relaxed);
  caller_sleeping_.store(1, std::memory_order_seq_cst);
  for (uint32_t p; (p = pending_.load(std::memory_order_seq_cst)) != 0;) FutexWait(pending_, p);
  caller_sleeping_.store(0, std::memory_order_relaxed);
}

void ThreadPool::Backoff(std::chrono::steady_clock::time_point now) {
  const int64_t t = now.time_since_epoch().count();
  solo_until_.store(t + backoff_ns_, std::memory_order_relaxed);
  last_backoff_end_ = t + backoff_ns_;
  backoff_ns_ = std::min<int64_t>(backoff_ns_ * 2, kBackoffMax.count());
}

void ThreadPool::MaybeResetBackoff(std::chrono::steady_clock::time_point now) {
  // A backoff's length past the last one with helpers helping: start over.
  if (now.time_since_epoch().count() - last_backoff_end_ > backoff_ns_) backoff_ns_ = kBackoffMin.count();
}

void ThreadPool::PublishJob(int n, const std::function<void(int, int)>& fn, int max_chunks, int grain) {
  // No chunk of the previous job is claimable (all were done), so the job
  // fields may be rewritten before the new generation is published.
  const uint32_t gen = epoch_.load(std::memory_order_relaxed) + 1;
  job_ = &fn;
  job_n_ = n;
  chunk_ = ((n + max_chunks - 1) / max_chunks + grain - 1) / grain * grain;  // a multiple of grain
  chunks_ = (n + chunk_ - 1) / chunk_;
  pending_.store(static_cast<uint32_t>(chunks_), std::memory_order_relaxed);
  claim_.store((static_cast<uint64_t>(gen) << 32) | (static_cast<uint64_t>(chunks_) << 16), std::memory_order_release);
  epoch_.store(gen, std::memory_order_seq_cst);  // spinning workers start now
}

int ThreadPool::RunCallerChunks(int n, const std::function<void(int, int)>& fn,
                                std::chrono::steady_clock::time_point start) {
  // Sleeping workers are woken only for a job worth it: after the caller's own
  // first chunk, when what is left would take it longer than a worker needs to
  // wake (so small jobs never pay for a system call; spinning workers take
  // chunks without being woken).
  const bool some_asleep = sleeping_workers_.load(std::memory_order_seq_cst) > 0;
  int mine = 0;
  uint64_t cur = claim_.load(std::memory_order_acquire);
  for (;;) {
    const int count = static_cast<int>((cur >> 16) & 0xffffu), c = static_cast<int>(cur & 0xffffu);
    if (c >= count) break;
    if (!claim_.compare_exchange_weak(cur, cur + 1, std::memory_order_acq_rel)) continue;
    const int begin = c * chunk_, end = std::min(n, begin + chunk_);
    fn(begin, end);
    pending_.fetch_sub(1, std::memory_order_seq_cst);
    cur = claim_.load(std::memory_order_acquire);
    if (mine++ == 0 && some_asleep) {
      const int left = count - static_cast<int>(cur & 0xffffu);
      if (left > 0 && (clock_.Now() - start) * left >= kWakeWorth) WakeWorkers();
    }
  }
  return mine;
}

void ThreadPool::SampleCallerRunDelay(std::chrono::steady_clock::time_point start) {
  // The calling thread samples its own waits for a CPU too (its window
  // starts over when it calls into another pool, whose clock may differ).
  struct CallerSample {
    uint64_t pool = 0;
    RunDelaySampler sampler;
    int jobs = 0;
  };
  thread_local CallerSample t_caller;
  if (t_caller.pool != id_) {
    t_caller = CallerSample{id_, RunDelaySampler(), 0};
    t_caller.sampler.Rebase(clock_, start);
  }
  if (++t_caller.jobs >= kSampleEvery) {
    t_caller.jobs = 0;
    if (t_caller.sampler.Contended(clock_, clock_.Now())) contended_.fetch_add(1, std::memory_order_relaxed);
  }
}

void ThreadPool::AwaitHelpers(std::chrono::steady_clock::time_point start, int mine) {
  using Clock = std::chrono::steady_clock;
  if (pending_.load(std::memory_order_acquire) == 0) {
    if (mine < chunks_) MaybeResetBackoff(start);  // helped, and nobody waited
  } else {
    // A worker still holds a chunk. Normally it finishes within about a chunk;
    // on a shared machine it may have been descheduled mid-chunk, and the
    // caller waits out the other process's time slice (milliseconds, on a job
    // of microseconds). When the job took longer than the caller alone would
    // have (its own chunks' pace times all chunks), the helpers hurt: the
    // next jobs run on the caller only, for a backoff that doubles while
    // retries keep hurting (so a busy machine costs one slow job now and then,
    // and 2 threads stay about as fast as 1) and resets once a backoff's
    // length passes with helpers helping.
    const Clock::time_point wait_start = clock_.Now();
    WaitForChunks();
    const Clock::time_point end = clock_.Now();
    if (mine > 0) {
      const auto alone = (wait_start - start) * chunks_ / mine;
      if ((end - start) * 4 > alone * 5 && end - wait_start >= kStallWait) {
        stalls_.fetch_add(1, std::memory_order_relaxed);
        Backoff(end);
      } else if ((end - start) * 10 < alone * 9) {
        MaybeResetBackoff(end);
      }
    }
  }
}

void ThreadPool::ParallelFor(int n, const std::function<void(int, int)>& fn, int grain) {
  if (n <= 0) return;
  grain = std::max(1, grain);
  // Every chunk at least `grain` long: at most n / grain of them.
  const int max_chunks = std::min({n / grain, size() * kChunksPerThread, kMaxChunks});
  using Clock = std::chrono::steady_clock;
  // No workers, too small to split, nested inside a job, helpers recently cost
  // more than they gave (see below), or another thread's job is running: all of
  // it here.
  Clock::time_point start{};
  bool solo = workers_.empty() || max_chunks < 2 || t_running == this;
  if (!solo) {
    start = clock_.Now();
    if (start.time_since_epoch().count() < solo_until_.load(std::memory_order_relaxed)) {
      solo = true;
      solo_jobs_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (solo || busy_.exchange(true, std::memory_order_acquire)) {
    inline_jobs_.fetch_add(1, std::memory_order_relaxed);
    fn(0, n);
    return;
  }
  // A pool thread found itself waiting for a CPU since the last look: the
  // cores are shared with another busy process, and this job runs here alone.
  if (const uint64_t c = contended_.load(std::memory_order_relaxed); c != contended_seen_) {
    contended_seen_ = c;
    Backoff(start);
    solo_jobs_.fetch_add(1, std::memory_order_relaxed);
    inline_jobs_.fetch_add(1, std::memory_order_relaxed);
    fn(0, n);
    busy_.store(false, std::memory_order_release);
    return;
  }
  jobs_.fetch_add(1, std::memory_order_relaxed);
  PublishJob(n, fn, max_chunks, grain);

  t_running = this;
  const int mine = RunCallerChunks(n, fn, start);
  t_running = nullptr;
  SampleCallerRunDelay(start);
  AwaitHelpers(start, mine);
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::WorkerLoop() {
  uint32_t seen = 0;
  RunDelaySampler sampler;
  sampler.Rebase(clock_, clock_.Now());
  int jobs_since_sample = 0;
  for (;;) {
    uint32_t gen = epoch_.load(std::memory_order_acquire);
    if (gen == seen && !SpinUntil([&] { return epoch_.load(std::memory_order_acquire) != seen; }, spin_us_)) {
      sleeps_.fetch_add(1, std::memory_order_relaxed);
      sleeping_workers_.fetch_add(1, std::memory_order_seq_cst);
      while (epoch_.load(std::memory_order_seq_cst) == seen) FutexWait(epoch_, seen);
      sleeping_workers_.fetch_sub(1, std::memory_order_seq_cst);
      sampler.Rebase(clock_, clock_.Now());
    }
    if (stop_.load(std::memory_order_acquire)) return;
    gen = epoch_.load(std::memory_order_acquire);
    seen = gen;
    t_running = this;
    const int ran = RunChunks(gen);
    t_running = nullptr;
    if (ran > 0) worker_chunks_.fetch_add(static_cast<uint64_t>(ran), std::memory_order_relaxed);
    if (++jobs_since_sample >= kSampleEvery) {
      jobs_since_sample = 0;
      if (sampler.Contended(clock_, clock_.Now())) contended_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace verity::kernels
