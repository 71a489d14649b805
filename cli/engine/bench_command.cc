// verity bench: the bench protocol (one verity.bench/1 record), timed quietly
// enough for the ledger's 2% gate, with the box's roofline beside the numbers.
//
// A sample (one process) loads the model, pins itself, warms up, then runs
// whole generations (a teacher-forced prompt, then greedy decode, from
// position 0: a fresh cache) until the decode part has taken --min-seconds.
// Every decode token is timed alone; decode tok/s is 1 / the median token
// time, so a descheduled token or a page fault moves it by one rank, not by
// its length. See docs/bench.md.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "base/build_info.h"
#include "base/env.h"
#include "base/median.h"
#include "cli/engine/commands.h"
#include "cli/engine/memory_bound.h"
#include "engine/engine.h"
#include "engine/slots.h"
#include "measure/measure.h"
#include "measure/roofline.h"
#include "protocol/verity_bench.h"

namespace verity::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Warm-up before any timed position: at least this many decode positions and
// this long (the bench's own generations, untimed). Reported as warmup_tokens.
constexpr int kWarmupMinTokens = 8;
constexpr double kWarmupMinSeconds = 0.1;

// ---- the record ------------------------------------------------------------

// One bench result: what every --output format prints (protocol/verity_bench.h).
using BenchRecord = protocol::VerityBenchRecord;
using protocol::PoolCounts;

// A number as JSON writes it (shortest round-trip form): csv holds exactly
// the JSON's numbers.
std::string Num(double v) { return nlohmann::json(v).dump(); }
std::string Num(const std::optional<double>& v) { return v ? Num(*v) : ""; }
std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}
std::string CsvString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}
std::string CpuList(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size(); i++) {
    if (i) s += ',';
    s += std::to_string(cpus[i]);
  }
  return s;
}

// The six phase columns (empty where the record has none).
std::string PhasesCsv(const std::optional<protocol::RunPhases>& p) {
  if (!p) return ",,,,,";
  std::string out;
  for (double v : {p->backend_s, p->load_s, p->decoder_s, p->first_prompt_s, p->warmup_s, p->timed_s})
    out += (out.empty() ? "" : ",") + Num(v);
  return out;
}

std::string PrintCsv(const BenchRecord& r) {
  std::string header =
      "build_id,artifact_sha256,model,backend,dtype,threads,prompt_tokens,gen_tokens,warmup_tokens,generations,"
      "min_seconds,decode_tok_s,prefill_tok_s,prefill_gflops,peak_rss_mb,decode_mad_pct,decode_position_mad_pct,"
      "runqueue_wait_pct,samples,bytes_per_token,"
      "achieved_gb_s,read_gb_s,fraction,kv_bytes_per_token,achieved_gb_s_with_kv,fraction_with_kv,"
      "cpus,per_thread,box,weights_mb,kv_cache_mb,rss_limit_mb,"
      "pool_split_jobs,pool_caller_jobs,pool_backoff_jobs,pool_stalls,pool_contended_windows,"
      "kernels_simd_target,kernels_stream_prefetch,baseline_rss_mb,kernels_stream_prefetch_hint,kernels_cuda_batch_"
      "mma,kernels_cuda_switches,phases_backend_s,phases_load_s,phases_decoder_s,phases_first_prompt_s,phases_"
      "warmup_s,phases_timed_s\n";
  auto count = [&](uint64_t PoolCounts::*field) { return r.pool ? std::to_string((*r.pool).*field) : std::string(); };
  std::string row =
      CsvString(r.build_id) + "," + CsvString(r.artifact_sha256) + "," + CsvString(r.model) + "," +
      CsvString(r.backend) + "," + CsvString(r.dtype) + "," + std::to_string(r.threads) + "," +
      std::to_string(r.prompt_tokens) + "," + std::to_string(r.gen_tokens) + "," + std::to_string(r.warmup_tokens) +
      "," + std::to_string(r.generations) + "," + Num(r.min_seconds) + "," + Num(r.decode_tok_s) + "," +
      Num(r.prefill_tok_s) + "," + Num(r.prefill_gflops) + "," + Num(r.peak_rss_mb) + "," + Num(r.decode_mad_pct) +
      "," + Num(r.decode_position_mad_pct) + "," + Num(r.runqueue_wait_pct) + "," + std::to_string(r.samples) + "," +
      Num(r.bytes_per_token) + "," + Num(r.achieved_gb_s) + "," + Num(r.read_gb_s) + "," + Num(r.fraction) + "," +
      Num(r.kv_bytes_per_token) + "," + Num(r.achieved_gb_s_with_kv) + "," + Num(r.fraction_with_kv) + "," +
      CsvString(CpuList(r.cpus)) + "," + (r.per_thread ? "true" : "false") + "," + CsvString(r.box) + "," +
      Num(r.weights_mb) + "," + Num(r.kv_cache_mb) + "," + Num(r.rss_limit_mb) + "," + count(&PoolCounts::split_jobs) +
      "," + count(&PoolCounts::caller_jobs) + "," + count(&PoolCounts::backoff_jobs) + "," +
      count(&PoolCounts::stalls) + "," + count(&PoolCounts::contended_windows) + "," +
      (r.simd_target ? CsvString(*r.simd_target) : std::string()) + "," +
      (r.stream_prefetch ? (*r.stream_prefetch ? "true" : "false") : "") + "," + Num(r.baseline_rss_mb) + "," +
      (r.stream_prefetch_hint ? CsvString(*r.stream_prefetch_hint) : std::string()) + "," +
      (r.cuda_batch_mma ? (*r.cuda_batch_mma ? "true" : "false") : "") + "," +
      (r.cuda_switches ? CsvString(protocol::CudaSwitchesSet(*r.cuda_switches)) : std::string()) + "," +
      PhasesCsv(r.phases) + "\n";
  return header + row;
}

