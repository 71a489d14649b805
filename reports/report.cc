// Renders the changelog from the ledger's tables, loaded in bulk (a handful
// of queries however large the ledger), then written section by section.
#include "reports/report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace verity::reports {
namespace {
using ledger::AsDouble;
using ledger::AsInt;
using ledger::AsText;
using ledger::IsNull;
using ledger::Row;
using ledger::Value;

std::string F(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}
std::string Pct(const Value& v) { return IsNull(v) ? "—" : F("%+.2f%%", 100.0 * AsDouble(v)); }
std::string PctOpt(const Value& v) { return IsNull(v) ? "—" : F("%+.2f%%", AsDouble(v)); }  // already percent
std::string Num(const Value& v) { return IsNull(v) ? "—" : F("%.2f", AsDouble(v)); }
// Table cells: no pipes or newlines may break the row.
std::string Cell(std::string s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += "\\|";
    else if (c == '\n') o += ' ';
    else o += c;
  }
  return o;
}

struct Change {
  int64_t id;
  std::string kind, title, author, reason, created;
  Value claim, predict, target;
  bool bit_claim;
  std::vector<int64_t> runs;
};
struct Run {
  int64_t id, change;
  std::string purpose, box, started;
  int64_t samples = 0;
  std::vector<size_t> scores;  // indexes into `scores`
  std::string failure;
  bool retracted = false;
};
struct Score {
  int64_t id, run;
  std::string verdict, tier, note;
  Value gain, ci_low, ci_high, gate, front_before, front_after, base_med, head_med;
  int64_t rounds, policy;
};
struct Parity {
  std::string side, mode, message, sha;
  int64_t passed;
  Value top1, kl;
};

struct Data {
  std::map<int64_t, Change> changes;
  std::map<int64_t, Run> runs;
  std::vector<Score> scores;
  std::map<int64_t, std::vector<Parity>> parity;  // by run
  std::vector<Row> retractions, frontier, boxes;
  std::string policy;
  double gate_frac = 0.0;
};

