// The typed read model's printers: the JSON and text of `show`, `frontier` and
// `history` (Ledger::Show, Frontier and History are these over the loaders of
// read_model.cc). No printer runs SQL.
#include <cstdarg>
#include <cstdio>
#include <map>

#include "base/terminal.h"
#include "ledger/format.h"
#include "ledger/ledger.h"
#include "ledger/read_model.h"

namespace verity::ledger {
namespace {

// ---- JSON ----

template <class T>
nlohmann::json J(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
nlohmann::json Nonempty(const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); }
nlohmann::json OptVerdict(const std::optional<Verdict>& v) {
  return v ? nlohmann::json(VerdictName(*v)) : nlohmann::json(nullptr);
}
std::optional<double> Minus1(const std::optional<double>& r) {
  return r ? std::optional<double>(*r - 1.0) : std::nullopt;
}

nlohmann::json ToJson(const ChangeRow& c, const std::vector<std::string>& accept_regressions) {
  return {{"id", c.id},
          {"kind", KindName(c.kind)},
          {"title", c.title},
          {"author", c.author},
          {"claim_pct", J(c.claim_pct)},
          {"predict_pct", J(c.predict_pct)},
          {"claim_bit_identical", int64_t{c.claim_bit_identical}},
          {"metric", c.metric},
          {"base_cmd", c.base_cmd},
          {"head_cmd", c.head_cmd},
          {"parity_cmd", J(c.parity_cmd)},
          {"base_parity_cmd", J(c.base_parity_cmd)},
          {"base_ref", J(c.base_ref)},
          {"head_ref", J(c.head_ref)},
          {"base_sha", J(c.base_sha)},
          {"head_sha", J(c.head_sha)},
          {"target_change", J(c.target_change)},
          {"reason", J(c.reason)},
          {"created_at", c.created_at},
          {"accept_regressions", accept_regressions}};
}

nlohmann::json ToJson(const GuardView& g) {
  nlohmann::json j = {{"metric", g.metric},
                      {"higher_is_better", g.higher_is_better},
                      {"gain", g.gain()},
                      {"low", J(Minus1(g.ratio_low))},
                      {"high", J(Minus1(g.ratio_high))},
                      {"regressed", g.regressed},
                      {"declared", g.declared}};
  if (g.floor)
    j.update({{"base_median", g.floor->base_median},
              {"head_median", g.floor->head_median},
              {"floor", g.floor->amount},
              {"unit", g.floor->unit},
              {"beyond_gate", g.floor->beyond_gate},
              {"within_floor", g.within_floor()}});
  return j;
}

nlohmann::json ToJson(const ScoreView& s) {
  nlohmann::json guards = nlohmann::json::array();
  for (const auto& g : s.guards) guards.push_back(ToJson(g));
  const ScoreStatsView* st = s.stats ? &*s.stats : nullptr;
  return {{"id", s.id},
          {"verdict", VerdictName(s.verdict)},
          {"tier", TierName(s.tier)},
          {"gain", J(s.gain)},
          {"ci_low", J(s.ci_low)},
          {"ci_high", J(s.ci_high)},
          {"gate", J(s.gate)},
          {"frontier_before", J(s.frontier_before)},
          {"frontier_after", J(s.frontier_after)},
          {"base_median", J(s.base_median)},
          {"head_median", J(s.head_median)},
          {"rounds", s.rounds},
          {"surprise", int64_t{s.surprise}},
          {"policy_version", s.policy_version},
          {"note", s.note},
          {"scored_at", s.scored_at},
          {"attempt", st ? nlohmann::json(st->attempt) : nlohmann::json(nullptr)},
          {"alpha", st ? J(st->alpha) : nlohmann::json(nullptr)},
          {"ratio", st ? J(st->ratio) : nlohmann::json(nullptr)},
          {"ratio_low", st ? J(st->ratio_low) : nlohmann::json(nullptr)},
          {"ratio_high", st ? J(st->ratio_high) : nlohmann::json(nullptr)},
          {"decision", st ? nlohmann::json(ScoreDecisionName(st->decision)) : nlohmann::json(nullptr)},
          {"guards", guards}};
}

nlohmann::json ToJson(const ParityView& p) {
  return {{"side", SideName(p.side)},
          {"mode", ParityModeName(p.mode)},
          {"exit_code", p.exit_code},
          {"passed", int64_t{p.passed}},
          {"worst_top1", J(p.worst_top1)},
          {"worst_mean_kl", J(p.worst_mean_kl)},
          {"logits_sha256", J(p.logits_sha256)},
          {"all_rows_sha256", p.has_evidence ? Nonempty(p.all_rows_sha256) : nlohmann::json(nullptr)},
          {"message", p.message},
          {"evidence", p.has_evidence},
          {"build_id", p.has_evidence ? Nonempty(p.build_id) : nlohmann::json(nullptr)},
          {"artifact_sha256", p.has_evidence ? Nonempty(p.artifact_sha256) : nlohmann::json(nullptr)},
          {"stated_mode", p.has_evidence ? Nonempty(p.stated_mode) : nlohmann::json(nullptr)},
          {"depths", p.has_evidence ? nlohmann::json(p.depths) : nlohmann::json(nullptr)},
          {"window", p.has_evidence ? nlohmann::json(p.window) : nlohmann::json(nullptr)},
          {"tokens", p.has_evidence ? nlohmann::json(p.tokens) : nlohmann::json(nullptr)}};
}

nlohmann::json ToJson(const RetractionView& t) {
  return {{"reason", t.reason},
          {"replaced_by_run", J(t.replaced_by_run)},
          {"by_change", J(t.by_change)},
          {"retracted_at", t.retracted_at}};
}

nlohmann::json ToJson(const RunView& r) {
  nlohmann::json j = {{"run", r.id},
                      {"purpose", PurposeName(r.purpose)},
                      {"started_at", r.started_at},
                      {"box", r.box},
                      {"queue_id", J(r.queue_id)},
                      {"min_rounds", r.min_rounds},
                      {"max_rounds", r.max_rounds},
                      {"policy_version", r.policy_version},
                      {"samples", r.samples},
                      {"warmup_samples", r.warmup_samples},
                      {"status", RunStatusName(r.status)},
                      {"workload", r.workload},
                      {"noise", r.noise ? ToJson(*r.noise) : nlohmann::json(nullptr)},
                      {"retraction", r.retraction ? ToJson(*r.retraction) : nlohmann::json(nullptr)}};
  j["artifacts"] = nlohmann::json::array();
  for (const auto& a : r.artifacts)
    j["artifacts"].push_back(
        {{"side", SideName(a.side)}, {"build_id", a.build_id}, {"artifact_sha256", a.artifact_sha256}});
  j["parity"] = nlohmann::json::array();
  for (const auto& p : r.parity) j["parity"].push_back(ToJson(p));
  j["scores"] = nlohmann::json::array();
  for (const auto& s : r.scores) j["scores"].push_back(ToJson(s));
  if (r.status == RunStatus::kFailed) j["failure"] = r.failure.value_or("");
  return j;
}

// ---- text ----

std::string Pct(const std::optional<double>& f) { return f ? PctText(*f) : "n/a"; }
std::string Num(const std::optional<double>& v) { return v ? NumText(*v, 6) : "n/a"; }
std::string Ratio(const std::optional<double>& v) {
  if (!v) return "none";
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", *v);
  return b;
}
std::string Or(const std::optional<std::string>& s, const char* dflt = "n/a") { return s ? *s : dflt; }
std::string Id(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "n/a"; }
// The shortest form that round-trips, as the JSON printer writes it (15.0, 3.5).
std::string Plain(double v) { return nlohmann::json(v).dump(); }
std::string V(const std::string& s) { return terminal::Visible(s); }
std::string Prefix(const std::string& s, size_t n) { return s.empty() ? "(not stated)" : s.substr(0, n); }

std::string Line(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string Line(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return std::string(buf) + "\n";
}

std::string GuardText(const GuardView& g) {
  std::string s = g.metric + " " + Pct(g.gain()) + " [" + (g.ratio_low ? Pct(Minus1(g.ratio_low)) : "none") + ", " +
                  (g.ratio_high ? Pct(Minus1(g.ratio_high)) : "none") + "]";
  const std::string floor = FloorText(g);
  if (g.within_floor()) return s + ": " + floor + (g.declared ? " (declared up front, not needed)" : "");
  s += g.regressed ? ": regressed" : ": not regressed";
  if (!floor.empty()) s += ", " + floor;
  if (g.declared) s += g.regressed ? " (declared up front)" : " (declared up front, not needed)";
  else if (g.regressed) s += " (undeclared)";
  return s;
}

}  // namespace

std::string BitIdentityText(const RunView& r) {
  // The standard evidence of each side, as the gate judged it (a confirm's deep evidence is not the claim's).
  const ParityView *head = nullptr, *base = nullptr;
  for (const auto& p : r.parity)
    if (p.mode == ParityMode::kStandard) (p.side == Side::kHead ? head : base) = &p;
  const std::string h = head ? head->all_rows_sha256 : "", b = base ? base->all_rows_sha256 : "";
  if (h.empty() || b.empty())
    return std::string(
               "bit identity claimed, not proved: no evidence hashing every logit row (all_rows_sha256) on the ") +
           (h.empty() && b.empty() ? "head or base"
            : h.empty()            ? "head"
                                   : "base") +
           " side";
  if (h != b)
    return "bit identity claimed, not proved: the logit rows differ (head " + h.substr(0, 16) + " vs base " +
           b.substr(0, 16) + ")";
  return "bit identity proved: every logit row hashes to " + h.substr(0, 16) + " on both sides";
}

std::string FloorText(const GuardView& g) {
  if (!g.floor) return "";
  GuardResult r;
  r.higher_is_better = g.higher_is_better;
  r.base_median = g.floor->base_median;
  r.head_median = g.floor->head_median;
  r.floor = GuardFloor{"", g.floor->amount, g.floor->unit};
  r.beyond_gate = g.floor->beyond_gate;
  r.regressed = g.regressed;
  return ledger::FloorText(r);
}

// ---- JSON printers ----

nlohmann::json ToJson(const ChangeView& c) {
  nlohmann::json j;
  j["change"] = ToJson(c.change, c.accept_regressions);
  j["accept_regressions"] = c.accept_regressions;
  j["runs"] = nlohmann::json::array();
  for (const auto& r : c.runs) j["runs"].push_back(ToJson(r));
  j["state"] = c.StateName();
  j["related"] = nlohmann::json::array();
  for (const auto& x : c.related)
    j["related"].push_back({{"id", x.id}, {"kind", KindName(x.kind)}, {"title", x.title}, {"reason", J(x.reason)}});
  return j;
}

nlohmann::json ToJson(const FrontierView& f) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& l : f.ladders) {
    const LadderStep* last = l.last_counted();
    if (!l.ladder.value || !last) continue;
    nlohmann::json steps = nlohmann::json::array();
    for (const auto& s : l.ladder.steps) {
      nlohmann::json e;  // field by field, as the history timeline
      e["event"] = s.event.event_id;
      e["run"] = s.event.run_id;
      e["change"] = s.event.change_id;
      e["reason"] = s.event.reason;
      e["ratio"] = J(s.event.ratio);
      e["undoes_run"] = J(s.event.undoes_run);
      e["retracted"] = s.event.retracted;
      e["counted"] = s.counted;
      e["why"] = s.why;
      e["before"] = s.before;
      e["after"] = s.after;
      e["recorded"] = s.event.recorded;
      e["at"] = s.event.at;
      steps.push_back(std::move(e));
    }
    out.push_back({{"metric", l.metric},
                   {"box", l.box},
                   {"workload", l.workload},
                   {"value", *l.ladder.value},
                   {"gate", f.gate_frac * *l.ladder.value},
                   {"policy_version", f.policy_version},
                   {"event", last->event.event_id},
                   {"run", last->event.run_id},
                   {"change", last->event.change_id},
                   {"reason", last->event.reason},
                   {"at", last->event.at},
                   {"counted_events", l.counted_events()},
                   {"steps", std::move(steps)}});
  }
  return nlohmann::json{{"frontier", std::move(out)}};
}

