// The HTML dashboard (render/dashboard.h). The index page is a skeleton that
// web/dashboard.js fills from data.js; each change's page is written here,
// whole, so that it reads without scripts except for its rounds chart. Every
// string a submitter, a bench or a parity command wrote reaches the HTML
// through Esc() or inside JSON (data, never markup).
#include "render/dashboard.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "ledger/format.h"
#include "ledger/read_model.h"
#include "render/embedded_assets.h"
#include "render/report.h"

namespace verity::reports {
namespace {

using ledger::ChangeView;
using ledger::LedgerView;
using ledger::RunView;
using ledger::ScoreView;
using nlohmann::json;

std::string Esc(const std::string& s) { return MarkupText(s); }

std::string F(const char* fmt, double v) { return ledger::FormatText(fmt, v); }
std::string Pct(const std::optional<double>& v) {
  return ledger::OrMissing(
      v, [](double x) { return ledger::PctText(x); }, "—");
}
std::string Num(const std::optional<double>& v) {
  return ledger::OrMissing(
      v, [](double x) { return ledger::NumText(x); }, "—");
}
std::string Id(int64_t v) { return std::to_string(v); }
json Opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

// JSON text safe inside a <script> element and a .js file: '<' escaped, so no
// string can close the element; invalid UTF-8 replaced, never a throw.
std::string ScriptJson(const json& j) {
  const std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string o;
  o.reserve(s.size());
  for (char c : s) o += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return o;
}

const char* MarkName(Mark m) {
  switch (m) {
    case Mark::kAccepted: return "accepted";
    case Mark::kParked: return "parked";
    case Mark::kNotBanked: return "not-banked";
    case Mark::kRejectedParity: return "rejected-parity";
  }
  return "parked";
}

// The score a change is known by: its last run's latest.
const ScoreView* LastScore(const ChangeView& c) {
  for (auto r = c.runs.rbegin(); r != c.runs.rend(); ++r)
    if (r->latest()) return r->latest();
  return nullptr;
}

std::string BoundsText(const ScoreView* s) {
  return s && (s->ci_low || s->ci_high) ? Pct(s->ci_low) + " .. " + Pct(s->ci_high) : "—";
}

json ChangeJson(const ChangeView& c) {
  std::set<std::string> workloads;
  for (const auto& r : c.runs) workloads.insert(r.workload);
  const ScoreView* s = LastScore(c);
  return {{"id", c.change.id},
          {"kind", ledger::KindName(c.change.kind)},
          {"title", c.change.title},
          {"author", c.change.author},
          {"state", c.StateName()},
          {"workloads", std::vector<std::string>(workloads.begin(), workloads.end())},
          {"metric", c.change.metric},
          {"gain", s ? Opt(s->gain) : json(nullptr)},
          {"ci_low", s ? Opt(s->ci_low) : json(nullptr)},
          {"ci_high", s ? Opt(s->ci_high) : json(nullptr)},
          {"predict_pct", Opt(c.change.predict_pct)},
          {"surprise", s && s->surprise},
          {"created_at", c.change.created_at}};
}

json LadderJson(const LedgerView& d, const ledger::LadderView& l, double gate_frac) {
  const LadderChart chart = BuildLadderChart(d, l, gate_frac);
  json slots = json::array();
  for (const auto& s : chart.slots) {
    const RunView* r = d.FindRun(s.run);
    const ScoreView* sc = r ? r->latest() : nullptr;
    slots.push_back({{"change", s.change},
                     {"run", s.run},
                     {"frontier", Opt(s.frontier)},
                     {"value", Opt(s.value)},
                     {"mark", MarkName(s.mark)},
                     {"retracted", s.retracted},
                     {"note", s.note},
                     {"gain", sc ? Opt(sc->gain) : json(nullptr)},
                     {"bounds", BoundsText(sc)}});
  }
  return {{"metric", l.metric},
          {"unit", MetricUnit(l.metric)},
          {"box", l.box},
          {"workload", l.workload},
          {"higher", ledger::HigherIsBetter(l.metric)},
          {"gate_frac", gate_frac},
          {"slots", slots}};
}

json SeriesJson(const LedgerView& d, const ledger::DriftSeries& series) {
  const SeriesChart chart = BuildSeriesChart(series, d.drift.options);
  json points = json::array(), breaks = json::array();
  for (const auto& p : chart.points) {
    const RunView* r = d.FindRun(p.run);
    points.push_back({{"value", p.value}, {"run", p.run}, {"head", p.head}, {"change", r ? r->change_id : 0}});
  }
  for (const auto& b : chart.breaks) breaks.push_back({{"index", b.index}, {"before", b.before}, {"after", b.after}});
  return {{"metric", series.metric}, {"unit", MetricUnit(series.metric)},
          {"box", series.box},       {"workload", series.workload},
          {"points", points},        {"breaks", breaks}};
}

std::string DataJs(const LedgerView& d, const std::string& ledger_name) {
  const ledger::PolicyView& current = d.policies.back();
  json changes = json::array(), ladders = json::array(), series = json::array();
  for (const auto& c : d.changes) changes.push_back(ChangeJson(c));
  for (const auto& l : d.ladders) ladders.push_back(LadderJson(d, l, current.policy.gate_frac));
  for (const auto& s : d.drift.series) series.push_back(SeriesJson(d, s));
  const json data = {{"ledger",
                      {{"name", ledger_name},
                       {"tip", d.tip},
                       {"records", d.records},
                       {"policy", current.policy.version},
                       {"gate_frac", current.policy.gate_frac}}},
                     {"changes", changes},
                     {"ladders", ladders},
                     {"series", series}};
  return "// Generated by `verity report --html` from the ledger alone.\nwindow.VERITY_DATA = " + ScriptJson(data) +
         ";\n";
}

std::string Head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + Esc(title) +
         "</title>\n<link rel=\"stylesheet\" href=\"uPlot.min.css\">\n<link rel=\"stylesheet\" "
         "href=\"dashboard.css\">\n"
         "<script src=\"uPlot.iife.min.js\"></script>\n</head>\n<body>\n";
}

std::string ChangeLink(int64_t id) { return "<a href=\"change-" + Id(id) + ".html\">#" + Id(id) + "</a>"; }

std::string RevertsTable(const LedgerView& d) {
  std::string h =
      "<table id=\"reverts\">\n<thead><tr><th>change</th><th>kind</th><th>title</th><th>target</th>"
      "<th>reason</th><th>state</th></tr></thead>\n<tbody>\n";
  int rows = 0;
  for (const auto& c : d.changes) {
    if (c.change.kind == ledger::Kind::kChange) continue;
    rows++;
    h += "<tr><td>" + ChangeLink(c.change.id) + "</td><td>" + ledger::KindName(c.change.kind) + "</td><td>" +
         Esc(c.change.title) + "</td><td>" + (c.change.target_change ? ChangeLink(*c.change.target_change) : "—") +
         "</td><td>" + Esc(c.change.reason.value_or("")) + "</td><td>" + Esc(c.StateName()) + "</td></tr>\n";
  }
  h += "</tbody>\n</table>\n<p class=\"meta\">" + std::to_string(rows) + " revert(s) and reapplies recorded.</p>\n";
  return h;
}

std::string RetractionsTable(const LedgerView& d) {
  std::string h =
      "<table id=\"retractions\">\n<thead><tr><th>retraction</th><th>run</th><th>change</th><th>reason</th>"
      "<th>at</th><th>replaced by run</th></tr></thead>\n<tbody>\n";
  for (const auto& x : d.retractions) {
    const RunView* r = d.FindRun(x.run_id);
    h += "<tr><td>" + Id(x.id) + "</td><td>" + Id(x.run_id) + "</td><td>" + (r ? ChangeLink(r->change_id) : "—") +
         "</td><td>" + Esc(x.reason) + "</td><td>" + Esc(x.retracted_at) + "</td><td>" +
         (x.replaced_by_run ? Id(*x.replaced_by_run) : "—") + "</td></tr>\n";
  }
  h += "</tbody>\n</table>\n<p class=\"meta\">" + std::to_string(d.retractions.size()) +
       " retraction(s) recorded; a retracted number stays in the ledger.</p>\n";
  return h;
}

std::string IndexHtml(const LedgerView& d, const std::string& ledger_name) {
  const ledger::PolicyView& current = d.policies.back();
  std::string h = Head("verity ledger " + ledger_name);
  h += "<h1>verity ledger <code>" + Esc(ledger_name) +
       "</code></h1>\n<p class=\"meta\">Generated from ledger tip <code>" + Esc(d.tip) + "</code> (" +
       std::to_string(d.records) + " sealed records), policy v" + std::to_string(current.policy.version) + ", gate " +
       F("%.1f%%", 100.0 * current.policy.gate_frac) + " of the frontier. " + std::to_string(d.changes.size()) +
       " changes, " + std::to_string(d.ladders.size()) +
       " ladders.</p>\n<div id=\"filters\"></div>\n<p id=\"shown\" class=\"meta\"></p>\n"
       "<h2>Frontier ladders</h2>\n<p class=\"meta\">Per metric, box and workload: the frontier as a step line, every "
       "measured attempt marked by its verdict. Hover a point for its change and bounds; click it to open the "
       "change.</p>\n<div id=\"charts\"></div>\n<h2>Changes</h2>\n<table id=\"changes\">\n<thead><tr><th>change</th>"
       "<th>title</th><th>kind</th><th>author</th><th>workloads</th><th>state</th><th>gain</th><th>bounds</th>"
       "<th>predicted</th><th>surprise</th></tr></thead>\n<tbody></tbody>\n</table>\n"
       "<h2>Measured on main (drift)</h2>\n<div id=\"drift\"></div>\n<h2>Reverts</h2>\n" +
       RevertsTable(d) + "<h2>Retractions</h2>\n" + RetractionsTable(d) +
       "<script src=\"data.js\"></script>\n<script src=\"dashboard.js\"></script>\n</body>\n</html>\n";
  return h;
}

std::string Row(const std::string& k, const std::string& v) {
  return "<tr><th>" + k + "</th><td>" + v + "</td></tr>\n";
}
std::string CodeOr(const std::optional<std::string>& s) { return s ? "<code>" + Esc(*s) + "</code>" : "—"; }

std::string ChangeMeta(const LedgerView& d, const ChangeView& c) {
  const auto& ch = c.change;
  std::string h = "<table class=\"meta-table\">\n";
  h += Row("kind", ledger::KindName(ch.kind)) + Row("author", Esc(ch.author)) + Row("recorded", Esc(ch.created_at)) +
       Row("state", Esc(c.StateName())) + Row("metric", "<code>" + Esc(ch.metric) + "</code>") +
       Row("prediction", ch.predict_pct ? F("%+.2f%%", *ch.predict_pct) : "—") +
       Row("claim", ch.claim_pct ? F("%+.2f%%", *ch.claim_pct) : "—") +
       Row("bit identity claimed", ch.claim_bit_identical ? "yes" : "no") + Row("base ref", CodeOr(ch.base_ref)) +
       Row("head ref", CodeOr(ch.head_ref)) + Row("base sha", CodeOr(ch.base_sha)) +
       Row("head sha", CodeOr(ch.head_sha)) + Row("base command", "<code>" + Esc(ch.base_cmd) + "</code>") +
       Row("head command", "<code>" + Esc(ch.head_cmd) + "</code>") + Row("parity command", CodeOr(ch.parity_cmd)) +
       Row("base parity command", CodeOr(ch.base_parity_cmd)) + Row("reason", ch.reason ? Esc(*ch.reason) : "—");
  if (ch.target_change) {
    const ChangeView* t = d.FindChange(*ch.target_change);
    h += Row(ch.kind == ledger::Kind::kRevert ? "reverts" : "reapplies",
             ChangeLink(*ch.target_change) + (t ? " " + Esc(t->change.title) : ""));
  }
  std::string related;
  for (const auto& r : c.related)
    related += "<li>" + ChangeLink(r.id) + " (" + ledger::KindName(r.kind) + ") " + Esc(r.title) +
               (r.reason ? " — " + Esc(*r.reason) : "") + "</li>";
  h += Row("reverted or reapplied by", related.empty() ? "—" : "<ul>" + related + "</ul>");
  std::string declared;
  for (const auto& m : c.accept_regressions)
    declared += (declared.empty() ? "" : ", ") + ("<code>" + Esc(m) + "</code>");
  h += Row("declared regressions", declared.empty() ? "—" : declared) + "</table>\n";
  return h;
}

std::string ScoresTable(const RunView& r) {
  std::string h =
      "<table class=\"scores\">\n<thead><tr><th>score</th><th>policy</th><th>verdict</th><th>tier</th>"
      "<th>gain</th><th>bounds</th><th>gate</th><th>frontier</th><th>base / head median</th>"
      "<th>rounds</th><th>surprise</th><th>note</th><th>scored</th></tr></thead>\n<tbody>\n";
  for (const auto& s : r.scores)
    h += "<tr><td>" + Id(s.id) + "</td><td>v" + std::to_string(s.policy_version) + "</td><td>" +
         ledger::VerdictName(s.verdict) + "</td><td>" + ledger::TierName(s.tier) + "</td><td>" + Pct(s.gain) +
         "</td><td>" + BoundsText(&s) + "</td><td>" + Num(s.gate) + "</td><td>" + Num(s.frontier_before) + " → " +
         Num(s.frontier_after) + "</td><td>" + Num(s.base_median) + " / " + Num(s.head_median) + "</td><td>" +
         std::to_string(s.rounds) + "</td><td>" + (s.surprise ? "yes" : "no") + "</td><td>" + Esc(s.note) +
         "</td><td>" + Esc(s.scored_at) + "</td></tr>\n";
  h += "</tbody>\n</table>\n";
  return h;
}

std::string GuardsTable(const RunView& r) {
  const ScoreView* s = r.latest();
  if (!s || s->guards.empty()) return "<p class=\"meta\">No guard metrics on this run's verdict.</p>\n";
  std::string h =
      "<table class=\"guards\">\n<thead><tr><th>guard</th><th>change</th><th>bounds</th><th>floor</th>"
      "<th>regressed</th><th>declared</th></tr></thead>\n<tbody>\n";
  for (const auto& g : s->guards)
    h += "<tr><td><code>" + Esc(g.metric) + "</code></td><td>" + F("%+.2f%%", 100.0 * g.gain()) + "</td><td>" +
         (g.ratio_low ? F("%+.2f%%", 100.0 * (*g.ratio_low - 1.0)) : "—") + " .. " +
         (g.ratio_high ? F("%+.2f%%", 100.0 * (*g.ratio_high - 1.0)) : "—") + "</td><td>" + Esc(FloorText(g)) +
         "</td><td>" + (g.regressed ? "<span class=\"fail\">yes</span>" : "no") + "</td><td>" +
         (g.declared ? "yes" : "no") + "</td></tr>\n";
  return h + "</tbody>\n</table>\n";
}

std::string ParityTable(const RunView& r) {
  if (r.parity.empty()) return "<p class=\"meta\">No parity evidence recorded for this run.</p>\n";
  std::string h =
      "<table class=\"parity\">\n<thead><tr><th>side</th><th>mode</th><th>result</th><th>exit</th>"
      "<th>worst top-1</th><th>worst mean KL</th><th>depths</th><th>build</th><th>artifact sha256</th>"
      "<th>message</th></tr></thead>\n<tbody>\n";
  for (const auto& p : r.parity)
    h += "<tr><td>" + std::string(ledger::SideName(p.side)) + "</td><td>" + ledger::ParityModeName(p.mode) +
         "</td><td>" + (p.passed ? "<span class=\"pass\">pass</span>" : "<span class=\"fail\">fail</span>") +
         "</td><td>" + std::to_string(p.exit_code) + "</td><td>" + Num(p.worst_top1) + "</td><td>" +
         Num(p.worst_mean_kl) + "</td><td>" + std::to_string(p.depths) + "</td><td><code>" + Esc(p.build_id) +
         "</code></td><td><code>" + Esc(p.artifact_sha256) + "</code></td><td>" + Esc(p.message) + "</td></tr>\n";
  return h + "</tbody>\n</table>\n<p>" + Esc(ledger::BitIdentityText(r)) + "</p>\n";
}

// Rounds as a table (and, through change.js, a chart): every sample kept, the warm-up marked.
std::string RoundsTable(const std::vector<ledger::SampleView>& samples) {
  std::map<int, std::pair<std::string, std::string>> rounds;
  for (const auto& s : samples) {
    std::string& cell = s.side == ledger::Side::kBase ? rounds[s.round].first : rounds[s.round].second;
    cell += (cell.empty() ? "" : ", ") + F("%.6g", s.value);
  }
  std::string h =
      "<table class=\"rounds\">\n<thead><tr><th>round</th><th>base</th><th>head</th></tr></thead>\n<tbody>\n";
  for (const auto& [k, v] : rounds)
    h += "<tr><td>" + std::to_string(k) + (k == 0 ? " (warm-up)" : "") + "</td><td>" + v.first + "</td><td>" +
         v.second + "</td></tr>\n";
  return h + "</tbody>\n</table>\n";
}

json RoundsJson(const ChangeView& c, const std::map<int64_t, std::vector<ledger::SampleView>>& samples) {
  json runs = json::array();
  for (const auto& r : c.runs) {
    std::map<int, std::pair<std::vector<double>, std::vector<double>>> by_round;
    if (auto it = samples.find(r.id); it != samples.end())
      for (const auto& s : it->second)
        (s.side == ledger::Side::kBase ? by_round[s.round].first : by_round[s.round].second).push_back(s.value);
    json rounds = json::array();
    for (const auto& [k, v] : by_round) rounds.push_back({{"round", k}, {"base", v.first}, {"head", v.second}});
    runs.push_back({{"run", r.id}, {"metric", c.change.metric}, {"rounds", rounds}});
  }
  return runs;
}

std::string RunSection(const RunView& r, const std::vector<ledger::SampleView>* samples) {
  std::string h =
      "<h2 id=\"run-" + Id(r.id) + "\">Run " + Id(r.id) + " (" + ledger::PurposeName(r.purpose) + ")</h2>\n";
  h += "<table class=\"meta-table\">\n" + Row("box", "<code>" + Esc(r.box) + "</code>") +
       Row("workload", r.workload.empty() ? "(unnamed)" : Esc(r.workload)) + Row("status", Esc(r.StateName())) +
       Row("policy", "v" + std::to_string(r.policy_version) + ", rounds " + std::to_string(r.min_rounds) + ".." +
                         std::to_string(r.max_rounds)) +
       Row("started", Esc(r.started_at)) +
       Row("samples", std::to_string(r.samples) + " (" + std::to_string(r.warmup_samples) + " warm-up)") +
       Row("failure", r.failure ? Esc(*r.failure) : "—");
  for (const auto& a : r.artifacts)
    h += Row(std::string(ledger::SideName(a.side)) + " artifact",
             "<code>" + Esc(a.build_id) + "</code> <code>" + Esc(a.artifact_sha256) + "</code>");
  if (r.retraction)
    h += Row("retracted",
             Esc(r.retraction->reason) + " (" + Esc(r.retraction->retracted_at) + ")" +
                 (r.retraction->replaced_by_run ? ", replaced by run " + Id(*r.retraction->replaced_by_run) : ""));
  h += "</table>\n<h3>Scores</h3>\n" + ScoresTable(r) + "<h3>Guards</h3>\n" + GuardsTable(r) +
       "<h3>Parity evidence</h3>\n" + ParityTable(r) + "<h3>Samples</h3>\n<div class=\"plot\" id=\"rounds-" + Id(r.id) +
       "\"></div>\n";
  h += samples ? RoundsTable(*samples) : "<p class=\"meta\">No samples recorded.</p>\n";
  return h;
}

std::string ChangeHtml(const LedgerView& d, const ChangeView& c,
                       const std::map<int64_t, std::vector<ledger::SampleView>>& samples) {
  std::string h = Head("#" + Id(c.change.id) + " " + c.change.title);
  h += "<p><a href=\"index.html\">← the ledger</a></p>\n<h1>#" + Id(c.change.id) + " " + Esc(c.change.title) +
       "</h1>\n" + ChangeMeta(d, c);
  for (const auto& r : c.runs) {
    auto it = samples.find(r.id);
    h += RunSection(r, it == samples.end() ? nullptr : &it->second);
  }
  if (c.runs.empty()) h += "<p class=\"meta\">Never measured.</p>\n";
  h += "<script>window.VERITY_RUNS = " + ScriptJson(RoundsJson(c, samples)) +
       ";</script>\n"
       "<script src=\"change.js\"></script>\n</body>\n</html>\n";
  return h;
}

Status WriteFile(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) return Status::Error(p.string() + ": cannot write");
  return Status();
}

}  // namespace