// llama-bench's layout: one table row per record; "pp64+tg64" names the test.
std::string PrintMd(const BenchRecord& r) {
  std::string name = r.model.substr(r.model.find_last_of('/') == std::string::npos ? 0 : r.model.find_last_of('/') + 1);
  for (char& c : name)
    if (c == '|') c = '/';
  std::string out =
      "| model | backend | dtype | threads | test | decode tok/s | MAD | prefill tok/s | prefill GFLOP/s | "
      "bytes/token | GB/s | read GB/s | of read | peak RSS MiB | baseline RSS MiB | RSS limit MiB |\n"
      "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  out += "| " + name + " | " + r.backend + " | " + r.dtype + " | " + std::to_string(r.threads) + " | pp" +
         std::to_string(r.prompt_tokens) + "+tg" + std::to_string(r.gen_tokens) +
         (r.batch > 1 ? " x" + std::to_string(r.batch) : "") + " | " + Fixed(r.decode_tok_s, 2) + " | " +
         Fixed(r.decode_mad_pct, 2) + "% | " + Fixed(r.prefill_tok_s, 2) + " | " + Fixed(r.prefill_gflops, 2) + " | " +
         Fixed(r.bytes_per_token, 0) + " | " + Fixed(r.achieved_gb_s, 2) + " | " +
         (r.read_gb_s ? Fixed(*r.read_gb_s, 2) : "n/a") + " | " +
         (r.fraction ? Fixed(*r.fraction * 100.0, 2) + "%" : "n/a") + " | " +
         (r.peak_rss_mb ? Fixed(*r.peak_rss_mb, 2) : "n/a") + " | " +
         (r.baseline_rss_mb ? Fixed(*r.baseline_rss_mb, 2) : "n/a") + " | " +
         (r.rss_limit_mb ? Fixed(*r.rss_limit_mb, 2) : "n/a") + " |\n";
  return out;
}

std::string Print(const BenchRecord& r, const std::string& output) {
  if (output == "md") return PrintMd(r);
  if (output == "csv") return PrintCsv(r);
  // json and jsonl print the same line for one record (jsonl exists so runs
  // can be appended into one file, one object per line).
  return JsonLine(protocol::ToJson(r)) + "\n";
}

// ---- what a token costs ----------------------------------------------------

// Weight bytes one decoded token reads with f32 weights: every matrix once
// (MoE: the router and n_experts_per_tok experts), the norms, and one
// embedding row; the classifier counted once even when it is the embedding.
// The KV cache is not counted (see docs/bench.md).
// The KV cache one timed decoded token reads, on average: position p attends
// p + 1 positions, each holding keys and values of kv_dim f32 in every layer;
// the timed positions run from prompt_tokens to prompt_tokens + gen_tokens - 1.
double KvBytesPerDecodedToken(const ModelConfig& c, int prompt_tokens, int gen_tokens) {
  const double mean_attended = prompt_tokens + (gen_tokens + 1) / 2.0;
  return 2.0 * c.n_layers * c.kv_dim() * sizeof(float) * mean_attended;
}

[[maybe_unused]] double F32WeightBytesPerToken(const ModelConfig& c) {
  const double dim = c.dim, kv = c.kv_dim(), hidden = c.hidden_dim;
  const double ffn =
      c.n_experts > 0 ? c.n_experts * dim + c.n_experts_per_tok * 3.0 * dim * hidden : 3.0 * dim * hidden;
  const double layer = 2.0 * dim + 2.0 * c.q_dim() * dim + 2.0 * kv * dim + ffn;  // q and o: q_dim x dim
  return 4.0 * (c.n_layers * layer + dim + static_cast<double>(c.vocab_size) * dim + dim);
}

// The engine's FootprintOf(const Model&) (engine/engine.h, arriving with the
// dtypes) knows the real storage of each matrix; use it when it exists. Until
// then this falls back to the f32 count above (all the engine loads today).
// Once FootprintOf has landed, the fallback can go.
template <class M>
double WeightBytesPerToken(const M& m) {
  if constexpr (requires { FootprintOf(m).weight_bytes_per_token; })
    return static_cast<double>(FootprintOf(m).weight_bytes_per_token);
  else return F32WeightBytesPerToken(m.config);
}