namespace {

nlohmann::json RevertsJson(const std::vector<RevertEntry>& reverts) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : reverts) {
    nlohmann::json e = {{"id", r.id},
                        {"kind", KindName(r.kind)},
                        {"title", r.title},
                        {"target", J(r.target)},
                        {"reason", J(r.reason)},
                        {"created_at", r.created_at},
                        {"verdict", OptVerdict(r.verdict)},
                        {"runs", r.runs}};
    if (r.kind == Kind::kRevert) {
      e["found_wrong"] = r.reapplied_by.has_value();
      e["reapplied_by"] = J(r.reapplied_by);
    }
    list.push_back(std::move(e));
  }
  return list;
}

nlohmann::json RetractionsJson(const std::vector<RetractionEntry>& retractions) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : retractions)
    list.push_back({{"id", r.retraction.id},
                    {"run", r.retraction.run_id},
                    {"change", r.change},
                    {"title", r.title},
                    {"reason", r.retraction.reason},
                    {"replaced_by_run", J(r.retraction.replaced_by_run)},
                    {"by_change", J(r.retraction.by_change)},
                    {"retracted_at", r.retraction.retracted_at},
                    {"verdict", OptVerdict(r.verdict)},
                    {"gain", J(r.gain)},
                    {"base_median", J(r.base_median)},
                    {"head_median", J(r.head_median)}});
  return list;
}

