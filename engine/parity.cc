#include "engine/parity.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/sha256.h"

namespace verity {
namespace {

// log-softmax in double: the KL must not be limited by float rounding.
void LogSoftmax(const float* x, int n, std::vector<double>* out) {
  out->resize(n);
  double mx = x[0];
  for (int i = 1; i < n; i++) mx = std::max(mx, static_cast<double>(x[i]));
  double sum = 0.0;
  for (int i = 0; i < n; i++) sum += std::exp(static_cast<double>(x[i]) - mx);
  const double lse = mx + std::log(sum);
  for (int i = 0; i < n; i++) (*out)[i] = static_cast<double>(x[i]) - lse;
}

int Argmax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// Worst-of that keeps a NaN: std::min/std::max silently drop one.
double Lowest(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
double Highest(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

// k depths spread over the context, the last one the whole context. None is
// shallower than the window, so each scores a full window when the context allows.
std::vector<int> DefaultDepths(int context, bool deep, int window) {
  const int k = deep ? 14 : 7;
  const int shallowest = std::max(1, std::min(window, context));
  std::vector<int> d;
  for (int i = 1; i <= k; i++) d.push_back(std::max(shallowest, (i * context + k - 1) / k));
  return d;
}

// One depth: the `window` positions ending at `d`, candidate against reference.
ParityDepth ScoreDepth(const float* ref, const float* got, int V, int d, int window) {
  ParityDepth pd;
  pd.depth = d;
  const int first = std::max(0, d - window);
  pd.positions = d - first;
  int agree = 0;
  double kl_sum = 0.0;
  std::vector<double> lp, lq;
  for (int pos = first; pos < d; pos++) {
    const float* p = ref + static_cast<size_t>(pos) * V;
    const float* q = got + static_cast<size_t>(pos) * V;
    agree += Argmax(p, V) == Argmax(q, V);
    LogSoftmax(p, V, &lp);
    LogSoftmax(q, V, &lq);
    double kl = 0.0;
    for (int i = 0; i < V; i++) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    if (kl < 0.0) kl = 0.0;  // rounding below zero; a NaN stays NaN
    kl_sum += kl;
    pd.max_kl = Highest(pd.max_kl, kl);
  }
  pd.top1 = static_cast<double>(agree) / pd.positions;
  pd.mean_kl = kl_sum / pd.positions;
  pd.sha256 = Sha256Hex(got + static_cast<size_t>(first) * V, static_cast<size_t>(pd.positions) * V * 4);
  return pd;
}

// Names a depth's non-finite numbers: they must fail, never be skipped.
void NameNonfinite(const ParityDepth& pd, std::vector<std::string>* out) {
  const std::pair<const char*, double> fields[] = {{"top1", pd.top1}, {"mean_kl", pd.mean_kl}, {"max_kl", pd.max_kl}};
  for (const auto& [name, v] : fields)
    if (!std::isfinite(v)) out->push_back("depth " + std::to_string(pd.depth) + ": " + name);
}

// Names rows holding a NaN or infinity (the first few, then a count): a scored
// row poisons its depth, an unscored one still enters all_rows_sha256.
void NameNonfiniteRows(const std::vector<float>& rows, int V, const std::string& side, std::vector<std::string>* out) {
  constexpr int kNamed = 4;
  int bad = 0;
  for (size_t r = 0; r < rows.size() / V; r++) {
    const float* x = rows.data() + r * V;
    if (std::all_of(x, x + V, [](float f) { return std::isfinite(f); })) continue;
    if (++bad <= kNamed) out->push_back(side + " logits: position " + std::to_string(r));
  }
  if (bad > kNamed) out->push_back(side + " logits: " + std::to_string(bad - kNamed) + " more positions");
}

// Compares every candidate row with a logits file byte for byte.
Status CheckBitIdentity(const std::vector<float>& got, int V, const std::string& path, ParityReport* rep) {
  rep->has_bit_identity = true;
  VERITY_ASSIGN_OR_RETURN(auto other, ReadLogitsFile(path, V));
  if (other.size() < got.size()) {
    rep->bit_identity_detail = path + " holds fewer rows than were compared";
    return OkStatus();
  }
  const int T = static_cast<int>(got.size() / V);
  int first_diff = -1;
  for (int pos = 0; pos < T && first_diff < 0; pos++)
    if (std::memcmp(got.data() + static_cast<size_t>(pos) * V, other.data() + static_cast<size_t>(pos) * V, V * 4) != 0)
      first_diff = pos;
  rep->bit_identical = first_diff < 0;
  rep->bit_identity_detail = rep->bit_identical ? "byte-identical over " + std::to_string(T) + " positions"
                                                : "first differing position " + std::to_string(first_diff);
  return OkStatus();
}

}  // namespace

Result<std::vector<float>> ReadLogitsFile(const std::string& path, int vocab) {
  VERITY_RETURN_IF_ERROR(CheckRegularFile(path, "logits file"));
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  const long size = f.tellg();
  if (size <= 0 || size % (4L * vocab) != 0)
    return Status::Error(path + ": " + std::to_string(size) + " bytes is not a whole number of rows of vocab_size=" +
                         std::to_string(vocab) + " f32 logits");
  std::vector<float> v(static_cast<size_t>(size / 4));
  f.seekg(0);
  if (!f.read(reinterpret_cast<char*>(v.data()), size)) return Status::Error(path + ": read failed");
  return v;
}

Result<std::vector<int>> ReadTokensFile(const std::string& path) {
  VERITY_RETURN_IF_ERROR(CheckRegularFile(path, "tokens file"));
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseIntList(ss.str(), path, LONG_MIN);
}

Result<std::vector<int>> ParityDepths(int tokens, const ParityOptions& opt, int* window) {
  for (int d : opt.depths)
    if (d < 1 || d > tokens)
      return Status::Error("--depths: " + std::to_string(d) + " is outside [1, " + std::to_string(tokens) +
                           "] (the compared token positions)");
  // Deep is at least twice standard (7 depths x 8): explicit flags may add to it, never thin it.
  *window = opt.deep ? std::max(2 * opt.window, 16) : (opt.window > 0 ? opt.window : 8);
  std::vector<int> d = opt.depths;
  if (d.empty() || opt.deep) {
    const auto more = DefaultDepths(tokens, opt.deep, *window);
    d.insert(d.end(), more.begin(), more.end());
  }
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
}

Result<ParityReport> CompareLogits(const std::vector<float>& ref, const std::vector<float>& got, int vocab,
                                   const ParityOptions& opt) {
  const int V = vocab;
  if (V <= 0 || got.empty() || got.size() % V != 0 || ref.size() != got.size())
    return Status::Error("parity: reference and candidate hold different numbers of logit rows");
  ParityReport rep;
  rep.candidate = opt.backend;
  rep.mode = opt.deep ? "deep" : "standard";
  rep.tokens = static_cast<int>(got.size() / V);
  VERITY_ASSIGN_OR_RETURN(auto depths, ParityDepths(rep.tokens, opt, &rep.window));

  std::string scored;  // every scored candidate logit, in depth order
  for (int d : depths) {
    ParityDepth pd = ScoreDepth(ref.data(), got.data(), V, d, rep.window);
    const size_t first = static_cast<size_t>(d - pd.positions) * V * 4;
    scored.append(reinterpret_cast<const char*>(got.data()) + first, static_cast<size_t>(pd.positions) * V * 4);
    NameNonfinite(pd, &rep.nonfinite);
    rep.worst_top1 = Lowest(rep.worst_top1, pd.top1);
    rep.worst_mean_kl = Highest(rep.worst_mean_kl, pd.mean_kl);
    rep.depths.push_back(pd);
  }
  NameNonfiniteRows(got, V, "candidate", &rep.nonfinite);
  NameNonfiniteRows(ref, V, "reference", &rep.nonfinite);
  rep.logits_sha256 = Sha256Hex(scored);
  rep.all_rows_sha256 = Sha256Hex(got.data(), got.size() * 4);

  if (!opt.bit_identical_to.empty()) VERITY_RETURN_IF_ERROR(CheckBitIdentity(got, V, opt.bit_identical_to, &rep));
  rep.ok = rep.nonfinite.empty() && rep.worst_top1 >= opt.min_top1 && rep.worst_mean_kl <= opt.max_mean_kl &&
           (!rep.has_bit_identity || rep.bit_identical);
  return rep;
}

Result<ParityReport> RunParity(const Model& model, const ParityOptions& opt) { return RunParity(model, model, opt); }

Result<ParityReport> RunParity(const Model& model, const Model& candidate_model, const ParityOptions& opt) {
  const ModelConfig& c = model.config;
  const ModelConfig& cc = candidate_model.config;
  if (cc.dim != c.dim || cc.hidden_dim != c.hidden_dim || cc.n_layers != c.n_layers || cc.n_heads != c.n_heads ||
      cc.n_kv_heads != c.n_kv_heads || cc.vocab_size != c.vocab_size || cc.seq_len != c.seq_len ||
      cc.n_experts != c.n_experts)
    return Status::Error("parity: candidate model " + candidate_model.source + " has another shape than " + model.source);
  const int V = c.vocab_size;
  std::string reference;

  // The reference rows: computed here, or read from a file (another implementation).
  std::vector<float> ref;
  std::vector<int> tokens = opt.tokens;
  if (opt.against == "reference") {
    reference = "reference-cpu";
    VERITY_ASSIGN_OR_RETURN(auto kern, kernels::MakeBackend("reference"));
    Transformer t(model, std::move(kern));
    if (tokens.empty()) {
      // The reference's own greedy text from BOS: real text for a trained model.
      int token = Llama2cFormat::kBos;
      for (int pos = 0; pos < c.seq_len; pos++) {
        tokens.push_back(token);
        const float* row = t.Forward(token, pos);
        ref.insert(ref.end(), row, row + V);
        token = Argmax(row, V);
      }
    } else {
      VERITY_RETURN_IF_ERROR(ValidateIds(tokens, c, "--tokens"));
      ref = TeacherForcedLogits(t, tokens);
    }
  } else {
    reference = "file:" + opt.against;
    VERITY_ASSIGN_OR_RETURN(ref, ReadLogitsFile(opt.against, V));
    const int rows = static_cast<int>(ref.size() / V);
    if (tokens.empty()) {
      // The file's own greedy text: BOS, then the argmax of each row.
      tokens.push_back(Llama2cFormat::kBos);
      for (int r = 0; r + 1 < rows && r + 1 < c.seq_len; r++) tokens.push_back(Argmax(ref.data() + r * V, V));
    }
    VERITY_RETURN_IF_ERROR(ValidateIds(tokens, c, "--tokens"));
    if (rows < static_cast<int>(tokens.size()))
      return Status::Error(opt.against + ": holds " + std::to_string(rows) + " rows but " +
                           std::to_string(tokens.size()) + " token positions are compared");
    ref.resize(tokens.size() * static_cast<size_t>(V));
  }
  int window = 0;  // bad --depths fail before the candidate runs or --dump is written
  VERITY_RETURN_IF_ERROR(ParityDepths(static_cast<int>(tokens.size()), opt, &window));

  VERITY_ASSIGN_OR_RETURN(auto kern, kernels::MakeBackend(opt.backend));
  Transformer cand(candidate_model, std::move(kern));
  std::vector<float> got = TeacherForcedLogits(cand, tokens);

  if (!opt.dump.empty()) {
    std::ofstream f(opt.dump, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(got.data()), static_cast<std::streamsize>(got.size() * 4));
    if (!f) return Status::Error(opt.dump + ": cannot write --dump file");
  }
  VERITY_ASSIGN_OR_RETURN(ParityReport rep, CompareLogits(ref, got, V, opt));
  rep.reference = reference;
  rep.dtype = kernels::DTypeName(candidate_model.dtype);
  return rep;
}

nlohmann::json ParityReport::ToJson() const {
  // NaN and infinity serialize as null, never as a number that could pass.
  nlohmann::json ds = nlohmann::json::array();
  for (const auto& d : depths)
    ds.push_back({{"depth", d.depth}, {"top1", d.top1}, {"mean_kl", d.mean_kl}, {"max_kl", d.max_kl},
                  {"positions", d.positions}, {"logits_sha256", d.sha256}});
  nlohmann::json j = {{"schema", "verity.parity/1"},
                      {"reference", reference},
                      {"candidate", candidate},
                      {"dtype", dtype},
                      {"mode", mode},
                      {"tokens", tokens},
                      {"window", window},
                      {"depths", ds},
                      {"worst", {{"top1", worst_top1}, {"mean_kl", worst_mean_kl}}},
                      {"logits_sha256", logits_sha256},
                      {"all_rows_sha256", all_rows_sha256},
                      {"nonfinite", nonfinite},
                      {"ok", ok}};
  if (has_bit_identity) j["bit_identical"] = {{"ok", bit_identical}, {"detail", bit_identity_detail}};
  return j;
}

}  // namespace verity
