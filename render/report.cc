// Renders the changelog from the ledger's read model (ledger/read_model.h),
// loaded in bulk by LoadLedgerView, then written section by section. No SQL
// here: every number comes from the typed view, and the ladder is the derived
// one (counted steps and why), never matched up by float values.
#include "render/report.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "base/markdown.h"
#include "base/sha256.h"
#include "ledger/drift.h"
#include "ledger/format.h"
#include "ledger/noise.h"
#include "ledger/predictions.h"
#include "ledger/read_model.h"
#include "ledger/score.h"

namespace verity::reports {
namespace {
using ledger::ChangeView;
using ledger::Kind;
using ledger::KindName;
using ledger::LadderStep;
using ledger::LadderView;
using ledger::LedgerView;
using ledger::RunView;
using ledger::ScoreView;
using ledger::TierName;
using ledger::Verdict;
using ledger::VerdictName;

std::string F(const char* fmt, double v) { return ledger::FormatText(fmt, v); }
// A fraction as a signed percentage; "—" when absent.
std::string Pct(const std::optional<double>& v) { return v ? ledger::PctText(*v) : "—"; }
std::string PctOpt(const std::optional<double>& v) { return v ? F("%+.2f%%", *v) : "—"; }  // already percent
std::string Num(const std::optional<double>& v) { return v ? F("%.2f", *v) : "—"; }
std::string Ratio(const std::optional<double>& r) { return r ? F("%+.2f%%", 100.0 * (*r - 1.0)) : "none"; }
// Every string a submitter, a bench or a parity command wrote (titles,
// authors, reasons, notes, metric and workload names, parity messages and
// build ids) reaches the markdown through one of these (base/markdown.h):
// data, never markup. Numbers and this file's own words need none.
std::string T(const std::string& s) { return markdown::Text(s); }
std::string Code(const std::string& s) { return markdown::Code(s, false); }
std::string Alt(const std::string& s) { return markdown::LinkText(s); }  // an image's alt text
std::string CellCode(const std::string& s) { return markdown::Code(s, true); }
std::string Id(int64_t v) { return std::to_string(v); }

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    out.push_back(text.substr(at, nl - at));
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  return out;
}

// " · workload `stories260K.bin f32 1t pp256+tg256`", or nothing for the unnamed workload.
std::string WorkloadSuffix(const LadderView& l, bool in_table) {
  return l.workload.empty() ? "" : " · workload " + markdown::Code(l.workload, in_table);
}

// A file-name-safe suffix naming the workload ("" for the unnamed one).
std::string FileSuffix(const std::string& workload) {
  std::string out;
  for (char ch : workload) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' ? ch : '-';
  return out.empty() ? "" : "-" + out;
}

// A metric or box in a chart's file name: letters, digits, `.`, `_` and `-`
// kept, anything else `-`, so that a name can make neither a path nor markup
// in the link to it.
std::string FilePart(const std::string& name) {
  std::string out;
  for (char ch : name) out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' ? ch : '-';
  return out;
}

// A chart's file name: its kind, then metric, box and workload as FilePart
// and FileSuffix write them, and -- when any of them lost a byte to that
// mapping or holds a `-` itself -- the first 12 hex digits of a hash of all
// three, so that two charts never share a file (issue 41, finding 8:
// workloads `m f32 1t` and `m-f32-1t` wrote one SVG).
std::string ChartFile(const std::string& kind, const std::string& metric, const std::string& box,
                      const std::string& workload) {
  const std::string part_m = FilePart(metric), part_b = FilePart(box), suffix = FileSuffix(workload);
  const bool exact = part_m == metric && part_b == box && suffix == (workload.empty() ? "" : "-" + workload) &&
                     (metric + box + workload).find('-') == std::string::npos;
  std::string file = kind + "-" + part_m + "-" + part_b + suffix;
  if (!exact) file += "-" + Sha256Hex(metric + '\0' + box + '\0' + workload).substr(0, 12);
  return file + ".svg";
}

std::string RunState(const RunView& r) { return r.StateName(); }

// "above at attempt 0, alpha 0.005" (policy v2 and later), or the policy for older scores.
std::string DecisionText(const ScoreView& s) {
  if (!s.stats) return "policy v" + std::to_string(s.policy_version) + " (95% CI)";
  std::string t = ledger::ScoreDecisionName(s.stats->decision) + ", attempt " + std::to_string(s.stats->attempt);
  if (s.stats->alpha) t += ", alpha " + F("%.3g", *s.stats->alpha);
  return t;
}

std::string Bounds(const ScoreView& s) { return s.ci_low || s.ci_high ? Pct(s.ci_low) + " .. " + Pct(s.ci_high) : "—"; }

std::string GuardText(const ledger::GuardView& g) {
  std::string t = T(g.metric) + " " + Pct(g.gain()) + " (" + Ratio(g.ratio_low) + " .. " + Ratio(g.ratio_high) + "): ";
  if (g.regressed) t += g.declared ? "regressed, declared up front" : "regressed, undeclared";
  else t += g.declared ? "held (a regression was declared up front)" : "held";
  const std::string floor = ledger::FloorText(g);
  return floor.empty() ? t : t + ", " + floor;
}

// The build id and artifact are the parity command's own words: code spans, escaped.
std::string EvidenceText(const ledger::ParityView& p, bool in_table) {
  if (!p.has_evidence) return "";
  return ", evidence from build " +
         markdown::Code(p.build_id.empty() ? std::string("not stated") : p.build_id.substr(0, 12), in_table) +
         ", artifact " +
         markdown::Code(p.artifact_sha256.empty() ? std::string("not stated") : p.artifact_sha256.substr(0, 16),
                        in_table) +
         ", mode " + (p.stated_mode.empty() ? std::string("not stated") : T(p.stated_mode)) + ", " +
         std::to_string(p.depths) + " depths, window " + std::to_string(p.window);
}

// Markdown, escaped for a paragraph or (`in_table`) a table cell.
std::string ParitySummary(const ChangeView& c, const RunView& r, bool in_table) {
  if (r.parity.empty()) return c.change.kind == Kind::kRevert ? "none given" : "no parity evidence (unverified)";
  std::string s;
  for (const auto& p : r.parity) {
    if (!s.empty()) s += "; ";
    s += std::string(ledger::SideName(p.side)) + " " + ledger::ParityModeName(p.mode) + ": ";
    if (!p.worst_top1) s += "no evidence (" + T(p.message) + ")";
    else
      s += "worst top-1 " + F("%.4f", *p.worst_top1) + ", worst mean KL " + F("%.3g", p.worst_mean_kl.value_or(NAN)) +
           (p.passed ? " (pass)" : " (FAIL)") + EvidenceText(p, in_table);
  }
  // What the bit-identity gate compared (every logit row), never the scored windows' hash.
  if (c.change.claim_bit_identical) s += "; " + T(ledger::BitIdentityText(r));
  return s;
}

bool Included(const ChangeView& c, const std::string& since) {
  if (since.empty()) return true;
  if (since.find('-') == std::string::npos) {
    char* end = nullptr;
    long long id = std::strtoll(since.c_str(), &end, 10);
    if (end && *end == '\0') return c.change.id >= id;
  }
  return c.change.created_at >= since;
}

// "a guard regresses only if also worse by more than: _mb 4 MiB, ...; the gate alone for _ns, ..."
std::string FloorsText(const ledger::Policy& p) {
  std::string sized, gate_only;
  for (const auto& f : p.guard_floors) {
    if (f.amount > 0.0)
      sized += (sized.empty() ? "" : ", ") + f.suffix + " " + ledger::AmountText(f.amount, f.unit, false);
    else gate_only += (gate_only.empty() ? "" : ", ") + f.suffix;
  }
  std::string s = "a guard beyond the gate regresses only if also worse by more than " + (sized.empty() ? "0" : sized);
  if (!gate_only.empty()) s += "; the gate alone for " + gate_only;
  return s;
}

// One policy version's rules as (name, text), in the order a reader reads
// them: the headline figures first, then the rules in words.
std::vector<std::pair<std::string, std::string>> PolicyRules(const ledger::PolicyView& pv) {
  const ledger::Policy& p = pv.policy;
  std::string tiers;
  for (const auto& [t, lower] : p.tiers)
    tiers += (tiers.empty() ? "" : ", ") + std::string(TierName(t)) + " >= " + F("%g%%", 100 * lower);
  std::vector<std::pair<std::string, std::string>> r = {
      {"gate", F("%g%%", 100 * p.gate_frac) + " of the frontier"},
      {"tiers", tiers},
      {"plausibility ceiling", F("%.0fx", p.ceiling_ratio) + " the base"},
      {"parity", "top-1 >= " + F("%.2f", p.parity_min_top1) + " and mean KL <= " + F("%.2f", p.parity_max_mean_kl) +
                     " (worst depth)"},
      {"surprise", "beyond " + F("%.0fx", p.surprise_factor) + " the prediction"}};
  if (!pv.has_rules) {
    r.push_back({"sequential rules", "none recorded (scored with a 95% bootstrap interval)"});
    return r;
  }
  r.push_back({"rounds", std::to_string(p.min_rounds) + ".." + std::to_string(p.max_rounds) +
                             " ABBA rounds, a look every " + std::to_string(p.look_every)});
  r.push_back({"alpha", F("%g", p.alpha) + " per change, spent over looks and re-measurements"});
  r.push_back({"parity evidence", "at least " + std::to_string(p.parity_min_depths) + " depths with at least " +
                                      std::to_string(p.parity_min_positions) +
                                      " positions each, deep evidence at least " + F("%gx", p.deep_factor) +
                                      " the standard"});
  if (!p.gain_rule.empty()) r.push_back({"gain rule", p.gain_rule});
  if (!p.guard_floors.empty()) r.push_back({"guard floors", FloorsText(p)});
  if (!p.step_rule.empty()) r.push_back({"step rule", p.step_rule});
  if (!p.budget_rule.empty()) r.push_back({"budget rule", p.budget_rule});
  for (const auto& f : p.parity_floors) r.push_back({"parity floor, " + f.kind, f.rule.substr(f.rule.find(": ") + 2)});
  return r;
}

std::string ScoresText(const ledger::PolicyView& pv) {
  return std::to_string(pv.scores) + " score" + (pv.scores == 1 ? "" : "s");
}

// The policy in force, every rule stated.
std::string CurrentPolicyText(const ledger::PolicyView& pv) {
  std::string s = "- **policy v" + std::to_string(pv.policy.version) + "** (current; " + ScoresText(pv) + "):\n";
  for (const auto& [name, text] : PolicyRules(pv)) s += "  - " + name + ": " + text + ".\n";
  return s;
}

// An older version as it differs from the one after it: its own text of
// every rule that differs, and the rules the newer one added.
std::string OlderPolicyText(const ledger::PolicyView& older, const ledger::PolicyView& newer) {
  const auto mine = PolicyRules(older), theirs = PolicyRules(newer);
  std::map<std::string, std::string> next(theirs.begin(), theirs.end()), own(mine.begin(), mine.end());
  std::string s = "- **policy v" + std::to_string(older.policy.version) + "** (" + ScoresText(older) + "): as v" +
                  std::to_string(newer.policy.version);
  std::string diff;
  for (const auto& [name, text] : mine) {
    auto it = next.find(name);
    if (it == next.end() || it->second != text) diff += "  - " + name + ": " + text + ".\n";
  }
  for (const auto& [name, text] : theirs)
    if (!own.count(name)) diff += "  - " + name + ": none.\n";
  return s + (diff.empty() ? ", the same rules.\n" : ", except:\n" + diff);
}

// The ladder steps of a run, across every (metric, box).
std::vector<std::pair<const LadderView*, size_t>> StepsOfRun(const LedgerView& v, int64_t run) {
  std::vector<std::pair<const LadderView*, size_t>> out;
  for (const auto& l : v.ladders)
    for (size_t i = 0; i < l.ladder.steps.size(); i++)
      if (l.ladder.steps[i].event.run_id == run) out.emplace_back(&l, i);
  return out;
}

std::string Factor(const LadderStep& s) {
  if (s.event.reason == "seed") return "—";
  if (s.event.ratio) return F("x%.4f", *s.event.ratio) + " (" + Pct(*s.event.ratio - 1.0) + ")";
  if (s.event.undoes_run) return "undoes run " + Id(*s.event.undoes_run);
  return "—";
}

// What every section of the changelog reads.
struct Page {
  const LedgerView& d;
  const ReportOptions& opt;
  const ledger::PolicyView& current;
  std::vector<std::pair<std::string, std::string>>* charts;  // (file, SVG) of each chart a section draws
};

// The policies: the rules in force in full, each older version as what it changed.
void PolicySection(const Page& page, std::string& md) {
  const ledger::PolicyView& current = page.current;
  const LedgerView& d = page.d;
  md +=
      "\n## Policy\n\nEvery score records the policy version it was scored under; old scores keep theirs. "
      "The rules in force, then each earlier version, newest first, as it differs from the one after it:\n\n";
  md += CurrentPolicyText(current);
  for (size_t i = d.policies.size() - 1; i-- > 0;) md += OlderPolicyText(d.policies[i], d.policies[i + 1]);
}

// Each frontier, and how many runs ended in each verdict.
void SummarySection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ledger::PolicyView& current = page.current;
  md +=
      "\n## Summary\n\n| metric | box | frontier | gate (absolute) | set by | counted steps |\n| --- | --- | --- | --- "
      "| --- | --- |\n";
  bool any_frontier = false;
  for (const auto& l : d.ladders) {
    const LadderStep* last = l.last_counted();
    if (!l.ladder.value || !last) continue;
    any_frontier = true;
    md += "| " + T(l.metric) + " | " + CellCode(l.box) + WorkloadSuffix(l, true) + " | " + Num(l.ladder.value) + " | " +
          F("%.2f", current.policy.gate_frac * *l.ladder.value) + " | change " + Id(last->event.change_id) + " (run " +
          Id(last->event.run_id) + ", " + T(last->event.reason) + ") | " + std::to_string(l.counted_events()) + " of " +
          std::to_string(l.ladder.steps.size()) + " |\n";
  }
  if (!any_frontier) md += "| — | — | — | — | no frontier yet | — |\n";
  std::map<std::string, int> verdicts;
  size_t runs = 0;
  for (const auto& c : d.changes)
    for (const auto& r : c.runs) verdicts[RunState(r)]++, runs++;
  md += "\n| verdict (latest per run) | runs |\n| --- | --- |\n";
  for (const auto& [v, n] : verdicts) md += "| " + v + " | " + std::to_string(n) + " |\n";
  md += "\n" + std::to_string(d.changes.size()) + " changes, " + std::to_string(runs) + " measured attempts, " +
        std::to_string(d.retractions.size()) + " retracted.\n";
}