// Flops of a prefill of positions [0, n): 2 per multiply-add of every layer
// matrix at every position, of the classifier once (Prefill computes logits
// for the last position only), and of attention (scores and the weighted sum
// over pos + 1 positions). Norms, RoPE and softmax are left out (a few per
// weight row).
double PrefillFlops(const ModelConfig& c, int n) {
  const double dim = c.dim, kv = c.kv_dim(), hidden = c.hidden_dim;
  const double ffn =
      c.n_experts > 0 ? c.n_experts * dim + c.n_experts_per_tok * 3.0 * dim * hidden : 3.0 * dim * hidden;
  const double layers = 2.0 * c.n_layers * (2.0 * c.q_dim() * dim + 2.0 * kv * dim + ffn);
  const double classifier = 2.0 * static_cast<double>(c.vocab_size) * dim;
  const double positions_attended = static_cast<double>(n) * (n + 1) / 2.0;  // sum of (pos + 1)
  return layers * n + classifier + 2.0 * 2.0 * c.q_dim() * c.n_layers * positions_attended;
}

// A size line of /proc/self/status in MiB: "VmHWM" (the peak resident set)
// or "VmRSS" (resident now); nullopt where /proc does not say.
std::optional<double> StatusMiB(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      long kb = std::strtol(line.c_str() + key.size() + 1, nullptr, 10);
      if (kb > 0) return kb / 1024.0;
    }
  }
  return std::nullopt;
}

// Nanoseconds the threads of this process have spent ready to run but waiting
// on a run queue (/proc/self/task/*/schedstat, second field); nullopt where
// the kernel does not say.
std::optional<double> RunQueueWaitNs() {
  std::vector<int> ids = measure::ThreadIds();
  if (ids.empty()) return std::nullopt;
  double sum = 0.0;
  for (int id : ids) {
    std::ifstream f("/proc/self/task/" + std::to_string(id) + "/schedstat");
    unsigned long long running = 0, waiting = 0;
    if (!(f >> running >> waiting)) return std::nullopt;
    sum += static_cast<double>(waiting);
  }
  return sum;
}

// ---- placement -------------------------------------------------------------

bool ConfineProcess(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;  // the main thread; threads created later inherit it
}

// ---- the run -----------------------------------------------------------------

struct BenchOptions {
  std::string model, backend = "fast", output = "json", from_json, dump_times, dtype = "f32";
  int prompt_tokens = 64, gen_tokens = 64, threads = 0, steps = 0, ctx = kModelContext;
  bool steps_given = false, prompt_given = false, gen_given = false, threads_given = false, pin = true, no_pin = false;
  double min_seconds = 0.5;
  int batch = 1;  // sequences per decode step (a SlotDecoder's slots)
  TpFlags tp;     // --tp, --tp-backend: the bench drives rank 0 of tensor-parallel ranks
};

// One generation: the prompt (BOS then fixed, model-independent ids) as one
// batched Prefill, then G decode positions, each fed the greedy token of the
// previous position's logits. With a batch (a SlotDecoder of N slots), N such
// sequences at once: sequence b's prompt has its own ids, the N prompts are
// prefilled together (PrefillMany) and each decode step is one Step of every
// slot at the same position.
class Generation {
 public:
  Generation(Decoder& t, int prompt, int gen) : Generation(t.model().config, prompt, gen, 1) { one_ = &t; }
  Generation(SlotDecoder& s, int prompt, int gen) : Generation(s.model().config, prompt, gen, s.slots()) { many_ = &s; }
  int prompt() const { return prompt_; }
  int positions() const { return prompt_ + gen_; }
  // Prefills positions [0, prompt) from a fresh cache (every later position
  // overwrites its cache row before attention reads it).
  void Prompt() {
    if (one_) return Pick(one_->Prefill(ids_[0].data(), prompt_, 0), 1);
    std::vector<SlotDecoder::Prompt> p;
    for (int b = 0; b < batch_; b++) p.push_back({b, ids_[b].data(), prompt_, 0});
    many_->PrefillMany(p.data(), batch_, rows_.data());
    Pick(rows_.data(), batch_);
  }
  // Decodes position `pos` (prompt <= pos < positions()) of every sequence;
  // the greedy picks are the decoder's own (on a GPU, made on the device).
  void Step(int pos) {
    if (one_) {
      token_[0] = one_->ForwardGreedy(token_[0], pos);
      return;
    }
    std::fill(pos_.begin(), pos_.end(), pos);
    many_->StepGreedy(slot_.data(), token_.data(), pos_.data(), batch_, picks_.data());
    token_ = picks_;
  }

 private:
  Generation(const ModelConfig& c, int prompt, int gen, int batch)
      : c_(c),
        prompt_(prompt),
        gen_(gen),
        batch_(batch),
        greedy_(c_.vocab_size, 0.0f, 0.0f, 0),
        buf_(c_.vocab_size),
        ids_(batch),
        token_(batch, 0),
        picks_(batch),
        slot_(batch),
        pos_(batch) {
    for (int b = 0; b < batch; b++) {
      slot_[b] = b;
      ids_[b].push_back(c_.bos_id >= 0 ? c_.bos_id : 0);  // the model's BOS (token 0 when it has none)
      for (int p = 1; p < prompt_; p++)
        ids_[b].push_back(static_cast<int>((1 + 7919L * (p + 131L * b)) % c_.vocab_size));
    }
    if (batch > 1) rows_.resize(static_cast<size_t>(batch) * c_.vocab_size);
  }
  void Pick(const float* logits, int n) {
    for (int b = 0; b < n; b++) {
      const float* row = logits + static_cast<size_t>(b) * c_.vocab_size;
      std::copy(row, row + c_.vocab_size, buf_.begin());
      token_[b] = greedy_.Sample(buf_.data());
    }
  }
  Decoder* one_ = nullptr;
  SlotDecoder* many_ = nullptr;
  const ModelConfig& c_;
  int prompt_, gen_, batch_;
  Sampler greedy_;
  std::vector<float> buf_, rows_;
  std::vector<std::vector<int>> ids_;
  std::vector<int> token_, picks_, slot_, pos_;
};

