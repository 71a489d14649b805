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

std::vector<int> DefaultDepths(int context, bool deep) {
  const int k = deep ? 14 : 7;
  std::vector<int> d;
  for (int i = 1; i <= k; i++) d.push_back(std::max(1, (i * context + k - 1) / k));
  if (deep) d.insert(d.begin(), 1);
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  return d;
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

Result<ParityReport> RunParity(const Model& model, const ParityOptions& opt) {
  const ModelConfig& c = model.config;
  const int V = c.vocab_size;
  ParityReport rep;
  rep.candidate = opt.backend;
  const int window = opt.window > 0 ? opt.window : (opt.deep ? 16 : 8);

  // The reference rows: computed here, or read from a file (another implementation).
  std::vector<float> ref;
  std::vector<int> tokens = opt.tokens;
  if (opt.against == "reference") {
    rep.reference = "reference-cpu";
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
    rep.reference = "file:" + opt.against;
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
  const int T = static_cast<int>(tokens.size());
  rep.tokens = T;

  std::vector<int> depths = opt.depths.empty() ? DefaultDepths(T, opt.deep) : opt.depths;
  for (int d : depths)
    if (d < 1 || d > T)
      return Status::Error("--depths: " + std::to_string(d) + " is outside [1, " + std::to_string(T) +
                           "] (the compared token positions)");

  VERITY_ASSIGN_OR_RETURN(auto kern, kernels::MakeBackend(opt.backend));
  Transformer cand(model, std::move(kern));
  std::vector<float> got = TeacherForcedLogits(cand, tokens);

  if (!opt.dump.empty()) {
    std::ofstream f(opt.dump, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(got.data()), static_cast<std::streamsize>(got.size() * 4));
    if (!f) return Status::Error(opt.dump + ": cannot write --dump file");
  }

  std::string all;  // every compared candidate logit, in depth order
  std::vector<double> lp, lq;
  for (int d : depths) {
    ParityDepth pd;
    pd.depth = d;
    const int first = std::max(0, d - window);
    int agree = 0;
    double kl_sum = 0.0;
    for (int pos = first; pos < d; pos++) {
      const float* p = ref.data() + static_cast<size_t>(pos) * V;
      const float* q = got.data() + static_cast<size_t>(pos) * V;
      agree += Argmax(p, V) == Argmax(q, V);
      LogSoftmax(p, V, &lp);
      LogSoftmax(q, V, &lq);
      double kl = 0.0;
      for (int i = 0; i < V; i++) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
      kl = std::max(kl, 0.0);
      kl_sum += kl;
      pd.max_kl = std::max(pd.max_kl, kl);
    }
    pd.positions = d - first;
    pd.top1 = static_cast<double>(agree) / pd.positions;
    pd.mean_kl = kl_sum / pd.positions;
    std::string bytes(reinterpret_cast<const char*>(got.data() + static_cast<size_t>(first) * V),
                      static_cast<size_t>(pd.positions) * V * 4);
    pd.sha256 = Sha256Hex(bytes);
    all += bytes;
    rep.worst_top1 = std::min(rep.worst_top1, pd.top1);
    rep.worst_mean_kl = std::max(rep.worst_mean_kl, pd.mean_kl);
    rep.depths.push_back(pd);
  }
  rep.logits_sha256 = Sha256Hex(all);

  if (!opt.bit_identical_to.empty()) {
    rep.has_bit_identity = true;
    VERITY_ASSIGN_OR_RETURN(auto other, ReadLogitsFile(opt.bit_identical_to, V));
    if (other.size() < got.size()) {
      rep.bit_identity_detail = opt.bit_identical_to + " holds fewer rows than were compared";
    } else {
      int first_diff = -1;
      for (int pos = 0; pos < T && first_diff < 0; pos++)
        if (std::memcmp(got.data() + static_cast<size_t>(pos) * V, other.data() + static_cast<size_t>(pos) * V, V * 4) != 0)
          first_diff = pos;
      rep.bit_identical = first_diff < 0;
      rep.bit_identity_detail = rep.bit_identical ? "byte-identical over " + std::to_string(T) + " positions"
                                                  : "first differing position " + std::to_string(first_diff);
    }
  }
  rep.ok = rep.worst_top1 >= opt.min_top1 && rep.worst_mean_kl <= opt.max_mean_kl &&
           (!rep.has_bit_identity || rep.bit_identical);
  return rep;
}

nlohmann::json ParityReport::ToJson() const {
  nlohmann::json ds = nlohmann::json::array();
  for (const auto& d : depths)
    ds.push_back({{"depth", d.depth}, {"top1", d.top1}, {"mean_kl", d.mean_kl}, {"max_kl", d.max_kl},
                  {"positions", d.positions}, {"logits_sha256", d.sha256}});
  nlohmann::json j = {{"schema", "verity.parity/1"},
                      {"reference", reference},
                      {"candidate", candidate},
                      {"tokens", tokens},
                      {"depths", ds},
                      {"worst", {{"top1", worst_top1}, {"mean_kl", worst_mean_kl}}},
                      {"logits_sha256", logits_sha256},
                      {"ok", ok}};
  if (has_bit_identity) j["bit_identical"] = {{"ok", bit_identical}, {"detail", bit_identity_detail}};
  return j;
}

}  // namespace verity