// The frontier ladder: one table and chart per (metric, box, workload).
void LadderSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ledger::PolicyView& current = page.current;
  auto* charts = page.charts;
  md +=
      "\n## Frontier ladder\n\nThe frontier is derived, never stored: the seed, then each counted step's factor. "
      "A retracted run never counts; a reapply whose revert no longer counts is recorded but not counted (the "
      "change's own factor is still in the ladder).\n";
  for (const auto& l : d.ladders) {
    const std::string file = ChartFile("ladder", l.metric, l.box, l.workload);
    md += "\n### " + T(l.metric) + " on box " + Code(l.box) + WorkloadSuffix(l, false) + "\n\n";
    md +=
        "| step | change | run | event | factor | tier | counted | frontier | why |\n| --- | --- | --- | --- | --- | "
        "--- | --- | --- | --- |\n";
    for (size_t i = 0; i < l.ladder.steps.size(); i++) {
      const LadderStep& s = l.ladder.steps[i];
      const ChangeView* c = d.FindChange(s.event.change_id);
      const ScoreView* sc = d.ScoreOfStep(s);
      const bool seed = s.event.reason == "seed";
      const bool seeds = s.counted && s.before == 0.0;  // the step that seeded the frontier
      const std::string frontier = !s.counted ? (s.after == 0.0 ? std::string("—") : "stays " + Num(s.after))
                                   : seeds    ? Num(s.after)
                                              : Num(s.before) + " → " + Num(s.after);
      md += "| " + std::to_string(i) + " | " + Id(s.event.change_id) + " " + T(c ? c->change.title : "?") + " | " +
            Id(s.event.run_id) + " | " + T(s.event.reason) + (s.event.retracted ? " (retracted)" : "") + " | " +
            Factor(s) + " | " + (sc && !seed ? TierName(sc->tier) : "—") + " | " + (s.counted ? "yes" : "**no**") +
            " | " + frontier + " | " + T(s.why) + " |\n";
    }
    md += "\n![Frontier ladder of " + Alt(l.metric) + " on " + Alt(l.box) +
          (l.workload.empty() ? "" : " · workload " + Alt(l.workload)) + "](" + file + ")\n";
    charts->emplace_back(file, LadderSvg(BuildLadderChart(d, l, current.policy.gate_frac)));
  }
  if (d.ladders.empty()) md += "\nNo frontier yet.\n";
}