Status CheckOptions(BenchOptions& o) {
  if (o.output != "json" && o.output != "jsonl" && o.output != "md" && o.output != "csv")
    return Status::Error("--output " + o.output + ": expected json, jsonl, md or csv");
  if (!o.from_json.empty()) return OkStatus();
  if (o.model.empty()) return Status::Error("--model is required (or --from-json FILE to re-print a result)");
  if (o.steps_given && (o.prompt_given || o.gen_given))
    return Status::Error(
        "--steps cannot be combined with --prompt-tokens or --gen-tokens (--steps N = N/2 prompt + the rest "
        "generated)");
  if (o.steps_given) {
    if (o.steps < 2) return Status::Error("--steps " + std::to_string(o.steps) + " is below 2");
    o.prompt_tokens = o.steps / 2;
    o.gen_tokens = o.steps - o.prompt_tokens;
  }
  if (o.prompt_tokens < 1)
    return Status::Error("--prompt-tokens " + std::to_string(o.prompt_tokens) + ": at least 1 (the BOS position)");
  if (o.gen_tokens < 1) return Status::Error("--gen-tokens " + std::to_string(o.gen_tokens) + ": at least 1");
  if (o.threads_given && (o.threads < 1 || o.threads > 1024))
    return Status::Error("--threads " + std::to_string(o.threads) + " is outside [1, 1024]");
  if (!std::isfinite(o.min_seconds) || o.min_seconds < 0.0 || o.min_seconds > 600.0)
    return Status::Error("--min-seconds " + Fixed(o.min_seconds, 3) + " is outside [0, 600]");
  if (o.batch < 1 || o.batch > 1024)
    return Status::Error("--batch " + std::to_string(o.batch) + " is outside [1, 1024]");
  if (o.batch > 1 && o.tp.on())
    return Status::Error("--batch " + std::to_string(o.batch) +
                         " cannot be combined with --tp (batched decode runs on one rank)");
  if (o.backend != "fast" && o.backend != "reference" && o.backend != "cuda")
    return Status::Error("--backend: unknown backend '" + o.backend + "' (expected reference, fast or cuda)");
  return OkStatus();
}

int Reprint(const BenchOptions& o) {
  std::ifstream f(o.from_json, std::ios::binary);
  if (!f) return Fail(Status::Error("--from-json " + o.from_json + ": cannot read"));
  std::stringstream ss;
  ss << f.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return Fail(Status::Error("--from-json " + o.from_json + ": not JSON"));
  auto r = protocol::VerityBenchFromJson(j, "--from-json " + o.from_json);
  if (!r.ok()) return Fail(r.status());
  std::fputs(Print(r.value(), o.output).c_str(), stdout);
  return 0;
}

// The timed part of a bench: each prompt as one block, each decode position
// alone, and what the box did meanwhile.
struct Timings {
  std::vector<double> prefill_s, token_s;  // token_s[g * gen_tokens + i]: decode position i of generation g
  double timed_ns = 0.0;
  std::optional<double> wait_before, wait_after;  // the compute threads' run-queue wait (ns)
  std::optional<kernels::Backend::PoolCounters> pool_before, pool_after;
};

// Whichever decoder the bench runs: one sequence (a Transformer, or the
// leader of tensor-parallel ranks) or --batch sequences (a SlotDecoder).
struct BenchDecoder {
  std::unique_ptr<Decoder> one;
  std::unique_ptr<SlotDecoder> slots;
  Status status() const { return slots ? slots->status() : one->status(); }
  std::optional<kernels::Backend::PoolCounters> pool_counters() const {
    return slots ? std::nullopt : one->pool_counters();
  }
  std::string backend_name() const { return slots ? slots->backend_name() : one->backend_name(); }
};

Result<BenchDecoder> MakeDecoder(const BenchOptions& o, const Model& model, std::unique_ptr<kernels::Backend> kern,
                                 TpGroup* group) {
  BenchDecoder d;
  if (o.batch > 1) {
    VERITY_ASSIGN_OR_RETURN(d.slots, SlotDecoder::Create(model, std::move(kern), o.batch));
  } else if (group) {
    VERITY_ASSIGN_OR_RETURN(d.one, group->Start(model));
  } else {
    VERITY_ASSIGN_OR_RETURN(d.one, Transformer::Create(model, std::move(kern)));
  }
  return d;
}

