// llama_peer: llama.cpp as an independent peer. Drives the prebuilt libllama
// that tests/npm installs (@node-llama-cpp/linux-x64), compiled against the
// headers of the same release (tests/peer/extract_headers.sh), so the peer
// tests and scripts/vs-llama.cpp.sh can run a GGUF file through llama.cpp.
//
//   llama_peer greedy   MODEL --prompt IDS --steps N    greedy ids, one line
//   llama_peer argmax   MODEL --ids IDS                 argmax after each position, one line
//   llama_peer logits   MODEL --ids IDS --out FILE      n_vocab f32 per position (as `verity logits`)
//   llama_peer quantize IN OUT TYPE                     llama_model_quantize; TYPE: f16, bf16, q8_0,
//                                                   q4_0, q4_1, q5_0, q5_1, q2_k, q3_k_m, q4_k_s, q4_k_m, q5_k_s,
//                                                   q5_k_m, q6_k
//   llama_peer bench    MODEL --prompt-tokens P --gen-tokens G [--min-seconds S]   one JSON line
//   llama_peer cpu-backend                          the CPU variant ggml loads here, e.g. libggml-cpu-zen4.so
//   common: --threads T (default 1), --kv f32|f16 (default f32), --verbose
//
// The computation is fixed to what verity computes: the KV cache in f32 (ggml's
// default is f16) and no flash attention, so an id that differs is a
// difference of arithmetic, not of a cache format.
#include <dlfcn.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "llama.h"

#include "base/median.h"
#include "measure/roofline.h"

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "llama_peer: error: %s\n", message.c_str());
  std::exit(1);
}

// ---- arguments -------------------------------------------------------------

struct Args {
  std::string mode;
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;
  bool verbose = false;

  std::string Flag(const std::string& name, const std::string& fallback) const {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  }
  std::string Required(const std::string& name) const {
    auto it = flags.find(name);
    if (it == flags.end()) Die(mode + " needs " + name);
    return it->second;
  }
};