// Each change: its claim, prediction, runs, parity and guards.
void ChangesSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ReportOptions& opt = page.opt;
  md += "\n## Changes\n";
  for (const auto& c : d.changes) {
    if (!Included(c, opt.since)) continue;
    const ledger::ChangeRow& ch = c.change;
    md += "\n### Change " + Id(ch.id) + ": " + T(ch.title) + "\n\n";
    md += "- kind: " + std::string(KindName(ch.kind)) +
          (ch.target_change ? " of change " + Id(*ch.target_change) : "") + "; author: " + T(ch.author) +
          "; recorded " + T(ch.created_at) + "\n";
    if (ch.reason && !ch.reason->empty()) md += "- reason: " + T(*ch.reason) + "\n";
    md += "- claim " + PctOpt(ch.claim_pct) + ", prediction " + PctOpt(ch.predict_pct) +
          (ch.claim_bit_identical ? ", bit identity claimed" : "") + "\n";
    for (const auto& metric : c.accept_regressions) {
      // The measured change of the declared metric: its guard in the latest score that has one.
      const ledger::GuardView* g = nullptr;
      int64_t run = 0;
      for (const auto& r : c.runs)
        if (const ScoreView* s = r.latest())
          for (const auto& x : s->guards)
            if (x.metric == metric) g = &x, run = r.id;
      md += "- declared regression: " + T(metric) +
            (g ? " " + F("%+.1f%%", 100.0 * g->gain()) + " (run " + Id(run) +
                     (g->regressed ? ", regressed" : ", held") + ")"
               : std::string(" (not measured)")) +
            "\n";
    }
    md +=
        "\n| run | purpose | verdict | tier | measured gain | interval | decision | rounds | samples | frontier before "
        "| box |\n";
    md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (const auto& r : c.runs) {
      const ScoreView* s = r.latest();
      md += "| " + Id(r.id) + (r.retracted() ? " (retracted)" : "") + " | " + ledger::PurposeName(r.purpose) + " | " +
            RunState(r) + " | " + (s ? TierName(s->tier) : "—") + " | " + (s ? Pct(s->gain) : "—") + " | " +
            (s ? Bounds(*s) : "—") + " | " + (s ? DecisionText(*s) : "—") + " | " +
            (s ? std::to_string(s->rounds) : "—") + " | " + std::to_string(r.samples) + " | " +
            (s ? Num(s->frontier_before) : "—") + " | " + CellCode(r.box) + " |\n";
    }
    for (const auto& r : c.runs) {
      md += "\nRun " + Id(r.id) + " parity: " + ParitySummary(c, r, false) + ".";
      const ScoreView* s = r.latest();
      if (s && !s->guards.empty()) {
        md += " Guards: ";
        for (size_t i = 0; i < s->guards.size(); i++) md += (i ? "; " : "") + GuardText(s->guards[i]);
        md += ".";
      }
      if (s && !s->note.empty()) md += " Note: " + T(s->note) + ".";
      if (r.failure) md += " Failed: " + T(*r.failure) + ".";
      for (const auto& [l, i] : StepsOfRun(d, r.id)) {
        const LadderStep& st = l->ladder.steps[i];
        if (!st.counted)
          md += " Ladder step " + std::to_string(i) + " (" + T(st.event.reason) + ") not counted: " + T(st.why) + ".";
      }
      md += "\n";
    }
  }
}