// Warm-up: whole generations of the bench's own positions, untimed, until
// enough decode positions and time have passed. The pool's threads exist
// after the first prompt: each then gets its own CPU.
// `first_prompt_s` gets the first prompt's seconds (a device backend's
// uploads and first recordings).
// `confine_late`: the process is confined to `cpus` only now, after the first
// prompt (a backend without a compute pool: the load and the first upload
// convert on every CPU; base/host_parallel.h); cleared where it cannot be.
void WarmUp(Generation& g, std::vector<int>* cpus, bool confine_late, BenchRecord* r, double* first_prompt_s) {
  const auto warm_start = Clock::now();
  auto warm = [&] {
    return r->warmup_tokens >= kWarmupMinTokens &&
           std::chrono::duration<double>(Clock::now() - warm_start).count() >= kWarmupMinSeconds;
  };
  for (bool first = true; !warm(); first = false) {
    g.Prompt();
    if (first) *first_prompt_s = std::chrono::duration<double>(Clock::now() - warm_start).count();
    if (first && confine_late && !cpus->empty() && !ConfineProcess(*cpus)) {
      cpus->clear();
      r->cpus.clear();
    }
    if (first && !cpus->empty()) r->per_thread = measure::PinEveryThread(*cpus);
    for (int p = g.prompt(); p < g.positions() && !warm(); p++) {
      g.Step(p);
      r->warmup_tokens++;
    }
  }
}

// Timed generations, each from a fresh cache, until decode has run
// min_seconds. A failed device call makes every later logit NaN: the run
// stops and says why, never timing it. `finish` (the tensor-parallel
// collective guard, which stops the follower ranks) runs before the window
// closes, as their last step is part of it.
Result<Timings> TimeGenerations(Generation& g, const BenchDecoder& d, double min_seconds,
                                const std::function<Status()>& finish, BenchRecord* r) {
  Timings t;
  double decode_total = 0.0;
  t.wait_before = RunQueueWaitNs();
  t.pool_before = d.pool_counters();
  const auto timed_start = Clock::now();
  do {
    const auto a = Clock::now();
    g.Prompt();
    t.prefill_s.push_back(std::chrono::duration<double>(Clock::now() - a).count());
    for (int p = g.prompt(); p < g.positions(); p++) {
      const auto b = Clock::now();
      g.Step(p);
      const double s = std::chrono::duration<double>(Clock::now() - b).count();
      t.token_s.push_back(s);
      decode_total += s;
    }
    r->generations++;
    VERITY_RETURN_IF_ERROR(d.status());
  } while (decode_total < min_seconds);
  if (finish) VERITY_RETURN_IF_ERROR(finish());
  t.timed_ns = std::chrono::duration<double, std::nano>(Clock::now() - timed_start).count();
  t.wait_after = RunQueueWaitNs();
  t.pool_after = d.pool_counters();
  return t;
}

// What the box did during the timed window: the pool's sharing, the run-queue wait.
void RecordContention(const Timings& t, BenchRecord* r) {
  if (t.pool_before && t.pool_after) {
    const auto &a = *t.pool_after, &b = *t.pool_before;
    r->pool = PoolCounts{a.split_jobs - b.split_jobs, a.caller_jobs - b.caller_jobs, a.backoff_jobs - b.backoff_jobs,
                         a.stalls - b.stalls, a.contended_windows - b.contended_windows};
  }
  if (t.wait_before && t.wait_after && t.timed_ns > 0)
    r->runqueue_wait_pct = std::max(0.0, 100.0 * (*t.wait_after - *t.wait_before) / (t.timed_ns * r->threads));
}

Status DumpTimes(const BenchOptions& o, const Timings& t) {
  if (o.dump_times.empty()) return OkStatus();
  std::ofstream f(o.dump_times, std::ios::trunc);
  f << nlohmann::json({{"prompt_tokens", o.prompt_tokens},
                       {"gen_tokens", o.gen_tokens},
                       {"prefill_s", t.prefill_s} /* seconds per whole prompt */,
                       {"decode_s", t.token_s}})
           .dump()
    << "\n";
  if (!f) return Status::Error("--dump-times " + o.dump_times + ": cannot write");
  return OkStatus();
}

// Speeds and their spread: decode tok/s is 1 / the median token time, so a
// descheduled token moves it by one rank, not by its length.
void RecordSpeeds(const Timings& t, const BenchOptions& o, const ModelConfig& c, BenchRecord* r) {
  const double token_median = std::max(Median(t.token_s), 1e-12);
  std::vector<double> dev;
  dev.reserve(t.token_s.size());
  for (double d : t.token_s) dev.push_back(std::fabs(d - token_median));
  r->decode_tok_s = o.batch / token_median;  // every sequence's position of a step
  r->decode_mad_pct = 100.0 * Median(dev) / token_median;
  r->samples = static_cast<int>(t.token_s.size());
  // The same spread about each position's own median (attention grows with
  // the position, so the plain MAD also holds that trend): the noise alone.
  if (r->generations >= 3) {
    dev.clear();
    for (int i = 0; i < o.gen_tokens; i++) {
      std::vector<double> at;
      for (int k = 0; k < r->generations; k++) at.push_back(t.token_s[static_cast<size_t>(k) * o.gen_tokens + i]);
      const double m = std::max(Median(at), 1e-12);
      for (double d : at) dev.push_back(std::fabs(d - m) / m);
    }
    r->decode_position_mad_pct = 100.0 * Median(dev);
  }
  const double prefill_median = std::max(Median(t.prefill_s), 1e-12);  // seconds per whole prompt
  r->prefill_tok_s = static_cast<double>(o.prompt_tokens) * o.batch / prefill_median;
  r->prefill_gflops = PrefillFlops(c, o.prompt_tokens) * o.batch / prefill_median / 1e9;
}

