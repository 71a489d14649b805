#include "protocol/verity_bench.h"

#include <cstdio>
#include <sstream>
#include <utility>

#include "base/env.h"
#include "protocol/bench_record.h"

namespace verity::protocol {
namespace {

nlohmann::json OptionalJson(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

constexpr const char* kSwitchNames[] = {"flash_prefill", "q8_int16", "norm_fused", "dependent_launch", "l2_whole_rows"};
bool* SwitchField(CudaSwitches& s, int i) {
  bool* fields[] = {&s.flash_prefill, &s.q8_int16, &s.norm_fused, &s.dependent_launch, &s.l2_whole_rows};
  return fields[i];
}

nlohmann::json KernelsJson(const VerityBenchRecord& r) {
  if (!r.simd_target && r.cuda_batch_mma) {
    nlohmann::json k = {{"cuda_batch_mma", *r.cuda_batch_mma}};
    if (r.cuda_switches) {
      CudaSwitches s = *r.cuda_switches;
      nlohmann::json sw = nlohmann::json::object();
      for (int i = 0; i < 5; i++) sw[kSwitchNames[i]] = *SwitchField(s, i);
      sw["prefill_block"] = s.prefill_block;
      k["cuda_switches"] = sw;
    }
    return k;
  }
  if (!r.simd_target) return nlohmann::json();
  nlohmann::json k = {{"simd_target", *r.simd_target}, {"stream_prefetch", r.stream_prefetch.value_or(false)}};
  if (r.stream_prefetch_hint) k["stream_prefetch_hint"] = *r.stream_prefetch_hint;
  return k;
}

// RunPhases' fields, in the record's order.
constexpr const char* kPhaseNames[] = {"backend_s", "load_s", "decoder_s", "first_prompt_s", "warmup_s", "timed_s"};
double* PhaseField(RunPhases& p, int i) {
  double* fields[] = {&p.backend_s, &p.load_s, &p.decoder_s, &p.first_prompt_s, &p.warmup_s, &p.timed_s};
  return fields[i];
}

nlohmann::json PoolJson(const std::optional<PoolCounts>& p) {
  if (!p) return nlohmann::json();
  return {{"split_jobs", p->split_jobs},
          {"caller_jobs", p->caller_jobs},
          {"backoff_jobs", p->backoff_jobs},
          {"stalls", p->stalls},
          {"contended_windows", p->contended_windows}};
}

nlohmann::json PhasesJson(std::optional<RunPhases> p) {
  if (!p) return nlohmann::json();
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < 6; i++) j[kPhaseNames[i]] = *PhaseField(*p, i);
  return j;
}

// What the ledger reads of the record.
BenchRecord Envelope(const VerityBenchRecord& r) {
  BenchRecord e;
  e.build = {r.build_id, r.artifact_sha256};
  e.ok = true;
  e.metrics = {
      {"decode_tok_s", r.decode_tok_s}, {"prefill_tok_s", r.prefill_tok_s}, {"prefill_gflops", r.prefill_gflops}};
  if (r.peak_rss_mb) e.metrics["peak_rss_mb"] = *r.peak_rss_mb;
  e.model = r.model, e.backend = r.backend, e.dtype = r.dtype;
  e.threads = r.threads, e.prompt_tokens = r.prompt_tokens, e.gen_tokens = r.gen_tokens, e.batch = r.batch;
  e.bytes_per_token = r.bytes_per_token;
  return e;
}

// verity's detail, beside the envelope.
nlohmann::json Detail(const VerityBenchRecord& r) {
  return {{"steps", r.prompt_tokens + r.gen_tokens},
          {"warmup_tokens", r.warmup_tokens},
          {"generations", r.generations},
          {"min_seconds", r.min_seconds},
          {"spread",
           {{"decode_mad_pct", r.decode_mad_pct},
            {"decode_position_mad_pct", OptionalJson(r.decode_position_mad_pct)},
            {"runqueue_wait_pct", OptionalJson(r.runqueue_wait_pct)},
            {"samples", r.samples}}},
          {"roofline",
           {{"achieved_gb_s", r.achieved_gb_s},
            {"read_gb_s", OptionalJson(r.read_gb_s)},
            {"fraction", OptionalJson(r.fraction)},
            {"kv_bytes_per_token", OptionalJson(r.kv_bytes_per_token)},
            {"achieved_gb_s_with_kv", OptionalJson(r.achieved_gb_s_with_kv)},
            {"fraction_with_kv", OptionalJson(r.fraction_with_kv)}}},
          {"memory",
           {{"weights_mb", OptionalJson(r.weights_mb)},
            {"kv_cache_mb", OptionalJson(r.kv_cache_mb)},
            {"rss_limit_mb", OptionalJson(r.rss_limit_mb)},
            {"baseline_rss_mb", OptionalJson(r.baseline_rss_mb)}}},
          {"affinity", {{"cpus", r.cpus}, {"per_thread", r.per_thread}}},
          {"pool", PoolJson(r.pool)},
          {"kernels", KernelsJson(r)},
          {"phases", PhasesJson(r.phases)},
          {"box", r.box}};
}

// The reader's steps. Each returns an error naming the field's dotted path.
class DetailReader {
 public:
  DetailReader(const nlohmann::json& j, const std::string& what) : j_(j), what_(what) {}

