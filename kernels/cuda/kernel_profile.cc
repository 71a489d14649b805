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

void KernelProfile::End(const std::string& label, double bytes, bool uploaded) {
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
  pending_.push_back({open_, end, ProfileLabel(label), bytes, uploaded});
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
      table_.Add(p.label, ms, p.bytes, p.uploaded);
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

void ProfileTable::Add(const std::string& label, double ms, double bytes, bool uploaded) {
  Row& r = rows_[label];
  if (uploaded || r.calls + r.apart == 0) {
    r.apart++;
    r.apart_ms += ms;
    return;
  }
  r.calls++;
  r.ms += ms;
  r.bytes += bytes;
}

std::string ProfileTable::Text(long steps) const {
  if (rows_.empty()) return "";
  std::vector<std::pair<std::string, Row>> sorted(rows_.begin(), rows_.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double total = 0, apart = 0;
  for (const auto& [label, r] : sorted) total += r.ms, apart += r.apart_ms;
  const double per = std::max<long>(steps, 1);
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "verity: cuda profile: %.3f ms of device time in %zu kinds of call (and %.3f ms apart: first calls "
                "and uploads), %ld steps, decode or batched (%.1f us a step)\n",
                total, sorted.size(), apart, steps, 1e3 * total / per);
  out += line;
  out +=
      "verity: cuda profile: share | ms | calls | us/call | us/step | apart: calls, us/call | MB/call | GB/s | call\n";
  for (const auto& [label, r] : sorted) {
    const long n = r.calls;
    const double gb_s = r.ms > 0 && r.bytes > 0 ? r.bytes / (r.ms * 1e-3) / 1e9 : 0;
    std::snprintf(line, sizeof line,
                  "verity: cuda profile: %5.1f%% | %9.3f | %7ld | %9.2f | %8.1f | %4ld, %9.1f | %8.3f | %7.1f | %s\n",
                  total > 0 ? 100 * r.ms / total : 0.0, r.ms, n, n > 0 ? 1e3 * r.ms / n : 0.0, 1e3 * r.ms / per,
                  r.apart, r.apart > 0 ? 1e3 * r.apart_ms / r.apart : 0.0, n > 0 ? r.bytes / n / 1e6 : 0.0, gb_s,
                  label.c_str());
    out += line;
  }
  return out;
}

std::string KernelProfile::Table() {
  Resolve();
  return failed_ ? "" : table_.Text(steps_);
}

}  // namespace verity::kernels::cuda
