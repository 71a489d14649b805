#include "verify/parity.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "base/sha256.h"
#include "verify/ref_logits.h"

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
// ref[pos] is the reference row of position pos (present for every scored one).
ParityDepth ScoreDepth(const std::vector<const float*>& ref, const float* got, int V, int d, int window,
                       std::vector<ParityPosition>* per_position) {
  ParityDepth pd;
  pd.depth = d;
  const int first = std::max(0, d - window);
  pd.positions = d - first;
  int agree = 0;
  double kl_sum = 0.0;
  std::vector<double> lp, lq;
  for (int pos = first; pos < d; pos++) {
    const float* p = ref[pos];
    const float* q = got + static_cast<size_t>(pos) * V;
    const int ref_top1 = Argmax(p, V), cand_top1 = Argmax(q, V);
    agree += ref_top1 == cand_top1;
    LogSoftmax(p, V, &lp);
    LogSoftmax(q, V, &lq);
    double kl = 0.0;
    for (int i = 0; i < V; i++) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    if (kl < 0.0) kl = 0.0;  // rounding below zero; a NaN stays NaN
    kl_sum += kl;
    if (pd.worst_position < 0 || !(kl <= pd.max_kl)) pd.worst_position = pos;
    pd.max_kl = Highest(pd.max_kl, kl);
    if (per_position) per_position->push_back({pos, d, kl, ref_top1, cand_top1});
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
// rows[pos] is position pos's row, or nullptr where there is none.
void NameNonfiniteRows(const std::vector<const float*>& rows, int V, const std::string& side,
                       std::vector<std::string>* out) {
  constexpr int kNamed = 4;
  int bad = 0;
  for (size_t r = 0; r < rows.size(); r++) {
    const float* x = rows[r];
    if (!x || std::all_of(x, x + V, [](float f) { return std::isfinite(f); })) continue;
    if (++bad <= kNamed) out->push_back(side + " logits: position " + std::to_string(r));
  }
  if (bad > kNamed) out->push_back(side + " logits: " + std::to_string(bad - kNamed) + " more positions");
}

std::vector<const float*> RowPointers(const std::vector<float>& rows, int V) {
  std::vector<const float*> p(rows.size() / V);
  for (size_t r = 0; r < p.size(); r++) p[r] = rows.data() + r * V;
  return p;
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
    return Status::Error(path + ": " + std::to_string(size) +
                         " bytes is not a whole number of rows of vocab_size=" + std::to_string(vocab) + " f32 logits");
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
  return CompareRows(RowPointers(ref, V), got, V, opt);
}

Result<ParityReport> CompareRows(const std::vector<const float*>& ref, const std::vector<float>& got, int vocab,
                                 const ParityOptions& opt) {
  const int V = vocab;
  if (V <= 0 || got.empty() || got.size() % V != 0 || ref.size() != got.size() / V)
    return Status::Error("parity: reference and candidate hold different numbers of logit rows");
  ParityReport rep;
  rep.candidate = opt.backend;
  rep.mode = opt.deep ? "deep" : "standard";
  rep.tokens = static_cast<int>(got.size() / V);
  rep.min_top1 = opt.min_top1;
  rep.max_mean_kl = opt.max_mean_kl;
  VERITY_ASSIGN_OR_RETURN(auto depths, ParityDepths(rep.tokens, opt, &rep.window));
  for (int d : depths)
    for (int pos = std::max(0, d - rep.window); pos < d; pos++)
      if (!ref[pos])
        return Status::Error("parity: the reference holds no row for position " + std::to_string(pos) + " (depth " +
                             std::to_string(d) + ", window " + std::to_string(rep.window) + ")");

  std::string scored;  // every scored candidate logit, in depth order
  for (int d : depths) {
    ParityDepth pd = ScoreDepth(ref, got.data(), V, d, rep.window, opt.per_position ? &rep.per_position : nullptr);
    const size_t first = static_cast<size_t>(d - pd.positions) * V * 4;
    scored.append(reinterpret_cast<const char*>(got.data()) + first, static_cast<size_t>(pd.positions) * V * 4);
    NameNonfinite(pd, &rep.nonfinite);
    rep.worst_top1 = Lowest(rep.worst_top1, pd.top1);
    rep.worst_mean_kl = Highest(rep.worst_mean_kl, pd.mean_kl);
    rep.depths.push_back(pd);
  }
  NameNonfiniteRows(RowPointers(got, V), V, "candidate", &rep.nonfinite);
  NameNonfiniteRows(ref, V, "reference", &rep.nonfinite);
  rep.logits_sha256 = Sha256Hex(scored);
  rep.all_rows_sha256 = Sha256Hex(got.data(), got.size() * 4);

  if (!opt.bit_identical_to.empty()) VERITY_RETURN_IF_ERROR(CheckBitIdentity(got, V, opt.bit_identical_to, &rep));
  for (const auto& pd : rep.depths)
    for (int pos = pd.depth - pd.positions; pos < pd.depth; pos++)
      for (int i = 0; i < V; i++)
        rep.max_abs_diff = Highest(rep.max_abs_diff,
                                   std::fabs(static_cast<double>(got[static_cast<size_t>(pos) * V + i]) - ref[pos][i]));
  rep.max_abs_limit = opt.max_abs_diff;
  rep.ok = rep.nonfinite.empty() && rep.worst_top1 >= opt.min_top1 && rep.worst_mean_kl <= opt.max_mean_kl &&
           (!rep.has_bit_identity || rep.bit_identical) &&
           (opt.max_abs_diff < 0 || rep.max_abs_diff <= opt.max_abs_diff);
  return rep;
}

namespace {

// The candidate's teacher-forced logits over `tokens` (the tp decoder when
// the options name one, else a Transformer on opt.backend), also written to
// opt.dump when asked.
Result<std::vector<float>> CandidateLogits(const ParityOptions& opt, const Model& model,
                                           const std::vector<int>& tokens) {
  Result<std::vector<float>> got = std::vector<float>();
  if (opt.candidate) {
    VERITY_ASSIGN_OR_RETURN(Decoder * cand, opt.candidate(model));
    got = TeacherForcedLogits(*cand, tokens);
  } else {
    VERITY_ASSIGN_OR_RETURN(auto kern, kernels::MakeBackend(opt.backend));
    VERITY_ASSIGN_OR_RETURN(auto cand, Transformer::Create(model, std::move(kern)));
    got = TeacherForcedLogits(*cand, tokens);
  }
  VERITY_RETURN_IF_ERROR(got.status());
  if (!opt.dump.empty()) {
    std::ofstream f(opt.dump, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(got->data()), static_cast<std::streamsize>(got->size() * 4));
    if (!f) return Status::Error(opt.dump + ": cannot write --dump file");
  }
  return got;
}

// The candidate against an independent implementation's reference logits file
// (verify/ref_logits.h): the file's tokens, the file's rows, the file's model.
Result<ParityReport> RunParityAgainstFile(const Model& candidate_model, ParityOptions opt) {
  const ModelConfig& c = candidate_model.config;
  VERITY_ASSIGN_OR_RETURN(RefLogits file, ReadRefLogits(opt.against));
  if (file.vocab_size != c.vocab_size)
    return Status::Error(opt.against + ": vocab mismatch: the file's rows hold vocab_size " +
                         std::to_string(file.vocab_size) + " logits, the model " + candidate_model.source + " has " +
                         std::to_string(c.vocab_size));
  VERITY_ASSIGN_OR_RETURN(std::string model_sha, ModelSha256(candidate_model.source));
  if (model_sha != file.model_sha256)
    return Status::Error(opt.against + ": model mismatch: computed from " + file.model_path + " (sha256 " +
                         file.model_sha256 + "), but --model " + candidate_model.source + " has sha256 " + model_sha);
  if (!opt.tokens.empty() && opt.tokens != file.tokens) {
    size_t i = 0;
    while (i < opt.tokens.size() && i < file.tokens.size() && opt.tokens[i] == file.tokens[i]) i++;
    return Status::Error("--tokens: tokens mismatch with " + opt.against + " at index " + std::to_string(i) +
                         " (the file holds " + std::to_string(file.tokens.size()) + " tokens, --tokens " +
                         std::to_string(opt.tokens.size()) + ")");
  }
  VERITY_RETURN_IF_ERROR(ValidateIds(file.tokens, c, opt.against + ": tokens"));
  // f32 weights must agree with a float64 forward to float rounding; other
  // dtypes keep the policy thresholds the caller passed.
  if (candidate_model.dtype == kernels::DType::kF32) {
    opt.min_top1 = kRefFileF32MinTop1;
    opt.max_mean_kl = kRefFileF32MaxMeanKl;
  }
  opt.per_position = true;
  const int T = static_cast<int>(file.tokens.size()), V = c.vocab_size;
  std::vector<const float*> ref(T, nullptr);
  for (int p : file.positions) ref[p] = file.Row(p);
  int window = 0;  // bad --depths and missing rows fail before the candidate runs
  VERITY_ASSIGN_OR_RETURN(auto depths, ParityDepths(T, opt, &window));
  for (int d : depths)
    for (int pos = std::max(0, d - window); pos < d; pos++)
      if (!ref[pos])
        return Status::Error(opt.against + ": holds no reference row for position " + std::to_string(pos) + " (depth " +
                             std::to_string(d) + ", window " + std::to_string(window) + "); it holds " +
                             std::to_string(file.positions.size()) + " positions");

  VERITY_ASSIGN_OR_RETURN(std::vector<float> got, CandidateLogits(opt, candidate_model, file.tokens));
  VERITY_ASSIGN_OR_RETURN(ParityReport rep, CompareRows(ref, got, V, opt));
  if (opt.candidate) rep.candidate = opt.candidate_name;
  rep.reference = "file:" + opt.against;
  rep.dtype = WeightsDTypeName(candidate_model);
  rep.has_reference_file = true;
  rep.reference_file = {file.path, file.sha256, file.generator, file.model_path, file.model_sha256};
  return rep;
}

}  // namespace

Result<ParityReport> RunParity(const Model& model, const ParityOptions& opt) { return RunParity(model, model, opt); }

Result<ParityReport> RunParity(const Model& model, const Model& candidate_model, const ParityOptions& opt) {
  const ModelConfig& c = model.config;
  const ModelConfig& cc = candidate_model.config;
  if (cc.dim != c.dim || cc.hidden_dim != c.hidden_dim || cc.n_layers != c.n_layers || cc.n_heads != c.n_heads ||
      cc.head_dim != c.head_dim || cc.n_kv_heads != c.n_kv_heads || cc.vocab_size != c.vocab_size ||
      cc.seq_len != c.seq_len || cc.n_experts != c.n_experts)
    return Status::Error("parity: candidate model " + candidate_model.source + " has another shape than " +
                         model.source);
  if (opt.against != "reference" && IsRefLogitsFile(opt.against)) return RunParityAgainstFile(candidate_model, opt);
  const int V = c.vocab_size;
  std::string reference;

  // The reference rows: computed here, or read from a file (another implementation).
  std::vector<float> ref;
  std::vector<int> tokens = opt.tokens;
  if (opt.against == "reference") {
    reference = opt.reference_backend == "reference" ? "reference-cpu" : "single-rank-" + opt.reference_backend;
    VERITY_ASSIGN_OR_RETURN(auto kern, kernels::MakeBackend(opt.reference_backend));
    VERITY_ASSIGN_OR_RETURN(auto made, Transformer::Create(model, std::move(kern)));
    Transformer& t = *made;
    if (tokens.empty()) {
      // The reference's own greedy text from BOS: real text for a trained model.
      int token = c.bos_id >= 0 ? c.bos_id : 0;
      for (int pos = 0; pos < c.seq_len; pos++) {
        tokens.push_back(token);
        const float* row = t.Forward(token, pos);
        VERITY_RETURN_IF_ERROR(t.status());
        ref.insert(ref.end(), row, row + V);
        token = Argmax(row, V);
      }
    } else {
      VERITY_RETURN_IF_ERROR(ValidateIds(tokens, c, "--tokens"));
      VERITY_ASSIGN_OR_RETURN(ref, TeacherForcedLogits(t, tokens));
    }
  } else {
    reference = "file:" + opt.against;
    VERITY_ASSIGN_OR_RETURN(ref, ReadLogitsFile(opt.against, V));
    const int rows = static_cast<int>(ref.size() / V);
    if (tokens.empty()) {
      // The file's own greedy text: BOS, then the argmax of each row.
      tokens.push_back(c.bos_id >= 0 ? c.bos_id : 0);
      for (int r = 0; r + 1 < rows && r + 1 < c.seq_len; r++) tokens.push_back(Argmax(ref.data() + r * V, V));
    }
    VERITY_RETURN_IF_ERROR(ValidateIds(tokens, c, "--tokens"));
    if (rows < static_cast<int>(tokens.size()))
      return Status::Error(opt.against + ": holds " + std::to_string(rows) + " rows but " +
                           std::to_string(tokens.size()) + " token positions are compared");
    ref.resize(tokens.size() * static_cast<size_t>(V));
  }
  const int distinct = static_cast<int>(std::set<int>(tokens.begin(), tokens.end()).size());
  int window = 0;  // bad --depths fail before the candidate runs or --dump is written
  VERITY_RETURN_IF_ERROR(ParityDepths(static_cast<int>(tokens.size()), opt, &window));

  VERITY_ASSIGN_OR_RETURN(std::vector<float> got, CandidateLogits(opt, candidate_model, tokens));
  VERITY_ASSIGN_OR_RETURN(ParityReport rep, CompareLogits(ref, got, V, opt));
  if (opt.candidate) rep.candidate = opt.candidate_name;
  rep.reference = reference;
  rep.dtype = WeightsDTypeName(candidate_model);
  rep.reference_dtype = WeightsDTypeName(model);
  rep.distinct_tokens = distinct;
  return rep;
}

protocol::ParityRecord ParityReport::Record() const {
  protocol::ParityRecord r;
  for (const auto& d : depths)
    r.depths.push_back({d.depth, d.top1, d.mean_kl, d.max_kl, d.positions, d.worst_position, d.sha256});
  r.mode = mode, r.dtype = dtype, r.tokens = tokens, r.window = window;
  r.worst_top1 = worst_top1, r.worst_mean_kl = worst_mean_kl;
  r.logits_sha256 = logits_sha256, r.all_rows_sha256 = all_rows_sha256;
  r.nonfinite = nonfinite;
  r.ok = ok;
  // verity parity's own detail: what was compared, by which thresholds.
  nlohmann::json& x = r.extra;
  x = {{"reference", reference},
       {"candidate", candidate},
       {"reference_dtype", reference_dtype},
       {"max_abs_diff", max_abs_diff},
       {"distinct_tokens", distinct_tokens},
       {"thresholds", {{"min_top1", min_top1}, {"max_mean_kl", max_mean_kl}}}};
  if (max_abs_limit >= 0) x["thresholds"]["max_abs_diff"] = max_abs_limit;
  if (has_bit_identity) x["bit_identical"] = {{"ok", bit_identical}, {"detail", bit_identity_detail}};
  if (has_reference_file) {
    x["reference_file"] = {{"path", reference_file.path},
                           {"sha256", reference_file.sha256},
                           {"generator", reference_file.generator},
                           {"model_path", reference_file.model_path},
                           {"model_sha256", reference_file.model_sha256}};
    nlohmann::json pp = nlohmann::json::array();
    for (const auto& p : per_position)
      pp.push_back({{"position", p.position},
                    {"depth", p.depth},
                    {"kl", p.kl},
                    {"top1", p.ref_top1 == p.cand_top1},
                    {"reference_top1", p.ref_top1},
                    {"candidate_top1", p.cand_top1}});
    x["per_position"] = pp;
  }
  return r;
}

nlohmann::json ParityReport::ToJson() const { return protocol::ToJson(Record()); }

}  // namespace verity