nlohmann::json ParkedJson(const std::vector<ParkedChange>& none) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : none) {
    nlohmann::json atts = nlohmann::json::array();
    for (const auto& a : c.attempts)
      atts.push_back({{"run", a.run},
                      {"purpose", PurposeName(a.purpose)},
                      {"verdict", VerdictName(a.verdict)},
                      {"tier", TierName(a.tier)},
                      {"gain", J(a.gain)},
                      {"frontier_before", J(a.frontier_before)},
                      {"scored_at", a.scored_at},
                      {"attempt", J(a.attempt)},
                      {"alpha", J(a.alpha)}});
    list.push_back({{"id", c.id}, {"title", c.title}, {"attempts", std::move(atts)}, {"queued", c.queued}});
  }
  return list;
}

nlohmann::json TimelineJson(const std::vector<TimelineEntry>& timeline) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& t : timeline) {
    // Field by field: an initializer list builds a two-element array per
    // field first, and the timeline has one entry per score.
    nlohmann::json e;
    e["at"] = t.at;
    e["change"] = t.change;
    e["kind"] = KindName(t.kind);
    e["title"] = t.title;
    e["run"] = t.run;
    e["purpose"] = PurposeName(t.purpose);
    e["verdict"] = VerdictName(t.verdict);
    e["tier"] = TierName(t.tier);
    e["gain"] = J(t.gain);
    e["frontier_before"] = J(t.frontier_before);
    e["frontier_after"] = J(t.frontier_after);
    list.push_back(std::move(e));
  }
  return list;
}

}  // namespace