// Every parked change with each attempt and the frontier it faced.
void NoneCatalogSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ReportOptions& opt = page.opt;
  md +=
      "\n## The `none` catalog\n\nEvery change that was parked (scored `none`), with each attempt and the frontier it "
      "was measured against.\n";
  bool any_none = false;
  for (const auto& c : d.changes) {
    if (c.change.kind != Kind::kChange || !Included(c, opt.since)) continue;
    bool parked = false;
    for (const auto& r : c.runs)
      for (const auto& s : r.scores) parked |= s.verdict == Verdict::kNone;
    if (!parked) continue;
    any_none = true;
    md += "\n### Change " + Id(c.change.id) + ": " + T(c.change.title) +
          "\n\n| # | run | purpose | verdict | tier | gain | decision | measured against frontier |\n";
    md += "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
    int attempt = 1;
    for (const auto& r : c.runs) {
      const ScoreView* s = r.latest();
      md += "| " + std::to_string(attempt++) + " | " + Id(r.id) + " | " + ledger::PurposeName(r.purpose) + " | " +
            RunState(r) + " | " + (s ? TierName(s->tier) : "—") + " | " + (s ? Pct(s->gain) : "—") + " | " +
            (s ? DecisionText(*s) : "—") + " | " + (s ? Num(s->frontier_before) : "—") + " |\n";
    }
  }
  if (!any_none) md += "\nNo change has been parked.\n";
}