Args ParseArgs(int argc, char** argv) {
  static const char* kValued[] = {"--prompt", "--steps",         "--ids",        "--out",        "--threads",
                                  "--kv",     "--prompt-tokens", "--gen-tokens", "--min-seconds"};
  if (argc < 2)
    Die("usage: llama_peer greedy|argmax|logits|quantize|bench|cpu-backend MODEL [flags] (see the source's header)");
  Args a;
  a.mode = argv[1];
  for (int i = 2; i < argc; i++) {
    const std::string s = argv[i];
    if (s == "--verbose") {
      a.verbose = true;
    } else if (s.rfind("--", 0) == 0) {
      if (std::find_if(std::begin(kValued), std::end(kValued), [&](const char* k) { return s == k; }) ==
          std::end(kValued))
        Die("unknown flag " + s);
      if (i + 1 >= argc) Die(s + " needs a value");
      a.flags[s] = argv[++i];
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

long ParseLong(const std::string& text, const std::string& what, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
    Die(what + " '" + text + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

std::vector<llama_token> ParseIds(const std::string& text, const std::string& what) {
  std::vector<llama_token> ids;
  std::string tok;
  for (size_t i = 0; i <= text.size(); i++) {
    const char ch = i < text.size() ? text[i] : ' ';
    if (ch == ' ' || ch == ',' || ch == '\n' || ch == '\t') {
      if (!tok.empty()) ids.push_back(static_cast<llama_token>(ParseLong(tok, what, 0, INT32_MAX)));
      tok.clear();
    } else {
      tok += ch;
    }
  }
  if (ids.empty()) Die(what + ": no ids given");
  return ids;
}

// ---- llama.cpp -------------------------------------------------------------

bool g_verbose = false;
std::string g_cpu_backend = "unknown";  // the CPU variant ggml chose (bench names it)

// llama.cpp's log: errors always (a failed load says why), the rest with
// --verbose. ggml says which CPU variant it loaded only here.
void Log(ggml_log_level level, const char* text, void*) {
  if (g_verbose || level == GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
  const char* at = std::strstr(text, "loaded CPU backend from ");
  if (at) {
    std::string path = at + std::strlen("loaded CPU backend from ");
    path = path.substr(0, path.find_first_of("\r\n"));
    g_cpu_backend = path.substr(path.find_last_of('/') + 1);
  }
}

// The CPU backends are separate libraries chosen at run time (one per x86
// level, e.g. libggml-cpu-haswell.so); they sit beside libllama.
void LoadBackends() {
  llama_log_set(Log, nullptr);
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&llama_backend_init), &info) == 0 || !info.dli_fname)
    Die("cannot locate libllama (dladdr)");
  std::string dir = info.dli_fname;
  dir = dir.substr(0, dir.find_last_of('/'));
  ggml_backend_load_all_from_path(dir.c_str());
  llama_backend_init();
  if (!ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU)) Die("no CPU backend loaded from " + dir);
}

llama_model* LoadModel(const std::string& path) {
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(path.c_str(), mp);
  if (!model) Die(path + ": llama.cpp could not load the model (its message is above)");
  return model;
}

int NVocab(const llama_model* model) { return llama_vocab_n_tokens(llama_model_get_vocab(model)); }

// The model's BOS as the file states it (tokenizer.ggml.bos_token_id), else
// token 0: the id `verity bench` starts its prompt with.
llama_token FileBos(const llama_model* model) {
  char buf[32];
  if (llama_model_meta_val_str(model, "tokenizer.ggml.bos_token_id", buf, sizeof buf) < 0) return 0;
  return static_cast<llama_token>(std::strtol(buf, nullptr, 10));
}

struct ContextOptions {
  int threads = 1;
  int batch = 1;      // the most tokens one llama_decode takes
  int positions = 1;  // the most positions a run reaches
  ggml_type kv = GGML_TYPE_F32;
};

llama_context* NewContext(llama_model* model, const ContextOptions& o) {
  const int n_ctx = std::min(llama_model_n_ctx_train(model), 4096);  // verity's default context
  if (o.positions > n_ctx)
    Die(std::to_string(o.positions) + " positions exceed the context " + std::to_string(n_ctx) +
        " (the model's, at most 4096)");
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = static_cast<uint32_t>(n_ctx);
  cp.n_batch = cp.n_ubatch = static_cast<uint32_t>(std::max(o.batch, 1));
  cp.n_seq_max = 1;
  cp.n_threads = cp.n_threads_batch = o.threads;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  cp.type_k = cp.type_v = o.kv;
  cp.no_perf = true;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) Die("llama_init_from_model failed (its message is above)");
  return ctx;
}

// Decodes ids at positions [pos, pos + n) of sequence 0; logits for every
// position when all_logits, else for the last.
void Decode(llama_context* ctx, const llama_token* ids, int n, int pos, bool all_logits) {
  llama_batch b = llama_batch_init(n, 0, 1);
  for (int i = 0; i < n; i++) {
    b.token[i] = ids[i];
    b.pos[i] = pos + i;
    b.n_seq_id[i] = 1;
    b.seq_id[i][0] = 0;
    b.logits[i] = all_logits || i == n - 1;
  }
  b.n_tokens = n;
  const int32_t rc = llama_decode(ctx, b);
  llama_batch_free(b);
  if (rc != 0) Die("llama_decode returned " + std::to_string(rc) + " at position " + std::to_string(pos));
}

// The first maximum, as verity's greedy sampler picks it.
llama_token Argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; i++)
    if (logits[i] > logits[best]) best = i;
  return best;
}

const float* LogitsAt(llama_context* ctx, int i) {
  const float* l = llama_get_logits_ith(ctx, i);
  if (!l) Die("no logits for output " + std::to_string(i));
  return l;
}