// Memory (resident set, weights, KV cache and their bound) and traffic: the
// bytes a decoded token reads, against the roofline of the memory the
// weights are read from (this box's at this thread count; GPU 0's for cuda).
void RecordMemoryAndTraffic(const Model& model, const BenchOptions& o, BenchRecord* r) {
  const ModelConfig& c = model.config;
  r->peak_rss_mb = StatusMiB("VmHWM");
  const Footprint fp = FootprintOf(model);
  r->weights_mb = fp.resident_weight_bytes / 1048576.0;
  r->kv_cache_mb = fp.kv_cache_bytes * o.batch / 1048576.0;  // one cache per sequence
  r->rss_limit_mb = RssLimitMb(*r->weights_mb, *r->kv_cache_mb);
  r->bytes_per_token = WeightBytesPerToken(model);
  // A step reads the weights once for its whole batch, and each sequence's own KV cache.
  r->achieved_gb_s = r->bytes_per_token * r->decode_tok_s / o.batch / 1e9;
  r->kv_bytes_per_token = KvBytesPerDecodedToken(c, o.prompt_tokens, o.gen_tokens);
  r->achieved_gb_s_with_kv = r->achieved_gb_s + *r->kv_bytes_per_token * r->decode_tok_s / 1e9;
  const bool device = o.backend == "cuda";
  auto roof = measure::CachedRoofline(env::CacheDir(), device ? measure::DeviceRooflineFingerprint(r->box) : r->box);
  if (!roof.ok()) {
    std::fprintf(stderr, "verity: note: %s; read_gb_s is null\n", roof.status().message().c_str());
  } else if (roof->has_value()) {
    r->read_gb_s = (*roof)->ReadGbS(device ? 1 : r->threads);
    if (r->read_gb_s) r->fraction = r->achieved_gb_s / *r->read_gb_s;
    if (r->read_gb_s) r->fraction_with_kv = *r->achieved_gb_s_with_kv / *r->read_gb_s;
  }
}

// The human summary on stderr (stdout holds the record alone).
void PrintSummary(const BenchRecord& r, const std::vector<int>& cpus, bool device) {
  std::string placement = cpus.empty()
                              ? std::string("not pinned")
                              : (r.per_thread ? "each thread pinned, cpus " : "confined to cpus ") + CpuList(cpus);
  std::fprintf(
      stderr,
      "verity: bench %s backend, %s, %d thread%s (%s), pp%d+tg%d%s, %d warm-up tokens, %d generation%s: decode "
      "%.1f tok/s (MAD %.2f%% over %d tokens%s), prefill %.1f tok/s (%.2f GFLOP/s), %.2f GB/s%s\n",
      r.backend.c_str(), r.dtype.c_str(), r.threads, r.threads == 1 ? "" : "s", placement.c_str(), r.prompt_tokens,
      r.gen_tokens, r.batch > 1 ? (" x " + std::to_string(r.batch) + " sequences per step").c_str() : "",
      r.warmup_tokens, r.generations, r.generations == 1 ? "" : "s", r.decode_tok_s, r.decode_mad_pct, r.samples,
      r.decode_position_mad_pct
          ? (", " + Fixed(*r.decode_position_mad_pct, 2) + "% about each position's median").c_str()
          : "",
      r.prefill_tok_s, r.prefill_gflops, r.achieved_gb_s,
      r.fraction
          ? (" = " + Fixed(*r.fraction * 100.0, 1) + "% of the measured " + Fixed(*r.read_gb_s, 1) + " GB/s").c_str()
      : device ? " (no device roofline: `verity roofline --backend cuda`)"
               : " (no roofline for this thread count: `verity roofline`)");
  if (r.peak_rss_mb && r.baseline_rss_mb)
    std::fprintf(stderr, "verity: %s\n",
                 RssBound{*r.peak_rss_mb, *r.baseline_rss_mb, *r.weights_mb, *r.kv_cache_mb}.Line().c_str());
  std::fprintf(stderr, "verity: with the KV cache a decoded token reads here (%.2f MB on average): %.2f GB/s%s\n",
               *r.kv_bytes_per_token / 1e6, *r.achieved_gb_s_with_kv,
               r.fraction_with_kv ? (" = " + Fixed(*r.fraction_with_kv * 100.0, 1) + "% of the measured " +
                                     Fixed(*r.read_gb_s, 1) + " GB/s")
                                        .c_str()
                                  : "");
  if (r.simd_target)
    std::fprintf(stderr, "verity: fast kernels on %s, bf16/q8_0 weight prefetch %s\n", r.simd_target->c_str(),
                 !r.stream_prefetch_hint            ? (*r.stream_prefetch ? "on" : "off")
                 : *r.stream_prefetch_hint == "nta" ? "non-temporal (8 KB ahead)"
                 : *r.stream_prefetch_hint == "t0"  ? "t0 (1 KB ahead)"
                                                    : "off");
  if (r.cuda_batch_mma)
    std::fprintf(stderr, "verity: cuda kernels: a batched step's bf16 and q8_0 products on %s\n",
                 *r.cuda_batch_mma ? "tensor cores (VERITY_CUDA_BATCH_MMA=1)" : "CUDA cores");
  if (r.cuda_switches)
    std::fprintf(stderr, "verity: cuda switches: %s\n", protocol::CudaSwitchesSet(*r.cuda_switches).c_str());
  if (r.phases) std::fprintf(stderr, "verity: bench phases: %s\n", protocol::RunPhasesLine(*r.phases).c_str());
  if (r.runqueue_wait_pct && *r.runqueue_wait_pct > 5.0)
    std::fprintf(stderr,
                 "verity: note: the compute threads waited %.1f%% of the timed window for a CPU: other work on this "
                 "box is in these numbers\n",
                 *r.runqueue_wait_pct);
  if (r.pool) {
    // A multi-threaded number is only that if the jobs were shared: say how many were.
    const uint64_t jobs = r.pool->split_jobs + r.pool->caller_jobs;
    std::fprintf(stderr,
                 "verity: pool over the timed window: %llu of %llu jobs split over the threads, %llu on one thread by "
                 "backoffs (%llu stalls, %llu contended windows)\n",
                 static_cast<unsigned long long>(r.pool->split_jobs), static_cast<unsigned long long>(jobs),
                 static_cast<unsigned long long>(r.pool->backoff_jobs), static_cast<unsigned long long>(r.pool->stalls),
                 static_cast<unsigned long long>(r.pool->contended_windows));
  }
}