// Every run the parity gate rejected.
void RejectionsSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ReportOptions& opt = page.opt;
  md += "\n## Correctness rejections\n\n";
  std::string rej;
  for (const auto& c : d.changes) {
    if (!Included(c, opt.since)) continue;
    for (const auto& r : c.runs)
      for (const auto& s : r.scores) {
        if (s.verdict != Verdict::kRejectedParity) continue;
        const bool confirm = s.rounds > 0;  // a held run whose deep parity failed on confirm
        rej += "| " + Id(c.change.id) + " " + T(c.change.title) + " | " + Id(r.id) + " | " + ParitySummary(c, r, true) +
               " | " +
               (confirm ? "measured before the deep check failed; never banked"
                        : "its speed was never measured: " + std::to_string(r.samples) + " samples recorded") +
               " |\n";
      }
  }
  md += rej.empty() ? "No change was rejected for correctness.\n"
                    : "| change | run | parity | speed |\n| --- | --- | --- | --- |\n" + rej;
}

// Every guard metric that regressed beyond the gate.
void GuardRegressionsSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ReportOptions& opt = page.opt;
  md +=
      "\n## Guard regressions\n\nEvery other metric a bench reports is a guard: one that regressed beyond the gate "
      "rejects the change (`rejected-regression`) unless the submitter declared it up front.\n\n";
  std::string gr;
  for (const auto& c : d.changes) {
    if (!Included(c, opt.since)) continue;
    for (const auto& r : c.runs) {
      const ScoreView* s = r.latest();
      if (!s) continue;
      for (const auto& g : s->guards)
        if (g.regressed)
          gr += "| " + Id(c.change.id) + " " + T(c.change.title) + " | " + Id(r.id) + " | " + VerdictName(s->verdict) +
                " | " + T(g.metric) + " | " + Pct(g.gain()) + " | " + Ratio(g.ratio_low) + " .. " +
                Ratio(g.ratio_high) + " | " + (g.declared ? "yes" : "no") + " |\n";
    }
  }
  md += gr.empty() ? "No guard metric has regressed.\n"
                   : "| change | run | verdict | guard | change | bounds | declared |\n| --- | --- | --- | --- | --- | "
                     "--- | --- |\n" +
                         gr;
}

// Every run measured without evidence bound to its head.
void UnverifiedSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ReportOptions& opt = page.opt;
  md += "\n## Unverified results\n\n";
  std::string uv;
  for (const auto& c : d.changes) {
    if (!Included(c, opt.since)) continue;
    for (const auto& r : c.runs)
      if (const ScoreView* s = r.latest(); s && s->verdict == Verdict::kUnverified)
        uv += "| " + Id(c.change.id) + " " + T(c.change.title) + " | " + Id(r.id) + " | " + Pct(s->gain) + " | " +
              T(s->note) + " |\n";
  }
  md += uv.empty()
            ? "No result was scored `unverified`.\n"
            : "Measured without parity evidence bound to the head's artifact: shown, never moved the frontier.\n\n"
              "| change | run | gain | note |\n| --- | --- | --- | --- |\n" +
                  uv;
}

