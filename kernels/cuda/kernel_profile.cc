// See kernel_profile.h.
#include "kernels/cuda/kernel_profile.h"

#include <algorithm>
#include <cstdio>
#include <regex>

#include "kernels/cuda/check.h"

namespace verity::kernels::cuda {

std::string ProfileLabel(const std::string& where) {
  static const std::regex layer(R"(^layer [0-9]+ )"), pos(R"( pos0?=[0-9]+)");
  return std::regex_replace(std::regex_replace(where, layer, ""), pos, "");
}

KernelProfile::~KernelProfile() {
  for (const Pending& p : pending_) pool_.insert(pool_.end(), {p.begin, p.end});
  if (open_) pool_.push_back(open_);
  for (cudaEvent_t e : pool_) VERITY_CUDA_CALL_LOG(cudaEventDestroy(e), "a profile event");
}

cudaEvent_t KernelProfile::Event() {
  if (!pool_.empty()) {
    cudaEvent_t e = pool_.back();
    pool_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  const Status made = [&]() -> Status {
    VERITY_CUDA_CALL(cudaEventCreate(&e), "a profile event");
    return OkStatus();
  }();
  if (!made.ok()) {
    if (!failed_) std::fprintf(stderr, "verity: cuda profile: off: %s\n", made.message().c_str());
    failed_ = true;
    return nullptr;
  }
  return e;
}

void KernelProfile::Begin() {
  if (failed_ || open_) return;
  open_ = Event();
  if (!open_) return;
  const Status rec = [&]() -> Status {
    VERITY_CUDA_CALL(cudaEventRecord(open_, stream_), "a profile event");
    return OkStatus();
  }();
  if (!rec.ok()) failed_ = true;
}

void KernelProfile::End(const std::string& label, double bytes) {
  if (failed_ || !open_) return;
  cudaEvent_t end = Event();
  if (!end) return;
  const Status rec = [&]() -> Status {
    VERITY_CUDA_CALL(cudaEventRecord(end, stream_), "a profile event");
    return OkStatus();
  }();
  if (!rec.ok()) {
    failed_ = true;
    return;
  }
  pending_.push_back({open_, end, ProfileLabel(label), bytes});
  open_ = nullptr;
  if (pending_.size() >= 8192) Resolve();  // bounded: a long run waits now and then
}

void KernelProfile::Resolve() {
  if (pending_.empty()) return;
  const Status read = [&]() -> Status {
    VERITY_CUDA_CALL(cudaEventSynchronize(pending_.back().end), "waiting for the profiled calls");
    for (const Pending& p : pending_) {
      float ms = 0;
      VERITY_CUDA_CALL(cudaEventElapsedTime(&ms, p.begin, p.end), "a profiled call's time");
      Row& r = rows_[p.label];
      if (r.calls++ == 0) {
        r.first_ms = ms;
        continue;
      }
      r.ms += ms;
      r.bytes += p.bytes;
    }
    return OkStatus();
  }();
  if (!read.ok() && !failed_) {
    std::fprintf(stderr, "verity: cuda profile: off: %s\n", read.message().c_str());
    failed_ = true;
  }
  for (const Pending& p : pending_) pool_.insert(pool_.end(), {p.begin, p.end});
  pending_.clear();
}

std::string KernelProfile::Table() {
  Resolve();
  if (failed_ || rows_.empty()) return "";
  std::vector<std::pair<std::string, Row>> sorted(rows_.begin(), rows_.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0, first = 0;
  for (const auto& [label, r] : sorted) total += r.ms, first += r.first_ms;
  const double steps = std::max<long>(steps_, 1);
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "verity: cuda profile: %.3f ms of device time in %zu kinds of call (and %.3f ms in their first calls), "
                "%ld decode steps (%.1f us a step)\n",
                total, sorted.size(), first, steps_, 1e3 * total / steps);
  out += line;
  out += "verity: cuda profile: share | ms | calls | us/call | us/step | first us | MB/call | GB/s | call\n";
  for (const auto& [label, r] : sorted) {
    const long rest = r.calls - 1;
    const double gb_s = r.ms > 0 && r.bytes > 0 ? r.bytes / (r.ms * 1e-3) / 1e9 : 0;
    std::snprintf(line, sizeof line,
                  "verity: cuda profile: %5.1f%% | %9.3f | %7ld | %9.2f | %8.1f | %9.1f | %8.3f | %7.1f | %s\n",
                  total > 0 ? 100 * r.ms / total : 0.0, r.ms, r.calls, rest > 0 ? 1e3 * r.ms / rest : 0.0,
                  1e3 * r.ms / steps, 1e3 * r.first_ms, rest > 0 ? r.bytes / rest / 1e6 : 0.0, gb_s, label.c_str());
    out += line;
  }
  return out;
}

}  // namespace verity::kernels::cuda