// The record's header: what is measured, on what, by which build.
BenchRecord StartRecord(const BenchOptions& o, int compute_threads) {
  BenchRecord r;
  r.build_id = BuildId();
  r.artifact_sha256 = ArtifactSha256();
  r.model = o.model;
  r.threads = compute_threads * (o.tp.on() ? o.tp.tp : 1);
  r.prompt_tokens = o.prompt_tokens;
  r.gen_tokens = o.gen_tokens;
  r.batch = o.batch;
  r.min_seconds = o.min_seconds;
  r.box = measure::ThisBox().fingerprint;
  return r;
}

Status CheckContext(const BenchOptions& o, const ModelConfig& c) {
  if (o.prompt_tokens + o.gen_tokens <= c.seq_len) return OkStatus();
  const std::string what = o.steps_given ? "--steps " + std::to_string(o.steps)
                                         : "--prompt-tokens " + std::to_string(o.prompt_tokens) + " + --gen-tokens " +
                                               std::to_string(o.gen_tokens);
  return Status::Error(what + " = " + std::to_string(o.prompt_tokens + o.gen_tokens) +
                       " positions exceed the model's context (seq_len " + std::to_string(c.seq_len) +
                       ") set by --ctx");
}

int RunBench(BenchOptions o) {
  Status s = CheckOptions(o);
  if (!s.ok()) return Fail(s);
  if (!o.from_json.empty()) return Reprint(o);
  auto tp = ResolveTp(o.tp);
  if (!tp.ok()) return Fail(tp.status());
  o.tp = *tp;
  // --threads reaches the fast backend the way every other command's thread
  // count does: through VERITY_THREADS, read by base/env when the backend is made.
  if (o.threads_given) setenv("VERITY_THREADS", std::to_string(o.threads).c_str(), 1);
  // (The CUDA backend drives its device from one host thread.)
  const int compute_threads = o.backend == "fast" ? env::Threads() : 1;
  // Tensor-parallel ranks each run their own kernels' threads: the process is
  // not confined or pinned (the ranks' threads would share the CPUs chosen for one).
  if (o.tp.on()) o.pin = false;
  BenchRecord r = StartRecord(o, compute_threads);
  // Confine the process before the backend starts its pool, so its workers
  // inherit the CPUs; each thread gets its own CPU after the first pass.
  // A backend without a pool (cuda, reference: one compute thread) is
  // confined after its first prompt instead, so that loading the model and
  // the first upload (the q8_0 conversion and repack) run on every CPU.
  const bool confine_late = o.backend != "fast";
  std::vector<int> cpus = o.pin ? measure::ChooseCpus(compute_threads) : std::vector<int>{};
  if (!cpus.empty() && !confine_late && !ConfineProcess(cpus)) cpus.clear();
  r.cpus = cpus;

  // Where the wall time goes, phase by phase (the record's `phases`).
  protocol::RunPhases phases;
  auto mark = Clock::now();
  auto lap = [&mark] {
    const auto now = Clock::now();
    const double s = std::chrono::duration<double>(now - mark).count();
    mark = now;
    return s;
  };
  auto kern = kernels::MakeBackend(o.backend);
  if (!kern.ok()) return Fail(kern.status());
  const int prefill_block = (*kern)->prefill_block();  // the record's cuda_switches name it
  // The weights' dtype is part of the loaded model and named in the record: never substituted.
  auto dtype = kernels::DTypeFromName(o.dtype);
  if (!dtype.ok()) return Fail(dtype.status());
  // With --tp the collectives (and their checks) come before any weight loads.
  std::unique_ptr<TpGroup> group;
  if (o.tp.on()) {
    auto run = OpenTp(o.tp, o.backend);
    if (!run.ok()) return Fail(run.status());
    group = std::move(run->group);
  }
  // The process without the model (binary, libraries, allocator, the backend
  // and its threads): what the model adds is judged against this.
  r.baseline_rss_mb = StatusMiB("VmRSS");
  phases.backend_s = lap();
  auto model = LoadModel(o.model, *dtype, o.ctx);
  if (group) {
    Status agreed = group->Agree(model.ok() ? OkStatus() : model.status());
    if (!agreed.ok()) return group->leader() ? Fail(agreed) : 1;
    if (!group->leader()) return group->Serve(**model).ok() ? 0 : 1;  // rank 0 alone prints
  }
  phases.load_s = lap();  // with --tp, until every rank has loaded
  if (!model.ok()) return Fail(model.status());
  r.dtype = WeightsDTypeName(**model);
  if (Status fits = CheckContext(o, (*model)->config); !fits.ok()) return Fail(fits);
  auto d = MakeDecoder(o, **model, std::move(kern.value()), group.get());
  if (!d.ok()) return Fail(d.status());
  phases.decoder_s = lap();
  r.backend = d->backend_name();
  if (o.backend == "fast") {
    r.simd_target = kernels::SimdTargetName();
    r.stream_prefetch = kernels::StreamPrefetchOn();
    r.stream_prefetch_hint = kernels::StreamPrefetchHintName();
  }
  if (o.backend == "cuda") {
    r.cuda_batch_mma = env::CudaBatchMma();
    r.cuda_switches = protocol::CudaSwitches{env::CudaFlashPrefill(),    env::CudaQ8Int16(),    env::CudaNormFused(),
                                             env::CudaDependentLaunch(), env::CudaL2Prefetch(), prefill_block};
  }
  Generation g = d->slots ? Generation(*d->slots, o.prompt_tokens, o.gen_tokens)
                          : Generation(*d->one, o.prompt_tokens, o.gen_tokens);
  WarmUp(g, &cpus, confine_late, &r, &phases.first_prompt_s);
  phases.warmup_s = std::max(0.0, lap() - phases.first_prompt_s);
  // The collective guard over every position the bench ran; a failure is no measurement.
  std::function<Status()> finish;
  if (group) finish = [&] { return static_cast<TpDecoder&>(*d->one).Finish(); };
  auto t = TimeGenerations(g, *d, o.min_seconds, finish, &r);
  if (!t.ok()) return Fail(t.status());
  phases.timed_s = lap();
  r.phases = phases;
  RecordContention(*t, &r);
  if (Status dumped = DumpTimes(o, *t); !dumped.ok()) return Fail(dumped);
  RecordSpeeds(*t, o, (*model)->config, &r);
  RecordMemoryAndTraffic(**model, o, &r);
  PrintSummary(r, cpus, o.backend == "cuda");
  std::fputs(Print(r, o.output).c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void RegisterBenchCommand(CLI::App& app, Registry& reg) {
  auto* sub = app.add_subcommand(
      "bench",
      "Bench protocol: prints one verity.bench/1 record (decode and prefill tok/s, prefill GFLOP/s, peak RSS; "
      "spread; roofline). See docs/bench.md.");
  auto o = std::make_shared<BenchOptions>();
  sub->add_option("--model", o->model, "checkpoint: llama2.c .bin or Hugging Face directory (as generate)");
  auto* steps = sub->add_option("--steps", o->steps, "positions: first half prompt, second half generated (compat)");
  auto* prompt =
      sub->add_option("--prompt-tokens", o->prompt_tokens, "prompt positions (BOS + fixed ids), timed as prefill")
          ->capture_default_str();
  auto* gen = sub->add_option("--gen-tokens", o->gen_tokens, "greedy decode positions per generation, each timed")
                  ->capture_default_str();
  sub->add_option("--dtype", o->dtype, "weights: f32 | bf16 | q8_0 (converted at load; named in the output)")
      ->capture_default_str();
  auto* threads =
      sub->add_option("--threads", o->threads, "compute threads (default: VERITY_THREADS, else every core)");
  sub->add_option("--backend", o->backend, "reference, fast or cuda")->capture_default_str();
  sub->add_option("--ctx", o->ctx, kCtxHelp);
  sub->add_option("--batch", o->batch,
                  "sequences decoded together, one position of each per step (continuous batching's step); "
                  "decode tok/s is then their sum")
      ->capture_default_str();
  sub->add_option("--min-seconds", o->min_seconds, "repeat generations until decode has run this long")
      ->capture_default_str();
  sub->add_option("--output", o->output, "json, jsonl, md or csv")->capture_default_str();
  sub->add_flag("--no-pin", o->no_pin, "do not pin the process and its threads to CPUs");
  AddTpFlags(sub, &o->tp);
  sub->add_option("--dump-times", o->dump_times,
                  "also write every timed position's seconds (prefill_s, decode_s in run order) as JSON to this file");
  sub->add_option("--from-json", o->from_json,
                  "re-print a saved verity.bench/1 JSON in --output's format (measures nothing)");
  reg.On(sub, [=] {
    BenchOptions opts = *o;
    opts.steps_given = steps->count() > 0;
    opts.prompt_given = prompt->count() > 0;
    opts.gen_given = gen->count() > 0;
    opts.threads_given = threads->count() > 0;
    opts.pin = !opts.no_pin;
    return RunBench(opts);
  });
}

}  // namespace verity::cli