// Every revert and reapply, its evidence, and whether it was later found wrong.
void RevertsSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ReportOptions& opt = page.opt;
  md += "\n## Reverts and reapplies\n\n";
  std::string rv;
  for (const auto& c : d.changes) {
    if (c.change.kind == Kind::kChange || !Included(c, opt.since)) continue;
    std::string verdict = "—", evidence = "—", ladder = "—";
    for (const auto& r : c.runs) {
      verdict = RunState(r);
      if (const ScoreView* s = r.latest()) {
        evidence = !s->gain ? ""
                            : "gain " + Pct(s->gain) + " (interval " + Pct(s->ci_low) + " .. " + Pct(s->ci_high) +
                                  ", run " + Id(r.id) + (r.retracted() ? ", retracted" : "") + ")";
        if (!s->note.empty()) evidence += (evidence.empty() ? "" : "; ") + T(s->note);
      }
      for (const auto& [l, i] : StepsOfRun(d, r.id)) {
        const LadderStep& st = l->ladder.steps[i];
        ladder = st.counted ? "counted (step " + std::to_string(i) + ")"
                            : "not counted (step " + std::to_string(i) + "): " + T(st.why);
      }
    }
    std::string wrong = "—";
    if (c.change.kind == Kind::kRevert) {
      wrong = "no";
      for (const auto& x : c.related)
        if (x.kind == Kind::kReapply) {
          wrong = "yes: reapplied by change " + Id(x.id) + " (" + T(x.reason.value_or("")) + ")";
          break;
        }
    }
    rv += "| " + Id(c.change.id) + " | " + KindName(c.change.kind) + " | " +
          (c.change.target_change ? Id(*c.change.target_change) : "—") + " | " + T(c.change.reason.value_or("")) +
          " | " + verdict + " | " + evidence + " | " + ladder + " | " + wrong + " |\n";
  }
  md += rv.empty() ? "No reverts.\n"
                   : "| change | kind | of | reason | verdict | evidence | ladder | later found wrong |\n"
                     "| --- | --- | --- | --- | --- | --- | --- | --- |\n" +
                         rv;
}

// Every scored change was predicted first: each author's record.
void PredictionsSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ledger::PredictionsView pv = ledger::PredictionRecord(d.changes);
  md +=
      "\n## Predictions\n\nEvery change is predicted before it is measured. Per author: bias (mean of measured "
      "minus predicted), median absolute error, and how many landed within 2x of the prediction.\n\n";
  if (pv.authors.empty()) {
    md += "No predicted change has a measured gain yet.\n";
  } else {
    md +=
        "| author | scored | bias | median abs. error | within 2x | surprises |\n| --- | --- | --- | --- | --- | --- "
        "|\n";
    for (const auto& a : pv.authors)
      md += "| " + T(a.author) + " | " + std::to_string(a.changes) + " | " + ledger::PctText(a.bias) + " | " +
            F("%.2f%%", 100.0 * a.median_abs_error) + " | " + std::to_string(a.within_2x) + " of " +
            std::to_string(a.changes) + " | " + std::to_string(a.surprises) + " |\n";
    md += "\n| change | author | predicted | measured | verdict | surprise |\n| --- | --- | --- | --- | --- | --- |\n";
    for (const auto& e : pv.entries)
      md += "| " + Id(e.change) + " " + T(e.title) + " | " + T(e.author) + " | " + ledger::PctText(e.predicted) +
            " | " + ledger::PctText(e.measured) + " | " + e.verdict + " | " + (e.surprise ? "yes" : "no") + " |\n";
  }
}

// Drift: the change points single comparisons miss, with a chart per series.
void DriftSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  auto* charts = page.charts;
  md +=
      "\n## Drift\n\nChange points in main's measured speed over history (bases, and heads of accepted changes; "
      "retracted runs excluded), per metric, box and workload: E-divisive means, each split tested by " +
      std::to_string(d.drift.options.permutations) + " permutations at alpha " + Num(d.drift.options.alpha) + ".\n\n";
  for (const auto& line : SplitLines(ToText(d.drift))) md += "- " + T(line.substr(line.find(": ") + 2)) + "\n";
  for (const auto& series : d.drift.series) {
    if (series.points.empty()) continue;
    const std::string file = ChartFile("series", series.metric, series.box, series.workload);
    md += "\n![" + Alt(series.metric) + " measured on main on " + Alt(series.box) +
          (series.workload.empty() ? "" : " · workload " + Alt(series.workload)) + "](" + file + ")\n";
    charts->emplace_back(file, SeriesSvg(BuildSeriesChart(series, d.drift.options)));
  }
}

