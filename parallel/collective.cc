// The in-process collective (threads sharing memory), the dtype guard and the
// start-up all-reduce check.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "parallel/collective.h"

namespace verity::parallel {

const char* ReduceDTypeName(ReduceDType t) { return t == ReduceDType::kF32 ? "f32" : "bf16"; }

Status CheckReduceDType(const std::string& backend, ReduceDType dtype) {
  if (dtype == ReduceDType::kF32) return OkStatus();
  return Status::Error("collective " + backend + ": reducing in " + ReduceDTypeName(dtype) +
                       " is refused: the residual stream is f32 and an all-reduce must not round it");
}

void Collective::AllReduceSumOnDevice(float*, size_t n, void*) {
  std::fprintf(stderr, "verity: error: collective %s (rank %d of %d) cannot reduce device memory (%zu floats)\n",
               name(), rank(), size(), n);
  std::fflush(stderr);
  std::_Exit(1);
}

// A reusable barrier: the last arrival bumps the generation. Waiters spin a
// while first (ranks usually arrive within microseconds of each other, and a
// sleep and wake-up costs tens of them), yielding the CPU between looks so an
// oversubscribed box still makes progress, then sleep on the condition.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void Wait() {
    const long gen = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      arrived_.store(0, std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> lock(mu_);
        generation_.store(gen + 1, std::memory_order_release);
      }
      cv_.notify_all();
      return;
    }
    for (int i = 0; i < kSpins; i++) {
      if (generation_.load(std::memory_order_acquire) != gen) return;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != gen; });
  }

 private:
  static constexpr int kSpins = 2000;
  std::mutex mu_;
  std::condition_variable cv_;
  const int n_;
  std::atomic<int> arrived_{0};
  std::atomic<long> generation_{0};
};

struct InProcGroup::Shared {
  explicit Shared(int n) : size(n), barrier(n), inputs(n, nullptr) {}
  int size;
  Barrier barrier;
  std::vector<float*> inputs;  // each rank's buffer for the current call
  std::vector<float> result;
};

namespace {

class InProcRank : public Collective {
 public:
  InProcRank(InProcGroup::Shared* s, int rank) : s_(s), rank_(rank) {}
  // Rank r publishes its buffer; after the barrier, rank r sums its chunk of
  // elements over every rank in rank order into the shared result; after a
  // second barrier every rank copies the result. A rank reaches its next call
  // only after copying, and the next call's first barrier needs every rank,
  // so nobody overwrites the result or a buffer that is still being read.
  void AllReduceSum(float* x, size_t n) override {
    if (s_->size == 1) return;
    // Read before the first barrier: nobody resizes the result until every
    // rank has passed it, so every rank sees the same size here.
    const bool grow = s_->result.size() < n;
    s_->inputs[rank_] = x;
    s_->barrier.Wait();
    if (grow) {
      if (rank_ == 0) s_->result.resize(n);
      s_->barrier.Wait();
    }
    const size_t lo = n * rank_ / s_->size, hi = n * (rank_ + 1) / s_->size;
    float* out = s_->result.data();
    for (size_t i = lo; i < hi; i++) {
      float sum = s_->inputs[0][i];
      for (int r = 1; r < s_->size; r++) sum += s_->inputs[r][i];
      out[i] = sum;
    }
    s_->barrier.Wait();
    std::memcpy(x, out, n * sizeof(float));
  }
  void Barrier() override { s_->barrier.Wait(); }
  int rank() const override { return rank_; }
  int size() const override { return s_->size; }
  const char* name() const override { return "inproc"; }

 private:
  InProcGroup::Shared* s_;
  int rank_;
};

}  // namespace

Result<std::unique_ptr<InProcGroup>> InProcGroup::Create(int size, ReduceDType dtype) {
  VERITY_RETURN_IF_ERROR(CheckReduceDType("inproc", dtype));
  if (size < 1) return Status::Error("inproc collective: size " + std::to_string(size) + " is below 1");
  std::unique_ptr<InProcGroup> g(new InProcGroup());
  g->shared_ = std::make_unique<Shared>(size);
  for (int r = 0; r < size; r++) g->ranks_.push_back(std::make_unique<InProcRank>(g->shared_.get(), r));
  return g;
}

InProcGroup::~InProcGroup() = default;
Collective& InProcGroup::Rank(int r) { return *ranks_.at(r); }
int InProcGroup::size() const { return shared_->size; }

Status CheckAllReduce(Collective& c, size_t n) {
  const int p = c.size(), r = c.rank();
  std::vector<float> x(n, static_cast<float>(r + 1));
  c.AllReduceSum(x.data(), n);
  const float want = static_cast<float>(p) * (p + 1) / 2;
  long bad = -1;
  for (size_t i = 0; i < n && bad < 0; i++)
    if (x[i] != want) bad = static_cast<long>(i);
  // Every rank learns whether any rank failed, so every rank stops together.
  float failed[1] = {bad >= 0 ? 1.0f : 0.0f};
  c.AllReduceSum(failed, 1);
  if (bad >= 0)
    return Status::Error("all-reduce check (" + std::string(c.name()) + ", tp=" + std::to_string(p) + "): rank " +
                         std::to_string(r) + " read " + std::to_string(x[bad]) + " at element " + std::to_string(bad) +
                         ", expected tp(tp+1)/2 = " + std::to_string(want));
  if (failed[0] != 0.0f)
    return Status::Error("all-reduce check (" + std::string(c.name()) + ", tp=" + std::to_string(p) +
                         "): " + std::to_string(static_cast<int>(failed[0])) + " rank(s) read a wrong sum");
  return OkStatus();
}

}  // namespace verity::parallel