Result<Data> Load(ledger::Db& db) {
  Data d;
  VERITY_ASSIGN_OR_RETURN(auto pol, db.Query("SELECT version, gate_frac, tiers, ceiling_ratio, parity_min_top1, "
                                             "parity_max_mean_kl, surprise_factor FROM policy ORDER BY version DESC LIMIT 1"));
  if (pol.empty()) return Status::Error(db.path() + ": no policy recorded");
  d.gate_frac = AsDouble(pol[0][1]);
  std::string tiers;
  try {
    for (const auto& t : nlohmann::json::parse(AsText(pol[0][2])))
      tiers += (tiers.empty() ? "" : ", ") + t[0].get<std::string>() + " >= " + F("%g%%", 100 * t[1].get<double>());
  } catch (const std::exception&) {
    return Status::Error(db.path() + ": policy tiers are unreadable");
  }
  d.policy = "policy v" + std::to_string(AsInt(pol[0][0])) + ": gate " + F("%g%%", 100 * AsDouble(pol[0][1])) +
               " of the frontier; tiers " + tiers + "; plausibility ceiling " + F("%.0fx", AsDouble(pol[0][3])) +
               " the base; parity top-1 >= " + F("%.2f", AsDouble(pol[0][4])) + " and mean KL <= " +
               F("%.2f", AsDouble(pol[0][5])) + " (worst depth); surprise beyond " + F("%.0fx", AsDouble(pol[0][6])) +
               " the prediction";
  VERITY_ASSIGN_OR_RETURN(auto cs, db.Query("SELECT id, kind, title, author, claim_pct, predict_pct, claim_bit_identical, "
                                            "target_change, reason, created_at FROM changes ORDER BY id"));
  for (const auto& r : cs)
    d.changes[AsInt(r[0])] = Change{AsInt(r[0]), AsText(r[1]), AsText(r[2]), AsText(r[3]), AsText(r[8]), AsText(r[9]),
                                    r[4], r[5], r[7], AsInt(r[6]) != 0, {}};
  VERITY_ASSIGN_OR_RETURN(auto rs, db.Query("SELECT r.id, r.change_id, r.purpose, b.fingerprint, r.started_at FROM runs r "
                                            "JOIN boxes b ON b.id = r.box_id ORDER BY r.id"));
  for (const auto& r : rs) {
    Run run;
    run.id = AsInt(r[0]);
    run.change = AsInt(r[1]);
    run.purpose = AsText(r[2]);
    run.box = AsText(r[3]);
    run.started = AsText(r[4]);
    d.runs[run.id] = run;
    d.changes[run.change].runs.push_back(run.id);
  }
  VERITY_ASSIGN_OR_RETURN(auto cnt, db.Query("SELECT run_id, count(*) FROM samples GROUP BY run_id"));
  for (const auto& r : cnt) d.runs[AsInt(r[0])].samples = AsInt(r[1]);
  VERITY_ASSIGN_OR_RETURN(auto ss, db.Query("SELECT id, run_id, verdict, tier, note, gain, ci_low, ci_high, gate, "
                                            "frontier_before, frontier_after, base_median, head_median, rounds, "
                                            "policy_version FROM scores ORDER BY id"));
  for (const auto& r : ss) {
    d.scores.push_back(Score{AsInt(r[0]), AsInt(r[1]), AsText(r[2]), AsText(r[3]), AsText(r[4]), r[5], r[6], r[7], r[8],
                             r[9], r[10], r[11], r[12], AsInt(r[13]), AsInt(r[14])});
    d.runs[AsInt(r[1])].scores.push_back(d.scores.size() - 1);
  }
  VERITY_ASSIGN_OR_RETURN(auto ps, db.Query("SELECT run_id, side, mode, message, logits_sha256, passed, worst_top1, "
                                            "worst_mean_kl FROM parity_results ORDER BY id"));
  for (const auto& r : ps)
    d.parity[AsInt(r[0])].push_back(Parity{AsText(r[1]), AsText(r[2]), AsText(r[3]), AsText(r[4]), AsInt(r[5]), r[6], r[7]});
  VERITY_ASSIGN_OR_RETURN(auto fs, db.Query("SELECT run_id, message FROM run_failures ORDER BY id"));
  for (const auto& r : fs) d.runs[AsInt(r[0])].failure = AsText(r[1]);
  VERITY_ASSIGN_OR_RETURN(d.retractions, db.Query("SELECT t.run_id, t.reason, t.replaced_by_run, t.by_change FROM "
                                                  "retractions t ORDER BY t.id"));
  for (const auto& r : d.retractions) d.runs[AsInt(r[0])].retracted = true;
  VERITY_ASSIGN_OR_RETURN(d.frontier, db.Query("SELECT f.metric, b.fingerprint, f.value, f.run_id, f.reason FROM "
                                               "frontier_events f JOIN boxes b ON b.id = f.box_id ORDER BY f.id"));
  return d;
}

// The latest score of a run, or nullptr.
const Score* LatestScore(const Data& d, const Run& r) { return r.scores.empty() ? nullptr : &d.scores[r.scores.back()]; }

std::string RunState(const Data& d, const Run& r) {
  if (const Score* s = LatestScore(d, r)) return s->verdict;
  return r.failure.empty() ? "incomplete" : "failed";
}

std::string ParitySummary(const Data& d, const Change& c, int64_t run) {
  auto it = d.parity.find(run);
  if (it == d.parity.end()) return c.kind == "revert" ? "none given" : "no parity evidence (unverified)";
  std::string s;
  std::string head_sha, base_sha;
  for (const auto& p : it->second) {
    if (!s.empty()) s += "; ";
    s += p.side + " " + p.mode + ": ";
    if (IsNull(p.top1)) s += "no evidence (" + p.message + ")";
    else s += "worst top-1 " + F("%.4f", AsDouble(p.top1)) + ", worst mean KL " + F("%.3g", AsDouble(p.kl)) + (p.passed ? " (pass)" : " (FAIL)");
    (p.side == "head" ? head_sha : base_sha) = p.sha;
  }
  if (c.bit_claim)
    s += !head_sha.empty() && head_sha == base_sha ? "; bit identity proved: logits sha256 `" + head_sha.substr(0, 16) + "` on both sides"
                                                   : "; bit identity claimed, not proved";
  return s;
}

bool Included(const Change& c, const std::string& since) {
  if (since.empty()) return true;
  if (since.find('-') == std::string::npos) {
    char* end = nullptr;
    long long id = std::strtoll(since.c_str(), &end, 10);
    if (end && *end == '\0') return c.id >= id;
  }
  return c.created >= since;
}