// Box noise: what an A/A measured on each box, and what it means for the gate.
void NoiseSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  const ledger::PolicyView& current = page.current;
  md +=
      "\n## Box noise\n\nEach `verity calibrate` runs the same bench command as base and head; submissions on "
      "that box and workload take their rounds from its latest profile, or are refused as unresolvable.\n\n";
  if (d.noise.empty()) {
    md += "No box has been calibrated.\n";
  } else {
    md +=
        "| profile | box | workload | metric | rounds | per-round sigma | MAD | outliers | drift / round | rounds to "
        "resolve the gate |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    const double look_alpha = ledger::LookAlpha(ledger::PlanFor(current.policy), 0);
    for (const auto& p : d.noise)
      md += "| " + Id(p.id) + " | " + CellCode(p.box) + " | " + T(p.workload.empty() ? "—" : p.workload) + " | " +
            T(p.metric) + " | " + std::to_string(p.rounds) + " | " + F("%.2f%%", 100 * p.sigma) + " | " +
            F("%.2f%%", 100 * p.round_mad) + " | " + std::to_string(p.outlier_rounds) + " | " +
            F("%+.3f%%", 100 * p.drift_per_round) + " | " +
            std::to_string(ledger::RoundsToResolve(p.sigma, current.policy.gate_frac, look_alpha)) + " |\n";
  }
}

// Every retracted number: what produced it, what replaced it.
void RetractionsSection(const Page& page, std::string& md) {
  const LedgerView& d = page.d;
  md += "\n## Retracted numbers\n";
  if (d.retractions.empty()) md += "\nNothing has been retracted.\n";
  for (const auto& t : d.retractions) {
    const RunView* r = d.FindRun(t.run_id);
    if (!r) continue;
    const ChangeView* c = d.FindChange(r->change_id);
    const ScoreView* s = r->latest();
    md += "\n### Note on a retracted number: run " + Id(r->id) + " (change " + Id(c->change.id) + ", " +
          T(c->change.title) + ")\n\n";
    md += "- The number: " +
          (s ? "gain " + Pct(s->gain) + " (interval " + Pct(s->ci_low) + " .. " + Pct(s->ci_high) + "), base median " +
                   Num(s->base_median) + ", head median " + Num(s->head_median) + ", verdict " + VerdictName(s->verdict)
             : std::string("unscored")) +
          ".\n";
    md += "- What produced it: " + T(t.reason) + ".\n";
    std::string repl = "nothing yet";
    if (t.replaced_by_run) {
      if (const RunView* nr = d.FindRun(*t.replaced_by_run)) {
        const ScoreView* ns = nr->latest();
        repl = "run " + Id(nr->id) + " (change " + Id(nr->change_id) + ")" +
               (ns ? ": " + std::string(VerdictName(ns->verdict)) + ", gain " + Pct(ns->gain) : "");
      }
    } else if (t.by_change) {
      if (const ChangeView* rc = d.FindChange(*t.by_change)) {
        repl = "change " + Id(rc->change.id) + " (" + KindName(rc->change.kind) + ", \"" + T(rc->change.title) + "\")";
        for (const auto& x : rc->runs)
          if (const ScoreView* ns = x.latest())
            repl += ": run " + Id(x.id) + " " + VerdictName(ns->verdict) + ", gain " + Pct(ns->gain);
      }
    }
    md += "- What replaced it: " + repl + ".\n";
    std::string steps;
    for (const auto& [l, i] : StepsOfRun(d, r->id))
      steps += (steps.empty() ? "" : ", ") + std::string("step ") + std::to_string(i) + " of " + T(l->metric) + " on " +
               Code(l->box);
    md += "- It no longer counts toward the frontier" +
          (steps.empty() ? std::string() : " (ladder " + steps + ": not counted)") + ".\n";
  }
}

std::string Render(const LedgerView& d, const ReportOptions& opt, const std::string& ledger_name,
                   std::vector<std::pair<std::string, std::string>>* charts) {
  const Page page{d, opt, d.policies.back(), charts};
  std::string md;
  md += "# verity changelog\n\n";
  md += "Generated from ledger tip `" + d.tip + "` (" + std::to_string(d.records) + " sealed records).\n\n";
  md += "Written from the ledger " + Code(ledger_name) + " alone; the same ledger always yields this same file. ";
  md += "`verity ledger verify --expect-tip " + d.tip +
        "` checks that the ledger still holds every record it was generated from.\n";
  if (!opt.since.empty())
    md += "\nPer-change sections are limited to changes since " + Code(opt.since) +
          "; the summary and ladder cover everything.\n";

  PolicySection(page, md);
  SummarySection(page, md);
  LadderSection(page, md);
  ChangesSection(page, md);
  NoneCatalogSection(page, md);
  RejectionsSection(page, md);
  GuardRegressionsSection(page, md);
  UnverifiedSection(page, md);
  RevertsSection(page, md);
  PredictionsSection(page, md);
  DriftSection(page, md);
  NoiseSection(page, md);
  RetractionsSection(page, md);
  return md;
}

}  // namespace