nlohmann::json ToJson(const HistoryView& h) {
  nlohmann::json j = nlohmann::json::object();
  if (h.reverts) j["reverts"] = RevertsJson(*h.reverts);
  if (h.retractions) j["retractions"] = RetractionsJson(*h.retractions);
  if (h.none) j["none"] = ParkedJson(*h.none);
  if (h.timeline) j["timeline"] = TimelineJson(*h.timeline);
  return j;
}

// ---- text printers ----
// Every string a submitter, a bench or a parity command wrote goes through V:
// controls are shown visibly, never sent to the terminal (base/terminal.h).

std::string ToText(const ChangeView& v) {
  const ChangeRow& c = v.change;
  std::string o;
  o += Line("change %lld: %s [%s] by %s, recorded %s", static_cast<long long>(c.id), V(c.title).c_str(),
            KindName(c.kind), V(c.author).c_str(), V(c.created_at).c_str());
  if (c.target_change)
    o += Line("  of change %lld; reason: %s", static_cast<long long>(*c.target_change), V(Or(c.reason)).c_str());
  o += Line("  claim %s  prediction %s  bit identity %s", c.claim_pct ? (Plain(*c.claim_pct) + "%").c_str() : "n/a",
            c.predict_pct ? (Plain(*c.predict_pct) + "%").c_str() : "n/a",
            c.claim_bit_identical ? "claimed" : "not claimed");
  if (!v.accept_regressions.empty()) {
    std::string list;
    for (const auto& m : v.accept_regressions) list += (list.empty() ? "" : ", ") + V(m);
    o += Line("  declared regressions: %s", list.c_str());
  }
  o += Line("  state: %s", v.StateName().c_str());
  for (const auto& r : v.runs) {
    o += Line("  run %lld (%s, box %s, %s): %lld samples (%lld warm-up)", static_cast<long long>(r.id),
              PurposeName(r.purpose), V(r.box).c_str(), RunStatusName(r.status), static_cast<long long>(r.samples),
              static_cast<long long>(r.warmup_samples));
    if (!r.workload.empty()) o += Line("    workload: %s", V(r.workload).c_str());
    if (r.noise)
      o += Line("    box noise: profile %lld (%s): %s", static_cast<long long>(r.noise->id),
                V(r.noise->recorded_at).c_str(), V(NoiseText(*r.noise)).c_str());
    for (const auto& a : r.artifacts)
      o += Line("    artifact %s: build %s, sha256 %.16s", SideName(a.side), V(a.build_id).c_str(),
                V(a.artifact_sha256).c_str());
    for (const auto& p : r.parity) {
      o += Line("    parity %s %s: %s", SideName(p.side), ParityModeName(p.mode), V(p.message).c_str());
      if (p.has_evidence)
        o += Line("      evidence: build %s, artifact %s, mode %s, %d depths, window %d",
                  V(Prefix(p.build_id, 12)).c_str(), V(Prefix(p.artifact_sha256, 16)).c_str(),
                  p.stated_mode.empty() ? "(not stated)" : V(p.stated_mode).c_str(), p.depths, p.window);
      else o += Line("      evidence: none recorded");
    }
    for (const auto& sc : r.scores) {
      o += Line("    score: %s tier %s gain %s ci [%s, %s] gate %s frontier %s -> %s rounds %d (policy v%d)",
                VerdictName(sc.verdict), TierName(sc.tier), Pct(sc.gain).c_str(), Pct(sc.ci_low).c_str(),
                Pct(sc.ci_high).c_str(), Num(sc.gate).c_str(), Num(sc.frontier_before).c_str(),
                Num(sc.frontier_after).c_str(), sc.rounds, sc.policy_version);
      if (sc.stats)
        o += Line("      decision: %s at attempt %d, alpha %s; median ratio %s, bounds [%s, %s]",
                  ScoreDecisionName(sc.stats->decision).c_str(), sc.stats->attempt, Num(sc.stats->alpha).c_str(),
                  Ratio(sc.stats->ratio).c_str(), Ratio(sc.stats->ratio_low).c_str(),
                  Ratio(sc.stats->ratio_high).c_str());
      for (const auto& g : sc.guards) o += Line("      guard %s", V(GuardText(g)).c_str());
      if (!sc.note.empty()) o += Line("      note: %s", V(sc.note).c_str());
    }
    if (r.status == RunStatus::kFailed) o += Line("    failed: %s", V(r.failure.value_or("")).c_str());
    if (r.retraction)
      o += Line("    RETRACTED: %s%s", V(r.retraction->reason).c_str(),
                r.retraction->replaced_by_run
                    ? (" (replaced by run " + std::to_string(*r.retraction->replaced_by_run) + ")").c_str()
                    : "");
  }
  for (const auto& x : v.related)
    o += Line("  related: change %lld %s \"%s\" (%s)", static_cast<long long>(x.id), KindName(x.kind),
              V(x.title).c_str(), V(Or(x.reason)).c_str());
  return o;
}