  Status Fail(const std::string& field, const char* want) const {
    return Status::Error(what_ + ": '" + field + "' is missing or not " + want);
  }
  const nlohmann::json* At(const nlohmann::json& o, const std::string& path) const {
    const nlohmann::json* p = &o;
    std::stringstream ss(path);
    for (std::string key; std::getline(ss, key, '.');) {
      if (!p->is_object() || !p->contains(key)) return nullptr;
      p = &(*p)[key];
    }
    return p;
  }
  const nlohmann::json* At(const std::string& path) const { return At(j_, path); }

  Status Strings(VerityBenchRecord* r) const {
    for (auto [path, dst] : {std::pair<const char*, std::string*>{"build.id", &r->build_id},
                             {"build.artifact_sha256", &r->artifact_sha256},
                             {"model", &r->model},
                             {"backend", &r->backend},
                             {"dtype", &r->dtype},
                             {"box", &r->box}}) {
      const nlohmann::json* v = At(path);
      if (!v || !v->is_string()) return Fail(path, "a string");
      *dst = v->get<std::string>();
    }
    return OkStatus();
  }
  Status Integers(VerityBenchRecord* r) const {
    for (auto [path, dst] : {std::pair<const char*, int*>{"threads", &r->threads},
                             {"prompt_tokens", &r->prompt_tokens},
                             {"gen_tokens", &r->gen_tokens},
                             {"warmup_tokens", &r->warmup_tokens},
                             {"generations", &r->generations},
                             {"spread.samples", &r->samples}}) {
      const nlohmann::json* v = At(path);
      if (!v || !v->is_number_integer()) return Fail(path, "an integer");
      *dst = v->get<int>();
    }
    if (const nlohmann::json* v = At("batch")) {
      if (!v->is_number_integer() || v->get<long long>() < 1) return Fail("batch", "an integer >= 1");
      r->batch = v->get<int>();
    }
    return OkStatus();
  }
  Status Numbers(VerityBenchRecord* r) const {
    for (auto [path, dst] : {std::pair<const char*, double*>{"metrics.decode_tok_s", &r->decode_tok_s},
                             {"metrics.prefill_tok_s", &r->prefill_tok_s},
                             {"metrics.prefill_gflops", &r->prefill_gflops},
                             {"min_seconds", &r->min_seconds},
                             {"spread.decode_mad_pct", &r->decode_mad_pct},
                             {"roofline.bytes_per_token", &r->bytes_per_token},
                             {"roofline.achieved_gb_s", &r->achieved_gb_s}}) {
      const nlohmann::json* v = At(path);
      if (!v || !v->is_number()) return Fail(path, "a number");
      *dst = v->get<double>();
    }
    for (auto [path, dst] : {std::pair<const char*, std::optional<double>*>{"metrics.peak_rss_mb", &r->peak_rss_mb},
                             {"roofline.read_gb_s", &r->read_gb_s},
                             {"roofline.fraction", &r->fraction},
                             {"roofline.kv_bytes_per_token", &r->kv_bytes_per_token},
                             {"roofline.achieved_gb_s_with_kv", &r->achieved_gb_s_with_kv},
                             {"roofline.fraction_with_kv", &r->fraction_with_kv},
                             {"spread.decode_position_mad_pct", &r->decode_position_mad_pct},
                             {"spread.runqueue_wait_pct", &r->runqueue_wait_pct},
                             {"memory.weights_mb", &r->weights_mb},
                             {"memory.kv_cache_mb", &r->kv_cache_mb},
                             {"memory.rss_limit_mb", &r->rss_limit_mb},
                             {"memory.baseline_rss_mb", &r->baseline_rss_mb}}) {
      const nlohmann::json* v = At(path);
      if (v && !v->is_null() && !v->is_number()) return Fail(path, "a number or null");
      if (v && v->is_number()) *dst = v->get<double>();
    }
    return OkStatus();
  }
  Status Affinity(VerityBenchRecord* r) const {
    const nlohmann::json* cpus = At("affinity.cpus");
    const nlohmann::json* per_thread = At("affinity.per_thread");
    if (!cpus || !cpus->is_array()) return Fail("affinity.cpus", "an array");
    for (const auto& c : *cpus) {
      if (!c.is_number_integer()) return Fail("affinity.cpus", "an array of integers");
      r->cpus.push_back(c.get<int>());
    }
    if (!per_thread || !per_thread->is_boolean()) return Fail("affinity.per_thread", "a boolean");
    r->per_thread = per_thread->get<bool>();
    return OkStatus();
  }
  // Absent in records written before it existed; null on one thread.
  Status Pool(VerityBenchRecord* r) const {
    const nlohmann::json* pool = At("pool");
    if (!pool || pool->is_null()) return OkStatus();
    if (!pool->is_object()) return Fail("pool", "an object or null");
    PoolCounts p;
    for (auto [key, dst] : {std::pair<const char*, uint64_t*>{"split_jobs", &p.split_jobs},
                            {"caller_jobs", &p.caller_jobs},
                            {"backoff_jobs", &p.backoff_jobs},
                            {"stalls", &p.stalls},
                            {"contended_windows", &p.contended_windows}}) {
      const nlohmann::json* v = At(*pool, key);
      if (!v || !v->is_number_unsigned()) return Fail(std::string("pool.") + key, "a non-negative integer");
      *dst = v->get<uint64_t>();
    }
    r->pool = p;
    return OkStatus();
  }
  // Absent (or null) in records written before 2026-12-07.
  Status Phases(VerityBenchRecord* r) const {
    const nlohmann::json* ph = At("phases");
    if (!ph || ph->is_null()) return OkStatus();
    if (!ph->is_object()) return Fail("phases", "an object or null");
    RunPhases p;
    for (int i = 0; i < 6; i++) {
      const nlohmann::json* v = At(*ph, kPhaseNames[i]);
      if (!v || !v->is_number() || v->get<double>() < 0)
        return Fail(std::string("phases.") + kPhaseNames[i], "a number >= 0");
      *PhaseField(p, i) = v->get<double>();
    }
    r->phases = p;
    return OkStatus();
  }
  Status Kernels(VerityBenchRecord* r) const {
    const nlohmann::json* k = At("kernels");
    if (!k || k->is_null()) return OkStatus();
    if (!k->is_object()) return Fail("kernels", "an object or null");
    if (!k->contains("simd_target") && k->contains("cuda_batch_mma")) {  // the cuda backend's
      const nlohmann::json* mma = At(*k, "cuda_batch_mma");
      if (!mma->is_boolean()) return Fail("kernels.cuda_batch_mma", "a boolean");
      r->cuda_batch_mma = mma->get<bool>();
      const nlohmann::json* sw = At(*k, "cuda_switches");
      if (!sw || sw->is_null()) return OkStatus();  // written before 2026-12-07
      if (!sw->is_object()) return Fail("kernels.cuda_switches", "an object");
      CudaSwitches s;
      for (int i = 0; i < 5; i++) {
        const nlohmann::json* v = At(*sw, kSwitchNames[i]);
        if (!v || !v->is_boolean()) return Fail(std::string("kernels.cuda_switches.") + kSwitchNames[i], "a boolean");
        *SwitchField(s, i) = v->get<bool>();
      }
      if (const nlohmann::json* block = At(*sw, "prefill_block")) {  // absent before 2026-12-07: 512
        if (!block->is_number_integer() || !env::IsCudaPrefillBlock(block->get<long long>()))
          return Fail("kernels.cuda_switches.prefill_block", env::kCudaPrefillBlockRule);
        s.prefill_block = block->get<int>();
      }
      r->cuda_switches = s;
      return OkStatus();
    }
    const nlohmann::json* target = At(*k, "simd_target");
    const nlohmann::json* prefetch = At(*k, "stream_prefetch");
    if (!target || !target->is_string() || target->get<std::string>().empty())
      return Fail("kernels.simd_target", "a non-empty string");
    if (!prefetch || !prefetch->is_boolean()) return Fail("kernels.stream_prefetch", "a boolean");
    r->simd_target = target->get<std::string>();
    r->stream_prefetch = prefetch->get<bool>();
    const nlohmann::json* hint = At(*k, "stream_prefetch_hint");
    if (!hint || hint->is_null()) return OkStatus();
    const std::string h = hint->is_string() ? hint->get<std::string>() : "";
    if (h != "nta" && h != "t0" && h != "off") return Fail("kernels.stream_prefetch_hint", "one of nta, t0, off");
    if ((h != "off") != *r->stream_prefetch)
      return Fail("kernels.stream_prefetch_hint",
                  *r->stream_prefetch ? "nta or t0 (stream_prefetch is true)" : "off (stream_prefetch is false)");
    r->stream_prefetch_hint = h;
    return OkStatus();
  }