void CheckIds(const std::vector<llama_token>& ids, int n_vocab, const std::string& what) {
  for (llama_token id : ids)
    if (id >= n_vocab)
      Die(what + ": id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
}

void PrintIds(const std::vector<llama_token>& ids) {
  std::string line;
  for (size_t i = 0; i < ids.size(); i++) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  std::printf("%s\n", line.c_str());
}

ContextOptions CommonOptions(const Args& a) {
  ContextOptions o;
  o.threads = static_cast<int>(ParseLong(a.Flag("--threads", "1"), "--threads", 1, 512));
  const std::string kv = a.Flag("--kv", "f32");
  if (kv != "f32" && kv != "f16") Die("--kv " + kv + ": expected f32 or f16");
  o.kv = kv == "f32" ? GGML_TYPE_F32 : GGML_TYPE_F16;
  return o;
}

const std::string& ModelPath(const Args& a) {
  if (a.positional.size() != 1) Die(a.mode + " takes one MODEL path");
  return a.positional[0];
}

// ---- modes -----------------------------------------------------------------

// As `verity generate --steps N`: N positions including the prompt, one
// greedy id sampled at each position from the prompt's last on, never
// stopping early (the caller compares the ids).
int Greedy(const Args& a) {
  llama_model* model = LoadModel(ModelPath(a));
  std::vector<llama_token> prompt = ParseIds(a.Required("--prompt"), "--prompt");
  const int steps = static_cast<int>(ParseLong(a.Required("--steps"), "--steps", 1, 1 << 20));
  const int n_prompt = static_cast<int>(prompt.size());
  if (n_prompt > steps)
    Die("--prompt holds " + std::to_string(n_prompt) + " ids, more than --steps " + std::to_string(steps));
  const int n_vocab = NVocab(model);
  CheckIds(prompt, n_vocab, "--prompt");
  ContextOptions o = CommonOptions(a);
  o.batch = n_prompt;
  o.positions = steps;
  llama_context* ctx = NewContext(model, o);
  Decode(ctx, prompt.data(), n_prompt, 0, false);
  std::vector<llama_token> out;
  for (int pos = n_prompt - 1; pos < steps; pos++) {
    if (pos > n_prompt - 1) Decode(ctx, &out.back(), 1, pos, false);
    out.push_back(Argmax(LogitsAt(ctx, -1), n_vocab));
  }
  PrintIds(out);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}

// Teacher forcing: all ids in one batch; the logits of every position.
std::vector<float> TeacherForced(const Args& a, llama_model* model, size_t* positions) {
  std::vector<llama_token> ids = ParseIds(a.Required("--ids"), "--ids");
  const int n_vocab = NVocab(model);
  CheckIds(ids, n_vocab, "--ids");
  ContextOptions o = CommonOptions(a);
  o.batch = o.positions = static_cast<int>(ids.size());
  llama_context* ctx = NewContext(model, o);
  Decode(ctx, ids.data(), static_cast<int>(ids.size()), 0, true);
  std::vector<float> all;
  for (size_t i = 0; i < ids.size(); i++) {
    const float* l = LogitsAt(ctx, static_cast<int>(i));
    all.insert(all.end(), l, l + n_vocab);
  }
  llama_free(ctx);
  *positions = ids.size();
  return all;
}

int ArgmaxMode(const Args& a) {
  llama_model* model = LoadModel(ModelPath(a));
  size_t n = 0;
  const std::vector<float> all = TeacherForced(a, model, &n);
  const int n_vocab = NVocab(model);
  std::vector<llama_token> out;
  for (size_t i = 0; i < n; i++) out.push_back(Argmax(all.data() + i * n_vocab, n_vocab));
  PrintIds(out);
  llama_model_free(model);
  return 0;
}

int LogitsMode(const Args& a) {
  llama_model* model = LoadModel(ModelPath(a));
  const std::string out = a.Required("--out");
  size_t n = 0;
  const std::vector<float> all = TeacherForced(a, model, &n);
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(all.data()), static_cast<std::streamsize>(all.size() * sizeof(float)));
  f.close();
  if (!f) Die(out + ": cannot write --out");
  std::fprintf(stderr, "llama_peer: wrote %zu positions x %d logits to %s\n", n, NVocab(model), out.c_str());
  llama_model_free(model);
  return 0;
}