std::string ToText(const FrontierView& f) {
  std::string o;
  size_t n = 0;
  for (const auto& l : f.ladders) {
    const LadderStep* last = l.last_counted();
    if (!l.ladder.value || !last) continue;
    n++;
    o += Line("frontier: %s on box %s%s = %s (gate %s under policy v%d), set by change %lld run %lld (%s)",
              V(l.metric).c_str(), V(l.box).c_str(),
              l.workload.empty() ? "" : (" workload '" + V(l.workload) + "'").c_str(), Num(*l.ladder.value).c_str(),
              Num(f.gate_frac * *l.ladder.value).c_str(), f.policy_version,
              static_cast<long long>(last->event.change_id), static_cast<long long>(last->event.run_id),
              V(last->event.reason).c_str());
    const int not_counted = static_cast<int>(l.ladder.steps.size()) - l.counted_events();
    if (not_counted > 0)
      for (const auto& s : l.ladder.steps)
        if (!s.counted)
          o += Line("  not counted: change %lld run %lld (%s): %s", static_cast<long long>(s.event.change_id),
                    static_cast<long long>(s.event.run_id), V(s.event.reason).c_str(), V(s.why).c_str());
  }
  o += Line("frontier: %zu metric/box pair%s", n, n == 1 ? "" : "s");
  return o;
}