Result<WrittenDashboard> WriteDashboard(ledger::Ledger& ledger, const DashboardOptions& opt) {
  namespace fs = std::filesystem;
  if (opt.dir.empty()) return Status::Error("--html needs a directory");
  const assets::Asset* uplot = assets::Find("uPlot.iife.min.js");
  if (!uplot)
    return Status::Error(
        "this verity was built without uPlot (tests/npm/node_modules/uplot was missing when it was "
        "configured): run scripts/setup.sh, then reconfigure and rebuild");
  VERITY_ASSIGN_OR_RETURN(LedgerView d, ledger::LoadLedgerView(ledger));
  VERITY_ASSIGN_OR_RETURN(auto samples, ledger::LoadSamplesByRun(ledger.db()));
  const fs::path dir(opt.dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) return Status::Error(opt.dir + ": cannot create the dashboard directory");
  const std::string name = fs::path(ledger.db().path()).filename().string();
  WrittenDashboard w;
  auto write = [&](const std::string& file, const std::string& bytes) -> Status {
    VERITY_RETURN_IF_ERROR(WriteFile(dir / file, bytes));
    w.files++;
    return Status();
  };
  for (const auto& a : assets::All()) VERITY_RETURN_IF_ERROR(write(a.name, std::string(a.data, a.size)));
  VERITY_RETURN_IF_ERROR(write("data.js", DataJs(d, name)));
  VERITY_RETURN_IF_ERROR(write("index.html", IndexHtml(d, name)));
  for (const auto& c : d.changes) {
    VERITY_RETURN_IF_ERROR(write("change-" + Id(c.change.id) + ".html", ChangeHtml(d, c, samples)));
    w.change_pages++;
  }
  w.index_path = (dir / "index.html").string();
  w.ladders = static_cast<int>(d.ladders.size());
  w.series = static_cast<int>(d.drift.series.size());
  return w;
}

}  // namespace verity::reports