// The llama.cpp file types `quantize` writes, by the name llama-quantize uses
// (lower case). A *_K_S/_M file mixes types per tensor by llama.cpp's rules.
const std::pair<const char*, llama_ftype> kQuantTypes[] = {
    {"f16", LLAMA_FTYPE_MOSTLY_F16},       {"bf16", LLAMA_FTYPE_MOSTLY_BF16},     {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},     {"q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
    {"q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},     {"q2_k", LLAMA_FTYPE_MOSTLY_Q2_K},     {"q3_k_m", LLAMA_FTYPE_MOSTLY_Q3_K_M},
    {"q4_k_s", LLAMA_FTYPE_MOSTLY_Q4_K_S}, {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"q5_k_s", LLAMA_FTYPE_MOSTLY_Q5_K_S},
    {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M}, {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K}};

std::string QuantTypeNames() {
  std::string s;
  for (const auto& [name, ftype] : kQuantTypes) s += (s.empty() ? "" : ", ") + std::string(name);
  return s;
}

int Quantize(const Args& a) {
  if (a.positional.size() != 3) Die("quantize takes IN OUT TYPE (TYPE: " + QuantTypeNames() + ")");
  const std::string& in = a.positional[0];
  const std::string& out = a.positional[1];
  const std::string& type = a.positional[2];
  llama_model_quantize_params qp = llama_model_quantize_default_params();
  bool known = false;
  for (const auto& [name, ftype] : kQuantTypes)
    if (type == name) qp.ftype = ftype, known = true;
  if (!known) Die("quantize: TYPE " + type + ": expected one of " + QuantTypeNames());
  qp.nthread = CommonOptions(a).threads;
  if (llama_model_quantize(in.c_str(), out.c_str(), &qp) != 0)
    Die(in + ": llama_model_quantize to " + type + " failed");
  std::fprintf(stderr, "llama_peer: quantized %s -> %s (%s)\n", in.c_str(), out.c_str(), type.c_str());
  return 0;
}

// ---- bench -----------------------------------------------------------------

// The CPUs for n threads as `verity bench` picks them (measure::ChooseCpus).
std::vector<int> ChooseCpus(int n) {
  std::vector<int> cpus = verity::measure::ChooseCpus(n);
  if (cpus.empty())
    Die("--threads " + std::to_string(n) + " but only " + std::to_string(verity::measure::AllowedCpus().size()) +
        " CPUs are allowed");
  return cpus;
}

// A pool of exactly these CPUs, one thread on each (strict placement), as
// llama-bench builds it; the same pool serves decode and prefill. The process
// is confined to them first, as `verity bench` confines itself.
struct Pool {
  ggml_threadpool* pool = nullptr;
  decltype(ggml_threadpool_free)* free = nullptr;
};

Pool PinnedPool(llama_context* ctx, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) Die("sched_setaffinity failed");
  ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU));
  auto* make =
      reinterpret_cast<decltype(ggml_threadpool_new)*>(ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new"));
  Pool p;
  p.free =
      reinterpret_cast<decltype(ggml_threadpool_free)*>(ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free"));
  if (!make || !p.free) Die("the CPU backend exports no ggml_threadpool_new/ggml_threadpool_free");
  ggml_threadpool_params tp = ggml_threadpool_params_default(static_cast<int>(cpus.size()));
  for (int c : cpus) {
    if (c >= GGML_MAX_N_THREADS) Die("CPU " + std::to_string(c) + " is beyond ggml's cpumask");
    tp.cpumask[c] = true;
  }
  tp.strict_cpu = true;
  p.pool = make(&tp);
  if (!p.pool) Die("ggml_threadpool_new failed for " + std::to_string(cpus.size()) + " threads");
  llama_attach_threadpool(ctx, p.pool, nullptr);
  return p;
}

struct BenchRun {
  llama_context* ctx;
  std::vector<llama_token> prompt;
  int gen, n_vocab;
};

// One generation from a fresh cache: the prompt in one batch (its time in
// *prefill_s), then `gen` greedy positions, each timed (appended to token_s).
void Generation(const BenchRun& r, double* prefill_s, std::vector<double>* token_s) {
  llama_memory_clear(llama_get_memory(r.ctx), true);
  const int n = static_cast<int>(r.prompt.size());
  auto a = Clock::now();
  Decode(r.ctx, r.prompt.data(), n, 0, false);
  llama_token token = Argmax(LogitsAt(r.ctx, -1), r.n_vocab);
  if (prefill_s) *prefill_s = std::chrono::duration<double>(Clock::now() - a).count();
  for (int pos = n; pos < n + r.gen; pos++) {
    auto b = Clock::now();
    Decode(r.ctx, &token, 1, pos, false);
    token = Argmax(LogitsAt(r.ctx, -1), r.n_vocab);
    if (token_s) token_s->push_back(std::chrono::duration<double>(Clock::now() - b).count());
  }
}

// `verity bench`'s protocol on llama.cpp: the same prompt ids (BOS, then
// (1 + 7919 p) mod vocab), warm-up of >= 8 decode positions and 0.1 s, then
// generations until decode has run --min-seconds; decode tok/s is 1 / the
// median token time, prefill tok/s the prompt over the median prompt time.
int Bench(const Args& a) {
  const std::string& path = ModelPath(a);
  llama_model* model = LoadModel(path);
  const int p = static_cast<int>(ParseLong(a.Flag("--prompt-tokens", "64"), "--prompt-tokens", 1, 1 << 16));
  const int g = static_cast<int>(ParseLong(a.Flag("--gen-tokens", "64"), "--gen-tokens", 1, 1 << 16));
  const std::string ms = a.Flag("--min-seconds", "0.5");
  char* end = nullptr;
  const double min_seconds = std::strtod(ms.c_str(), &end);
  if (ms.empty() || *end != '\0' || !(min_seconds >= 0.0 && min_seconds <= 600.0))
    Die("--min-seconds '" + ms + "' is not a number in [0, 600]");
  ContextOptions o = CommonOptions(a);
  o.batch = p;
  o.positions = p + g;
  const std::vector<int> cpus = ChooseCpus(o.threads);
  BenchRun r{NewContext(model, o), {}, g, NVocab(model)};
  const Pool pool = PinnedPool(r.ctx, cpus);
  r.prompt.push_back(FileBos(model));
  for (int i = 1; i < p; i++) r.prompt.push_back(static_cast<llama_token>((1 + 7919L * i) % r.n_vocab));
  int warm_tokens = 0;
  for (auto start = Clock::now(); warm_tokens < 8 || Clock::now() - start < std::chrono::milliseconds(100);
       warm_tokens += g)
    Generation(r, nullptr, nullptr);
  std::vector<double> prefill_s, token_s;
  double decode_total = 0.0;
  do {
    double pre = 0.0;
    const size_t before = token_s.size();
    Generation(r, &pre, &token_s);
    prefill_s.push_back(pre);
    for (size_t i = before; i < token_s.size(); i++) decode_total += token_s[i];
  } while (decode_total < min_seconds);
  std::string cpu_list;
  for (size_t i = 0; i < cpus.size(); i++) {
    if (i) cpu_list += ',';
    cpu_list += std::to_string(cpus[i]);
  }
  std::printf(
      "{\"peer\":\"llama.cpp\",\"model\":\"%s\",\"threads\":%d,\"cpus\":[%s],\"prompt_tokens\":%d,\"gen_tokens\":%d,"
      "\"generations\":%zu,\"warmup_tokens\":%d,\"cpu_backend\":\"%s\",\"kv\":\"%s\",\"decode_tok_s\":%.4f,"
      "\"prefill_tok_s\":%.4f}\n",
      path.c_str(), o.threads, cpu_list.c_str(), p, g, prefill_s.size(), warm_tokens, g_cpu_backend.c_str(),
      o.kv == GGML_TYPE_F32 ? "f32" : "f16", 1.0 / verity::Median(token_s), p / verity::Median(prefill_s));
  llama_free(r.ctx);
  pool.free(pool.pool);
  llama_model_free(model);
  return 0;
}

// Which CPU variant ggml chose on this machine: its arithmetic (vector width,
// rounding of activations) is what a peer comparison measures against.
int CpuBackend() {
  if (g_cpu_backend == "unknown") Die("ggml did not say which CPU backend it loaded");
  std::printf("%s\n", g_cpu_backend.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = ParseArgs(argc, argv);
  g_verbose = a.verbose;
  LoadBackends();
  if (a.mode == "greedy") return Greedy(a);
  if (a.mode == "argmax") return ArgmaxMode(a);
  if (a.mode == "logits") return LogitsMode(a);
  if (a.mode == "quantize") return Quantize(a);
  if (a.mode == "bench") return Bench(a);
  if (a.mode == "cpu-backend") return CpuBackend();
  Die("unknown mode " + a.mode + " (greedy, argmax, logits, quantize, bench, cpu-backend)");
}