std::string ToText(const HistoryView& h) {
  std::string o;
  if (h.reverts) {
    o += Line("reverts and reapplies (%zu):", h.reverts->size());
    for (const auto& r : *h.reverts) {
      std::string line = "  change " + std::to_string(r.id) + " " + KindName(r.kind) + " of " + Id(r.target) + ": " +
                         (r.verdict ? VerdictName(*r.verdict) : "n/a") + "; reason: " + V(Or(r.reason));
      if (r.kind == Kind::kRevert)
        line += "; later found wrong: " +
                (r.reapplied_by ? "yes, reapplied by change " + std::to_string(*r.reapplied_by) : std::string("no"));
      o += line + "\n";
    }
  }
  if (h.retractions) {
    o += Line("retractions (%zu):", h.retractions->size());
    for (const auto& r : *h.retractions)
      o += Line(
          "  run %lld of change %lld \"%s\": gain %s (base %s, head %s); cause: %s%s",
          static_cast<long long>(r.retraction.run_id), static_cast<long long>(r.change), V(r.title).c_str(),
          Pct(r.gain).c_str(), Num(r.base_median).c_str(), Num(r.head_median).c_str(), V(r.retraction.reason).c_str(),
          r.retraction.replaced_by_run ? ("; replaced by run " + std::to_string(*r.retraction.replaced_by_run)).c_str()
                                       : "");
  }
  if (h.none) {
    o += Line("parked changes (%zu):", h.none->size());
    for (const auto& c : *h.none) {
      o += Line("  change %lld \"%s\"%s", static_cast<long long>(c.id), V(c.title).c_str(),
                c.queued ? " (queued for re-measure)" : "");
      for (const auto& a : c.attempts) {
        std::string line = "    run " + std::to_string(a.run) + " " + PurposeName(a.purpose) + ": " +
                           VerdictName(a.verdict) + " " + TierName(a.tier) + " gain " + Pct(a.gain) +
                           " against frontier " + Num(a.frontier_before);
        if (a.attempt) line += " (attempt " + std::to_string(*a.attempt) + ", alpha " + Num(a.alpha) + ")";
        o += line + "\n";
      }
    }
  }
  if (h.timeline) {
    o += Line("timeline (%zu scores):", h.timeline->size());
    for (const auto& t : *h.timeline)
      o += Line("  %s change %lld %s \"%s\" run %lld (%s): %s %s gain %s frontier %s -> %s", V(t.at).c_str(),
                static_cast<long long>(t.change), KindName(t.kind), V(t.title).c_str(), static_cast<long long>(t.run),
                PurposeName(t.purpose), VerdictName(t.verdict), TierName(t.tier), Pct(t.gain).c_str(),
                Num(t.frontier_before).c_str(), Num(t.frontier_after).c_str());
  }
  return o;
}

// ---- the Ledger's queries: printers over the read model ----

Result<nlohmann::json> Ledger::Show(int64_t change_id) {
  VERITY_ASSIGN_OR_RETURN(ChangeView v, LoadChangeView(*db_, change_id));
  return ToJson(v);
}

Result<nlohmann::json> Ledger::Frontier() {
  VERITY_ASSIGN_OR_RETURN(FrontierView f, LoadFrontierView(*this));
  return ToJson(f);
}

Result<nlohmann::json> Ledger::History(const std::string& what) {
  VERITY_ASSIGN_OR_RETURN(HistoryView h, LoadHistory(*db_, what));
  return ToJson(h);
}

}  // namespace verity::ledger