// The ladder's chart: one slot per run on it (a step on the ladder, or a score
// measured on its metric, box and workload), in recording order.
LadderChart BuildLadderChart(const ledger::LedgerView& d, const ledger::LadderView& l, double gate_frac) {
  LadderChart chart;
  chart.title = l.metric + " frontier ladder";
  chart.subtitle = "box " + l.box + (l.workload.empty() ? "" : " · workload " + l.workload);
  chart.metric = l.metric;
  chart.gate_frac = gate_frac;
  const bool higher = ledger::HigherIsBetter(l.metric);
  std::map<int64_t, std::vector<const LadderStep*>> runs;  // run id -> its steps, in recording order
  for (const auto& st : l.ladder.steps) runs[st.event.run_id].push_back(&st);
  for (const auto& c : d.changes)
    for (const auto& r : c.runs)
      if (c.change.metric == l.metric && r.box == l.box && r.workload == l.workload && r.latest()) runs[r.id];
  std::optional<double> frontier;
  for (const auto& [run_id, steps] : runs) {
    const RunView* r = d.FindRun(run_id);
    if (!r) continue;
    LadderSlot slot;
    slot.label = "#" + Id(r->change_id);
    slot.change = r->change_id;
    slot.run = r->id;
    slot.retracted = r->retracted();
    const std::optional<double> faced = frontier;
    for (const LadderStep* st : steps) {
      if (!st->counted) continue;
      if (!frontier || st->before == 0.0) slot.seeded_from = st->after;
      frontier = st->after;
    }
    slot.frontier = frontier;
    if (const ScoreView* s = r->latest()) {
      if (s->verdict == Verdict::kRejectedParity) {
        // Its speed was never measured (or, on confirm, never banked): a cross at the frontier it faced.
        slot.mark = Mark::kRejectedParity;
        slot.value = faced ? faced : s->frontier_before;
        slot.note = s->rounds > 0 ? "deep parity" : "parity";
      } else if (s->gain) {
        // The measured gain applied to the frontier it was scored against: its height against the band is its verdict.
        const std::optional<double> base = s->frontier_before ? s->frontier_before : faced ? faced : s->base_median;
        if (base) slot.value = *base * (higher ? 1.0 + *s->gain : 1.0 / (1.0 + *s->gain));
        slot.mark = s->verdict == Verdict::kAccepted                                  ? Mark::kAccepted
                    : s->verdict == Verdict::kNone || s->verdict == Verdict::kRefused ? Mark::kParked
                                                                                      : Mark::kNotBanked;
        slot.note = F("%+.1f%%", 100.0 * *s->gain);
      }
    }
    chart.slots.push_back(slot);
  }
  return chart;
}

// The drift series' chart: main's measured medians with the change points.
SeriesChart BuildSeriesChart(const ledger::DriftSeries& series, const ledger::DriftOptions& options) {
  SeriesChart chart;
  chart.title = series.metric + " measured on main, with drift change points";
  chart.subtitle = "box " + series.box + (series.workload.empty() ? "" : " · workload " + series.workload);
  chart.metric = series.metric;
  for (const auto& p : series.points) chart.points.push_back({p.value, "r" + Id(p.run), p.side == "head", p.run});
  for (const auto& c : series.changes)
    chart.breaks.push_back({c.point.index, c.point.before_median, c.point.after_median});
  chart.min_points = 2 * options.min_segment;
  return chart;
}

Result<WrittenReport> WriteReport(ledger::Ledger& ledger, const ReportOptions& opt) {
  if (opt.out.empty()) return Status::Error("--out is required");
  VERITY_ASSIGN_OR_RETURN(LedgerView d, ledger::LoadLedgerView(ledger));
  std::vector<std::pair<std::string, std::string>> charts;
  const std::string md = Render(d, opt, std::filesystem::path(ledger.db().path()).filename().string(), &charts);
  namespace fs = std::filesystem;
  const fs::path out(opt.out);
  const fs::path chart_dir =
      opt.charts_dir.empty() ? (out.has_parent_path() ? out.parent_path() : fs::path(".")) : fs::path(opt.charts_dir);
  std::error_code ec;
  fs::create_directories(chart_dir, ec);
  if (ec) return Status::Error(chart_dir.string() + ": cannot create charts directory");
  WrittenReport w;
  std::string text = md;
  if (!opt.charts_dir.empty()) {
    // Links are relative to the report's directory.
    const fs::path rel = fs::relative(chart_dir, out.has_parent_path() ? out.parent_path() : fs::path("."), ec);
    for (const auto& [name, svg] : charts) {
      const std::string from = "](" + name + ")", to = "](" + (rel / name).generic_string() + ")";
      for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size()))
        text.replace(p, from.size(), to);
    }
  }
  for (const auto& [name, svg] : charts) {
    const fs::path p = chart_dir / name;
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << svg;
    if (!f) return Status::Error(p.string() + ": cannot write chart");
    w.charts.push_back(p.string());
  }
  std::ofstream f(out, std::ios::binary | std::ios::trunc);
  f << text;
  if (!f) return Status::Error(opt.out + ": cannot write report");
  w.markdown_path = opt.out;
  w.changes = static_cast<int>(d.changes.size());
  return w;
}

}  // namespace verity::reports