 private:
  const nlohmann::json& j_;
  const std::string& what_;
};

}  // namespace

std::string CudaSwitchesSet(const CudaSwitches& s) {
  std::string out;
  auto add = [&](bool away, const char* setting) {
    if (!away) return;
    if (!out.empty()) out += ' ';
    out += setting;
  };
  add(s.flash_prefill, "VERITY_CUDA_FLASH_PREFILL=1");
  add(s.q8_int16, "VERITY_CUDA_Q8_INT16=1");
  add(s.norm_fused, "VERITY_CUDA_NORM_FUSED=1");
  add(!s.dependent_launch, "VERITY_CUDA_PDL=0");
  add(!s.l2_whole_rows, "VERITY_CUDA_L2_PREFETCH=0");
  add(s.prefill_block != 512, ("VERITY_CUDA_PREFILL_BLOCK=" + std::to_string(s.prefill_block)).c_str());
  return out.empty() ? "defaults" : out;
}

std::string RunPhasesLine(const RunPhases& p) {
  const char* labels[] = {"backend", "model load", "decoder", "first prompt", "warm-up", "timed"};
  std::string out;
  double all = 0.0;
  RunPhases q = p;
  for (int i = 0; i < 6; i++) {
    char part[64];
    std::snprintf(part, sizeof part, "%s%s %.2f s", i ? ", " : "", labels[i], *PhaseField(q, i));
    out += part;
    all += *PhaseField(q, i);
  }
  char tail[48];
  std::snprintf(tail, sizeof tail, " (%.2f s in all)", all);
  return out + tail;
}

nlohmann::json ToJson(const VerityBenchRecord& r) {
  BenchRecord e = Envelope(r);
  e.extra = Detail(r);
  return ToJson(e);
}

Result<VerityBenchRecord> VerityBenchFromJson(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object() || !j.contains("schema") || j["schema"] != kBenchSchema)
    return Status::Error(what + ": not a " + std::string(kBenchSchema) + " object");
  VerityBenchRecord r;
  const DetailReader read(j, what);
  VERITY_RETURN_IF_ERROR(read.Strings(&r));
  VERITY_RETURN_IF_ERROR(read.Integers(&r));
  VERITY_RETURN_IF_ERROR(read.Numbers(&r));
  VERITY_RETURN_IF_ERROR(read.Affinity(&r));
  VERITY_RETURN_IF_ERROR(read.Pool(&r));
  VERITY_RETURN_IF_ERROR(read.Kernels(&r));
  VERITY_RETURN_IF_ERROR(read.Phases(&r));
  // Then the envelope as the ledger reads it (every number in its range): a
  // record this accepts, the ledger accepts.
  VERITY_RETURN_IF_ERROR(BenchRecordFromJson(j, what).status());
  return r;
}

}  // namespace verity::protocol