std::string Render(const Data& d, const ReportOptions& opt, const std::string& ledger_name,
                   std::vector<std::pair<std::string, std::string>>* charts) {
  std::string md;
  md += "# verity changelog\n\n";
  md += "Generated from the ledger `" + ledger_name + "` alone; the same ledger always yields this same file. ";
  md += "Scored under " + d.policy + ".\n";
  if (!opt.since.empty()) md += "\nPer-change sections are limited to changes since `" + opt.since + "`; the summary and ladder cover everything.\n";

  // Summary.
  md += "\n## Summary\n\n| metric | box | frontier | gate (absolute) | set by |\n| --- | --- | --- | --- | --- |\n";
  std::map<std::pair<std::string, std::string>, const Row*> current;
  for (const auto& f : d.frontier)
    if (!d.runs.at(AsInt(f[3])).retracted) current[{AsText(f[0]), AsText(f[1])}] = &f;
  const double gate_frac = d.gate_frac;
  for (const auto& [key, f] : current) {
    const Run& r = d.runs.at(AsInt((*f)[3]));
    md += "| " + key.first + " | `" + key.second + "` | " + Num((*f)[2]) + " | " + F("%.2f", gate_frac * AsDouble((*f)[2])) +
          " | change " + std::to_string(r.change) + " (run " + std::to_string(r.id) + ", " + AsText((*f)[4]) + ") |\n";
  }
  if (current.empty()) md += "| — | — | — | — | no frontier yet |\n";
  std::map<std::string, int> verdicts;
  for (const auto& [id, r] : d.runs) verdicts[RunState(d, r)]++;
  md += "\n| verdict (latest per run) | runs |\n| --- | --- |\n";
  for (const auto& [v, n] : verdicts) md += "| " + v + " | " + std::to_string(n) + " |\n";
  md += "\n" + std::to_string(d.changes.size()) + " changes, " + std::to_string(d.runs.size()) + " measured attempts, " +
        std::to_string(d.retractions.size()) + " retracted.\n";

  // Frontier ladder, one chart per (metric, box).
  md += "\n## Frontier ladder\n";
  std::map<std::pair<std::string, std::string>, std::vector<const Row*>> ladders;
  for (const auto& f : d.frontier) ladders[{AsText(f[0]), AsText(f[1])}].push_back(&f);
  for (const auto& [key, events] : ladders) {
    const std::string file = "ladder-" + key.first + "-" + key.second + ".svg";
    std::vector<LadderPoint> pts;
    md += "\n### " + key.first + " on box `" + key.second + "`\n\n";
    md += "| step | change | run | how | gain | tier | frontier after |\n| --- | --- | --- | --- | --- | --- | --- |\n";
    int step = 0;
    for (const Row* f : events) {
      const Run& r = d.runs.at(AsInt((*f)[3]));
      const Change& c = d.changes.at(r.change);
      const Score* s = nullptr;
      for (size_t i : r.scores)
        if (!IsNull(d.scores[i].front_after) && std::fabs(AsDouble(d.scores[i].front_after) - AsDouble((*f)[2])) < 1e-9) s = &d.scores[i];
      const bool seed = AsText((*f)[4]) == "seed";
      std::string how = AsText((*f)[4]) + (r.retracted ? " (retracted)" : "");
      md += "| " + std::to_string(step) + " | " + std::to_string(c.id) + " " + Cell(c.title) + " | " + std::to_string(r.id) +
            " | " + how + " | " + (seed || !s ? "—" : Pct(s->gain)) + " | " + (seed || !s ? "—" : s->tier) + " | " +
            Num((*f)[2]) + " |\n";
      pts.push_back({std::string("#").append(std::to_string(c.id)), AsDouble((*f)[2]), r.retracted});
      step++;
    }
    md += "\n![Frontier ladder of " + key.first + " on " + key.second + "](" + file + ")\n";
    charts->emplace_back(file, LadderSvg("Frontier ladder: " + key.first + " on box " + key.second, pts));
  }
  if (ladders.empty()) md += "\nNo frontier yet.\n";

  // Per change.
  md += "\n## Changes\n";
  for (const auto& [id, c] : d.changes) {
    if (!Included(c, opt.since)) continue;
    md += "\n### Change " + std::to_string(id) + ": " + c.title + "\n\n";
    md += "- kind: " + c.kind + (IsNull(c.target) ? "" : " of change " + std::to_string(AsInt(c.target))) + "; author: " +
          c.author + "; recorded " + c.created + "\n";
    if (!c.reason.empty()) md += "- reason: " + c.reason + "\n";
    md += "- claim " + PctOpt(c.claim) + ", prediction " + PctOpt(c.predict) + (c.bit_claim ? ", bit identity claimed" : "") + "\n\n";
    md += "| run | purpose | verdict | tier | measured gain | 95% CI | rounds | samples | frontier before | box |\n";
    md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for (int64_t rid : c.runs) {
      const Run& r = d.runs.at(rid);
      const Score* s = LatestScore(d, r);
      md += "| " + std::to_string(rid) + (r.retracted ? " (retracted)" : "") + " | " + r.purpose + " | " + RunState(d, r) +
            " | " + (s ? s->tier : "—") + " | " + (s ? Pct(s->gain) : "—") + " | " +
            (s && !IsNull(s->ci_low) ? Pct(s->ci_low) + " .. " + Pct(s->ci_high) : "—") + " | " +
            (s ? std::to_string(s->rounds) : "—") + " | " + std::to_string(r.samples) + " | " +
            (s ? Num(s->front_before) : "—") + " | `" + r.box + "` |\n";
    }
    for (int64_t rid : c.runs) {
      const Run& r = d.runs.at(rid);
      md += "\nRun " + std::to_string(rid) + " parity: " + ParitySummary(d, c, rid) + ".";
      if (const Score* s = LatestScore(d, r); s && !s->note.empty()) md += " Note: " + s->note + ".";
      if (!r.failure.empty()) md += " Failed: " + r.failure + ".";
      md += "\n";
    }
  }

  // The none catalog.
  md += "\n## The `none` catalog\n\nEvery change that was parked (scored `none`), with each attempt and the frontier it was measured against.\n";
  bool any_none = false;
  for (const auto& [id, c] : d.changes) {
    if (c.kind != "change" || !Included(c, opt.since)) continue;
    bool parked = false;
    for (int64_t rid : c.runs)
      for (size_t i : d.runs.at(rid).scores) parked |= d.scores[i].verdict == "none";
    if (!parked) continue;
    any_none = true;
    md += "\n### Change " + std::to_string(id) + ": " + c.title + "\n\n| attempt | run | purpose | verdict | tier | gain | measured against frontier |\n";
    md += "| --- | --- | --- | --- | --- | --- | --- |\n";
    int attempt = 1;
    for (int64_t rid : c.runs) {
      const Run& r = d.runs.at(rid);
      const Score* s = LatestScore(d, r);
      md += "| " + std::to_string(attempt++) + " | " + std::to_string(rid) + " | " + r.purpose + " | " + RunState(d, r) + " | " +
            (s ? s->tier : "—") + " | " + (s ? Pct(s->gain) : "—") + " | " + (s ? Num(s->front_before) : "—") + " |\n";
    }
  }
  if (!any_none) md += "\nNo change has been parked.\n";

  // Correctness rejections.
  md += "\n## Correctness rejections\n\n";
  std::string rej;
  for (const auto& s : d.scores) {
    if (s.verdict != "rejected-parity") continue;
    const Run& r = d.runs.at(s.run);
    const Change& c = d.changes.at(r.change);
    if (!Included(c, opt.since)) continue;
    const bool confirm = s.rounds > 0;  // a held run whose deep parity failed on confirm
    rej += "| " + std::to_string(c.id) + " " + Cell(c.title) + " | " + std::to_string(r.id) + " | " +
           Cell(ParitySummary(d, c, r.id)) + " | " +
           (confirm ? "measured before the deep check failed; never banked" :
                      "its speed was never measured: " + std::to_string(r.samples) + " samples recorded") + " |\n";
  }
  md += rej.empty() ? "No change was rejected for correctness.\n"
                    : "| change | run | parity | speed |\n| --- | --- | --- | --- |\n" + rej;

  // Reverts and reapplies.
  md += "\n## Reverts and reapplies\n\n";
  std::string rv;
  for (const auto& [id, c] : d.changes) {
    if (c.kind == "change" || !Included(c, opt.since)) continue;
    std::string verdict = "—", evidence = "—";
    for (int64_t rid : c.runs) {
      const Run& r = d.runs.at(rid);
      verdict = RunState(d, r);
      if (const Score* s = LatestScore(d, r)) {
        evidence = IsNull(s->gain) ? "" : "gain " + Pct(s->gain) + " (CI " + Pct(s->ci_low) + " .. " + Pct(s->ci_high) +
                                              ", run " + std::to_string(rid) + (r.retracted ? ", retracted" : "") + ")";
        if (!s->note.empty()) evidence += (evidence.empty() ? "" : "; ") + s->note;
      }
    }
    std::string wrong = "—";
    if (c.kind == "revert") {
      wrong = "no";
      for (const auto& [oid, o] : d.changes)
        if (o.kind == "reapply" && !IsNull(o.target) && AsInt(o.target) == id) wrong = "yes: reapplied by change " + std::to_string(oid) + " (" + o.reason + ")";
    }
    rv += "| " + std::to_string(id) + " | " + c.kind + " | " + (IsNull(c.target) ? "—" : std::to_string(AsInt(c.target))) +
          " | " + Cell(c.reason) + " | " + verdict + " | " + Cell(evidence) + " | " + Cell(wrong) + " |\n";
  }
  md += rv.empty() ? "No reverts.\n"
                   : "| change | kind | of | reason | verdict | evidence | later found wrong |\n| --- | --- | --- | --- | --- | --- | --- |\n" + rv;

  // Retractions.
  md += "\n## Retracted numbers\n";
  if (d.retractions.empty()) md += "\nNothing has been retracted.\n";
  for (const auto& t : d.retractions) {
    const Run& r = d.runs.at(AsInt(t[0]));
    const Change& c = d.changes.at(r.change);
    const Score* s = LatestScore(d, r);
    md += "\n### Note on a retracted number: run " + std::to_string(r.id) + " (change " + std::to_string(c.id) + ", " + c.title + ")\n\n";
    md += "- The number: " + (s ? "gain " + Pct(s->gain) + " of the frontier (CI " + Pct(s->ci_low) + " .. " + Pct(s->ci_high) +
                                      "), base median " + Num(s->base_med) + ", head median " + Num(s->head_med) + ", verdict " + s->verdict
                                : std::string("unscored")) + ".\n";
    md += "- What produced it: " + AsText(t[1]) + ".\n";
    std::string repl = "nothing yet";
    if (!IsNull(t[2])) {
      const Run& nr = d.runs.at(AsInt(t[2]));
      const Score* ns = LatestScore(d, nr);
      repl = "run " + std::to_string(nr.id) + " (change " + std::to_string(nr.change) + ")" + (ns ? ": " + ns->verdict + ", gain " + Pct(ns->gain) : "");
    } else if (!IsNull(t[3])) {
      const Change& rc = d.changes.at(AsInt(t[3]));
      repl = "change " + std::to_string(rc.id) + " (" + rc.kind + ", \"" + rc.title + "\")";
      for (int64_t rid : rc.runs)
        if (const Score* ns = LatestScore(d, d.runs.at(rid))) repl += ": run " + std::to_string(rid) + " " + ns->verdict + ", gain " + Pct(ns->gain);
    }
    md += "- What replaced it: " + repl + ".\n";
    md += "- It no longer counts toward the frontier.\n";
  }
  return md;
}

}  // namespace

Result<WrittenReport> WriteReport(ledger::Ledger& ledger, const ReportOptions& opt) {
  if (opt.out.empty()) return Status::Error("--out is required");
  VERITY_ASSIGN_OR_RETURN(Data d, Load(ledger.db()));
  std::vector<std::pair<std::string, std::string>> charts;
  const std::string md = Render(d, opt, std::filesystem::path(ledger.db().path()).filename().string(), &charts);
  namespace fs = std::filesystem;
  const fs::path out(opt.out);
  const fs::path chart_dir = opt.charts_dir.empty() ? (out.has_parent_path() ? out.parent_path() : fs::path(".")) : fs::path(opt.charts_dir);
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
      for (size_t p = text.find(from); p != std::string::npos; p = text.find(from, p + to.size())) text.replace(p, from.size(), to);
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
