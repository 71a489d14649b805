// A model-based history checker (issue 41): seeded, randomized histories run
// against the real `verity` on a scratch ledger, over fake benches whose true
// speeds the checker knows. A history mixes new changes (some A/A: a commit
// that changes nothing), resubmissions with another prediction, rebuilds of
// the same commits into new artifacts, changes behind a run-time flag (one
// artifact on both sides), starts aborted in a timed round and started again,
// confirms of held changes, retractions, reverts and reapplies, remeasures,
// submissions under another box label (one machine), racing submitters (two
// at once), and hostile strings (international and invisible titles and
// workloads). After every step it checks, from a model of the policy it keeps
// itself:
//   1. budget: a run's attempt is the number of earlier runs of the same
//      change (the same two commits, or one artifact run by the same two
//      commands; any box label) that took a timed round;
//   2. counting: no change's ratio is applied twice, on any frontier of the
//      machine (every label), and no frontier stands above the fastest head
//      any run measured by more than the gate (+ noise) -- continuity;
//   3. keys: no frontier's workload holds a control or format character;
//   4. determinism: the frontier, the markdown report and the HTML dashboard
//      are the same bytes read twice and read from a `ledger copy`, which
//      verifies too; the report is valid UTF-8;
// and at the end of each history: 5. a tampered copy (a lying index, a
// rewritten cell) fails `verify`, and every reader refuses it; 6. over all
// histories, A/A changes are accepted no more often than the stated error
// rate (5% a change) allows.
// The suite runs fixed seeds (VERITY_HISTORY_SEEDS, default "1-3", and
// VERITY_HISTORY_STEPS, default 8, to change them); the long run is
//   VERITY_HISTORY_SEEDS=100-160 VERITY_HISTORY_STEPS=12 build/tests/ledger_history_check_test
// and VERITY_CHECK_BIN=PATH runs it against another verity (an older build);
// VERITY_HISTORY_KEEP_GOING=1 goes on past a history's first violation (each
// kind is reported once a history, and the summary counts kinds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/ledger_test_util.h"

namespace verity::test {
namespace {

constexpr double kNoise = 0.003;
constexpr double kGate = 0.02;
constexpr double kStatedRate = 0.05;  // docs/statistics.md: alpha a change

std::string Sha(int n) {
  char b[65];
  std::snprintf(b, sizeof b, "%064x", n);
  return b;
}

// Titles a user might write, and some an attacker would.
const char* const kTitles[] = {"José's fix: naïve → café",
                               "修复注意力的步长",
                               "emoji 🚀 speed-up",
                               "RTL שלום עולם مرحبا",
                               "markup *bold* `code` | pipe <b>x</b> [l](u) # h",
                               "control \x1b"
                               "[31mred\x1b"
                               "[0m \x07"
                               "bell",
                               "zero\u200bwidth \u2060joiner \u202eoverride\u202c \ufeffbom"};
// Workloads a bench may state: international ones are keys like any other;
// ones holding control or format characters must be refused by name.
const char* const kWorkloads[] = {"stories260K.bin café 1t",
                                  "stories260K.bin 1t\u2060",
                                  "stories260K.bin\u200b 1t",
                                  "\ufeffstories260K.bin 1t",
                                  "stories260K.bin \x1b"
                                  "[2J 1t",
                                  "stories260K.bin \u202e1t"};

// Decodes UTF-8 strictly; false on any invalid byte sequence.
bool Utf8(const std::string& s, std::vector<char32_t>* out = nullptr) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    char32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (int k = 1; k < n; k++) {
      const unsigned char d = s[i + k];
      if ((d >> 6) != 2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    if (out) out->push_back(cp);
    i += n;
  }
  return true;
}

// Unicode general categories Cc and Cf (and the few other code points that
// render as nothing): what a key may never hold.
bool Invisible(char32_t c) {
  return c < 0x20 || (c >= 0x7f && c <= 0x9f) || c == 0xad || (c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd ||
         c == 0x70f || c == 0x180e || (c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) ||
         (c >= 0x2060 && c <= 0x206f) || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb) || c == 0x115f || c == 0x1160 ||
         c == 0x3164 || c == 0xffa0 || (c >= 0xe0000 && c <= 0xe007f);
}

// One side's bench as the model sees it: the command (so a resubmission
// repeats it byte for byte), what it measures, and what it is.
struct Side {
  std::string cmd;
  double speed = 0;
  int commit = -1;  // the source it was built from (-1: none)
  std::string sha;  // its artifact
  std::string tag;  // its command's name, for the log
};

// A submission the model remembers, to resubmit.
struct Sub {
  Side base, head;
  double predict = 0;
  std::string key;    // the change, as the model names it
  std::string label;  // VERITY_BOX_LABEL ("" for none)
  int change_id = 0;
  bool held = false, aa = false;
};

// An accepted step the model can undo: its run, and where the frontier stood before it.
struct AcceptedStep {
  int64_t run = 0;
  int before_commit = 0;
  Side before;
};

// The verity under test: this build's, or VERITY_CHECK_BIN's (an older build,
// to show what the checker finds there).
std::string Bin() {
  const char* e = std::getenv("VERITY_CHECK_BIN");
  return e && *e ? e : VerityBin();
}

// A violation's kind: its text before any detail (after ": " or in parentheses), with quoted
// names and numbers elided, so "attempt 1 ... 2 earlier runs" and "attempt 2
// ... 3" are one kind (an apostrophe inside a word is not a quote).
std::string KindOf(const std::string& what) {
  const std::string head = what.substr(0, std::min(what.find(" ("), what.find(": ")));
  std::string out;
  bool quoted = false;
  for (size_t i = 0; i < head.size(); i++) {
    const char ch = head[i];
    const bool word_start = i == 0 || head[i - 1] == ' ' || head[i - 1] == '`';
    if (ch == '\'' && (quoted || word_start)) {
      quoted = !quoted;
      if (quoted) out += "'...'";
    } else if (quoted) {
      continue;
    } else if (word_start && std::isdigit(static_cast<unsigned char>(ch))) {
      out += 'N';
      while (i + 1 < head.size() && head[i + 1] != ' ') i++;
    } else {
      out += ch;
    }
  }
  return out;
}

bool KeepGoing() {
  const char* e = std::getenv("VERITY_HISTORY_KEEP_GOING");
  return e && *e && std::string(e) != "0";
}

std::string Json1(const nlohmann::json& j, const char* k) {
  return j.contains(k) && !j[k].is_null() ? j[k].dump() : std::string("-");
}

struct Checker {
  std::mt19937 rng;
  Case c;
  int steps = 0, violations = 0, copies = 0, next_sha = 1, next_seed = 1000, next_tag = 0;
  std::vector<double> commit_speed;        // true speed of each commit
  std::map<std::string, int> spent;        // model's change key -> runs that took a timed round
  std::map<int64_t, std::string> run_key;  // ledger run -> model's change key
  std::map<int, Sub> by_change;            // ledger change id -> its latest submission
  std::set<std::string> aa_keys, aa_accepted;
  std::vector<AcceptedStep> accepted;  // accepted steps, newest last (for retract)
  std::vector<int> reverts;            // accepted reverts' change ids (for reapply)
  double fastest_head = 0;             // the fastest head any run measured
  int standing = 0;                    // the commit the model's frontier stands at
  Side standing_side;                  // a build of it (reused as the next base)
  std::vector<Sub> subs;
  std::ostringstream log;

  explicit Checker(unsigned seed, const std::string& tag) : rng(seed), c(Fresh(tag)) {
    commit_speed.push_back(1000);
    standing_side = Build(0, "");
  }

  double U(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng); }
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); }
  std::string Verity(const std::string& args) const { return Bin() + " " + args + " --ledger " + c.db; }

  // A fresh build of `commit` (a new artifact: builds are not reproducible),
  // benched at its true speed; `extra` goes on its command line.
  Side Build(int commit, const std::string& extra) {
    Side s;
    s.commit = commit;
    s.sha = Sha(next_sha++);
    s.speed = commit_speed[commit];
    s.tag = "s" + std::to_string(next_tag++);
    s.cmd = Bench(c.dir, s.tag, s.speed, kNoise, next_seed++,
                  "--sha " + s.sha + " --build c" + std::to_string(commit) + " " + extra);
    return s;
  }
  // A new commit at `speed`, built.
  Side Commit(double speed) {
    commit_speed.push_back(speed);
    return Build(static_cast<int>(commit_speed.size()) - 1, "");
  }
  // The same artifact as `of`, run another way (a run-time flag) at `speed`.
  Side Flagged(const Side& of, double speed) {
    Side s = of;
    s.speed = speed;
    s.tag = "s" + std::to_string(next_tag++);
    s.cmd =
        Bench(c.dir, s.tag, speed, kNoise, next_seed++, "--sha " + of.sha + " --build c" + std::to_string(of.commit));
    return s;
  }
  static std::string KeyOf(const Side& b, const Side& h) {
    if (b.sha == h.sha) return "artifact " + b.sha.substr(56) + " run by " + b.tag + " -> " + h.tag;
    if (b.commit != h.commit) return "commits " + std::to_string(b.commit) + " -> " + std::to_string(h.commit);
    return "artifacts " + b.sha.substr(56) + " -> " + h.sha.substr(56);
  }
  std::string Title(const std::string& what) {
    return Pick(3) == 0 ? what + " " + kTitles[Pick(std::size(kTitles))] : what;
  }

  // Each kind of violation is reported once a history (with VERITY_HISTORY_KEEP_GOING
  // the history goes on past it, to find the next kind).
  std::map<std::string, int> kinds;
  void Violation(const std::string& what) {
    violations++;
    if (kinds[KindOf(what)]++ == 0)
      ADD_FAILURE() << "invariant violated at step " << steps << ": " << what << "\nhistory:\n" << log.str();
  }

  std::string SubmitCmd(const Sub& s, const std::string& title, const std::string& head_cmd) const {
    char p[32];
    std::snprintf(p, sizeof p, "%g", s.predict);
    return (s.label.empty() ? "" : "VERITY_BOX_LABEL=" + s.label + " ") + Verity("submit --json") + " --title " +
           Quote(title) + " --predict " + p + " --base-cmd " + Quote(s.base.cmd) + " --head-cmd " + Quote(head_cmd) +
           " --parity-cmd " + Quote(Parity("--artifact " + s.head.sha));
  }

  // Takes in one outcome of `s` (a submit, revert, reapply or remeasure):
  // checks the budget invariant (`exact`: the attempt is the model's count;
  // else at least it); returns the verdict.
  std::string Outcome(Sub& s, const std::string& title, const nlohmann::json& j, bool aborts, bool exact = true) {
    const std::string verdict = j.is_object() ? j.value("verdict", std::string("(none)")) : "(none)";
    log << "  " << steps << ". " << title << " [" << s.key << (s.label.empty() ? "" : " on " + s.label) << "] predict "
        << s.predict << " -> " << verdict;
    if (!j.is_object() || !j.contains("run") || !j["run"].is_number()) {  // refused before it measured
      log << "\n";
      return verdict;
    }
    const int attempt = j.value("attempt", -1);
    log << " attempt " << attempt << " run " << j["run"] << " frontier " << Json1(j, "frontier_after") << "\n";
    if (!aborts && (exact ? attempt != spent[s.key] : attempt < spent[s.key]))
      Violation("run of change '" + s.key + "' is attempt " + std::to_string(attempt) + ", the model counts " +
                std::to_string(spent[s.key]) + " earlier runs of it that took a timed round");
    run_key[j["run"]] = s.key;
    s.change_id = j.value("change", 0);
    by_change[s.change_id] = s;
    if (verdict != "failed" || aborts) spent[s.key] = std::max(spent[s.key], attempt) + 1;  // it took timed rounds
    if (verdict != "failed") fastest_head = std::max(fastest_head, s.head.speed);
    s.held = verdict == "held-surprise";
    if (verdict == "accepted") Accepted(s, j["run"]);
    return verdict;
  }

  void Accepted(const Sub& s, int64_t run) {
    if (s.aa) aa_accepted.insert(s.key);
    if (!s.label.empty()) return;  // another label's frontier: the model's main stays where it is
    accepted.push_back({run, standing, standing_side});
    standing = s.head.commit;
    standing_side = s.head;
  }

  std::string Run(Sub& s, const std::string& title, const std::string& head_extra = "", bool aborts = false) {
    steps++;
    auto r = Shell(SubmitCmd(s, Title(title), head_extra.empty() ? s.head.cmd : s.head.cmd + " " + head_extra));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.out);
    } catch (...) {
    }
    return Outcome(s, title, j, aborts);
  }

  // Two new changes from where the frontier stands, submitted at once.
  void Race() {
    steps++;
    Sub a, b;
    a.base = b.base = standing_side;
    const double ga = U(1.04, 1.15), gb = U(1.04, 1.15);
    a.head = Commit(commit_speed[standing] * ga);
    b.head = Commit(commit_speed[standing] * gb);
    a.predict = (ga - 1) * 100;
    b.predict = (gb - 1) * 100;
    a.key = KeyOf(a.base, a.head);
    b.key = KeyOf(b.base, b.head);
    const std::string out = c.dir + "/race" + std::to_string(steps);
    Shell("( " + SubmitCmd(a, "race a", a.head.cmd) + " > " + out + ".a ) & ( " + SubmitCmd(b, "race b", b.head.cmd) +
          " > " + out + ".b ) & wait");
    for (auto& [s, f] : std::vector<std::pair<Sub*, std::string>>{{&a, out + ".a"}, {&b, out + ".b"}}) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(ReadFile(f));
      } catch (...) {
      }
      Outcome(*s, "raced", j, false);
      subs.push_back(*s);
    }
  }

  // Every frontier of the machine (all labels): no change's ratio applied
  // twice, none above the fastest head measured by more than the gate, no
  // workload holding an invisible character.
  void CheckFrontiers(const nlohmann::json& f) {
    std::map<std::string, int64_t> counted;
    for (const auto& fr : f["frontier"]) {
      const double v = fr["value"];
      if (v > fastest_head * (1 + kGate + 10 * kNoise))
        Violation("the frontier stands at " + std::to_string(v) + ", above the fastest head measured (" +
                  std::to_string(fastest_head) + ") by more than the gate: a change counted twice");
      std::vector<char32_t> cps;
      const std::string w = fr.value("workload", std::string());
      if (!Utf8(w, &cps)) Violation("a frontier's workload is not valid UTF-8: " + w);
      for (char32_t cp : cps)
        if (Invisible(cp)) {
          char u[16];
          std::snprintf(u, sizeof u, "U+%04X", static_cast<unsigned>(cp));
          Violation("a frontier's workload holds " + std::string(u) + ": " + w);
        }
      for (const auto& st : fr["steps"]) {
        if (!st.value("counted", false) || st["ratio"].is_null()) continue;
        const int64_t run = st["run"];
        auto k = run_key.find(run);
        if (k == run_key.end()) continue;
        auto [it, fresh] = counted.emplace(w + ": " + k->second, run);
        if (!fresh)
          Violation("change '" + k->second + "' counted twice on workload '" + w + "' (runs " +
                    std::to_string(it->second) + " and " + std::to_string(run) + ")");
      }
    }
  }

  // The bytes every reader writes for `db`, files in `dir` (report and dashboard).
  std::string ReaderBytes(const std::string& db, const std::string& dir) {
    Shell("rm -rf " + dir + " && mkdir -p " + dir);
    std::string all = Shell(Bin() + " frontier --json --ledger " + db).out;
    auto r = Shell(Bin() + " report --ledger " + db + " --out " + dir + "/r.md --html " + dir + "/html");
    if (r.exit_code != 0) Violation("report failed on " + db + ": " + r.err);
    auto files = Shell("cd " + dir + " && find . -type f | sort");
    std::istringstream names(files.out);
    for (std::string f; std::getline(names, f);) all += "\n== " + f + "\n" + ReadFile(dir + "/" + f);
    const std::string md = ReadFile(dir + "/r.md");
    if (!Utf8(md)) Violation("the markdown report is not valid UTF-8");
    for (char ch : md)
      if ((static_cast<unsigned char>(ch) < 0x20 && ch != '\n') || ch == 0x7f) {
        Violation("the markdown report holds a raw control byte " + std::to_string(static_cast<int>(ch)));
        break;
      }
    return all;
  }

  void CheckLedger() {
    CheckFrontiers(JsonOf(Verity("frontier --json")));
    // Determinism: read twice, and read from a copy (same file name: the
    // reports name their ledger), every reader writes the same bytes.
    const std::string n = std::to_string(copies++), copy = c.dir + "/copy" + n + "/ledger.db";
    auto cp =
        Shell("mkdir -p " + c.dir + "/copy" + n + " && " + Bin() + " ledger copy --from " + c.db + " --to " + copy);
    if (cp.exit_code != 0) return Violation("ledger copy failed: " + cp.err);
    const std::string a = ReaderBytes(c.db, c.dir + "/read" + n + "a"),
                      a2 = ReaderBytes(c.db, c.dir + "/read" + n + "b"),
                      b = ReaderBytes(copy, c.dir + "/read" + n + "c");
    if (a != a2) Violation("two reads of one ledger differ");
    if (a != b) Violation("the copy's frontier, report or dashboard differs from the ledger's");
    for (const auto& l : {c.db, copy})
      if (Shell(Bin() + " ledger verify --ledger " + l).exit_code != 0) Violation(l + " does not verify");
  }

  // A tampered copy: verify fails, and so does every reader.
  void CheckTampered() {
    if (OnPostgres()) return;  // SQLite's writable_schema and trigger-free updates
    const std::string bad = c.dir + "/tampered.db";
    Shell("cp " + c.db + " " + bad);
    const bool lie = Pick(2) == 0;
    const std::string sql = lie ? "PRAGMA writable_schema=ON; UPDATE sqlite_master SET sql = 'CREATE INDEX "
                                  "retractions_by_run ON retractions(run_id) WHERE run_id<0' WHERE name = "
                                  "'retractions_by_run'"
                                : "DROP TRIGGER scores_no_update; UPDATE scores SET verdict = 'accepted'";
    auto t = LedgerSql(bad, sql);
    if (t.exit_code != 0) return Violation("could not tamper (" + sql + "): " + t.err);
    const std::string what = lie ? "a lying index" : "a rewritten verdict";
    if (Shell(Bin() + " ledger verify --ledger " + bad).exit_code == 0) Violation("verify passes " + what);
    for (const std::string& reader :
         std::vector<std::string>{"frontier", "show 1", "history reverts", "drift", "report --out " + c.dir + "/t.md",
                                  "report --html " + c.dir + "/t-html"}) {
      auto r = Shell(Bin() + " " + reader + " --ledger " + bad);
      if (r.exit_code == 0)
        Violation("`verity " + reader + "` succeeds on a ledger with " + what + " that verify fails");
    }
  }

  Sub& AnySub() { return subs[Pick(static_cast<int>(subs.size()))]; }

  // A new change from where the frontier stands: a real gain, none (A/A), or
  // one behind a run-time flag (the same artifact on both sides).
  void NewChange(int kind) {
    Sub s;
    s.base = standing_side;
    const double gain = kind == 1 ? 1.0 : U(1.04, 1.15);
    if (kind == 2) {
      s.head = Flagged(s.base, s.base.speed * gain);
    } else {
      s.head = Commit(commit_speed[standing] * gain);
    }
    s.aa = kind == 1;
    s.predict = s.aa ? U(1, 10) : Pick(4) == 0 ? 1.0 : (gain - 1) * 100;  // sometimes a surprise
    s.key = KeyOf(s.base, s.head);
    if (s.aa) aa_keys.insert(s.key);
    Run(s, kind == 2 ? "flag" : s.aa ? "A/A" : "change");
    subs.push_back(s);
    if (kind == 2 && standing_side.sha == s.head.sha && standing_side.cmd == s.head.cmd) {
      // Main takes the flag on by default: a new commit at the flagged speed.
      standing_side = Commit(s.head.speed);
      standing = standing_side.commit;
    }
  }

  // A start aborted in round 2-5 (its attempt spent), then started again.
  void AbortAndRestart() {
    Sub s = AnySub();
    if (s.base.sha == s.head.sha) return;  // its head's command is what it is: not re-run another way
    // The aborted head is the same build run by a command of its own (its
    // own run counter: --fail-after counts that command's runs).
    Sub aborted = s;
    aborted.head.tag = "s" + std::to_string(next_tag++);
    const int round = 2 + Pick(4);
    aborted.head.cmd = Bench(c.dir, aborted.head.tag, s.head.speed, kNoise, next_seed++,
                             "--sha " + s.head.sha + " --build c" + std::to_string(s.head.commit) + " --fail-after " +
                                 std::to_string(2 * round - 1));
    Run(aborted, "aborted in round " + std::to_string(round), "", true);
    Run(s, "started again");
  }

  void Confirm() {
    for (auto& s : subs)
      if (s.held && s.change_id) {
        steps++;
        auto r = Shell(Verity("confirm --json") + " " + std::to_string(s.change_id));
        log << "  confirm change " << s.change_id << ": " << r.out.substr(0, 160) << "\n";
        s.held = false;
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(r.out);
        } catch (...) {
        }
        if (j.is_object() && j.value("verdict", "") == "accepted") Accepted(s, j.value("run", 0));
        return;
      }
  }

  // Retracts the newest accepted step: the frontier stands where it stood before.
  void Retract() {
    if (accepted.empty()) return;
    steps++;
    const AcceptedStep st = accepted.back();
    accepted.pop_back();
    auto r = Shell(Verity("retract " + std::to_string(st.run) + " --reason 'measured on a busy box'"));
    log << "  " << steps << ". retract run " << st.run << " -> exit " << r.exit_code << " " << r.out;
    if (r.exit_code != 0) return Violation("retract " + std::to_string(st.run) + " failed: " + r.err);
    standing = st.before_commit;
    standing_side = st.before;
  }

  // Reverts a change: main without it is measured as a new commit, slower
  // (the revert is wrong) or faster (the change had turned harmful).
  void Revert() {
    if (subs.empty()) return;
    const Sub& of = AnySub();
    if (!of.change_id) return;
    steps++;
    Sub s;
    s.base = standing_side;
    s.head = Commit(commit_speed[standing] * U(0.9, 1.08));
    s.key = KeyOf(s.base, s.head);
    auto r = Shell(Verity("revert --json " + std::to_string(of.change_id)) + " --reason 'suspected slow' --base-cmd " +
                   Quote(s.base.cmd) + " --head-cmd " + Quote(s.head.cmd) + " --parity-cmd " +
                   Quote(Parity("--artifact " + s.head.sha)));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.out);
    } catch (...) {
    }
    if (Outcome(s, "revert of change " + std::to_string(of.change_id), j, false) == "accepted")
      reverts.push_back(s.change_id);
  }

  void Reapply() {
    if (reverts.empty()) return;
    steps++;
    const int revert = reverts[Pick(static_cast<int>(reverts.size()))];
    Sub s;
    s.base = standing_side;
    const double gain = U(1.03, 1.12);
    s.head = Commit(commit_speed[standing] * gain);
    s.predict = (gain - 1) * 100;
    s.key = KeyOf(s.base, s.head);
    auto r = Shell(Verity("reapply --json " + std::to_string(revert)) + " --reason 'the revert measured noise'" +
                   " --predict " + std::to_string(s.predict) + " --base-cmd " + Quote(s.base.cmd) + " --head-cmd " +
                   Quote(s.head.cmd) + " --parity-cmd " + Quote(Parity("--artifact " + s.head.sha)));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.out);
    } catch (...) {
    }
    Outcome(s, "reapply of revert " + std::to_string(revert), j, false);
  }

  // Re-measures the parked changes: each run continues its change's budget.
  void Remeasure() {
    steps++;
    auto r = Shell(Verity("remeasure --json"));
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(r.out);
    } catch (...) {
      log << "  " << steps << ". remeasure: " << r.out.substr(0, 200) << r.err.substr(0, 200) << "\n";
      return;
    }
    log << "  " << steps << ". remeasure: " << j["remeasured"].size() << " change(s)\n";
    for (const auto& o : j["remeasured"]) {
      auto it = by_change.find(o.value("change", 0));
      if (it == by_change.end()) continue;
      Sub s = it->second;
      Outcome(s, "  remeasured", o, false, false);
    }
  }

  // The same change again under another box label (one machine, one lock).
  void Relabel() {
    Sub s = AnySub();
    const std::string labels[] = {"", "lab-a", "lab-b"};
    s.label = labels[Pick(3)];
    s.predict = U(0, 30);
    Run(s, "relabelled");
  }

  // A new change whose bench states a workload of its own: an international
  // one is a key like any other; an invisible character must be refused.
  void HostileWorkload() {
    Sub s;
    const std::string w = kWorkloads[Pick(std::size(kWorkloads))];
    s.base = Build(standing, "--workload " + Quote(w));
    s.head = Build(static_cast<int>(Commit(commit_speed[standing] * 1.1).commit), "--workload " + Quote(w));
    s.predict = 10;
    s.key = w + " " + KeyOf(s.base, s.head);
    Run(s, "workload");
  }

  void Step() {
    const int action = subs.empty() ? 0 : Pick(14);
    switch (action) {
      case 0:
      case 1: NewChange(0); break;
      case 2: NewChange(1); break;
      case 3: NewChange(2); break;
      case 4: {
        Sub s = AnySub();
        s.predict = U(0, 30);
        Run(s, "resubmitted");
        break;
      }
      case 5: {
        Sub s = AnySub();
        if (s.base.sha == s.head.sha) return;  // a flag change has no commits of its own
        s.base = Build(s.base.commit, "");
        s.head = Build(s.head.commit, "");
        Run(s, "rebuilt");
        break;
      }
      case 6: AbortAndRestart(); break;
      case 7: Confirm(); break;
      case 8: Retract(); break;
      case 9: Revert(); break;
      case 10: Reapply(); break;
      case 11: Remeasure(); break;
      case 12: Pick(2) ? Relabel() : HostileWorkload(); break;
      case 13: Race(); break;
    }
    CheckLedger();
  }
};

std::vector<unsigned> Seeds() {
  const char* env = std::getenv("VERITY_HISTORY_SEEDS");
  const std::string spec = env && *env ? env : "1-3";
  std::vector<unsigned> out;
  std::stringstream in(spec);
  for (std::string part; std::getline(in, part, ',');) {
    const auto dash = part.find('-');
    const unsigned a = std::stoul(part.substr(0, dash)),
                   b = dash == std::string::npos ? a : std::stoul(part.substr(dash + 1));
    for (unsigned s = a; s <= b; s++) out.push_back(s);
  }
  return out;
}

// P(Binomial(n, p) >= k).
double BinomialTail(int n, double p, int k) {
  double sum = 0;
  for (int i = k; i <= n; i++)
    sum += std::exp(std::lgamma(n + 1) - std::lgamma(i + 1) - std::lgamma(n - i + 1) + i * std::log(p) +
                    (n - i) * std::log1p(-p));
  return std::min(1.0, sum);
}

TEST(HistoryCheck, GeneratedHistoriesKeepEveryInvariant) {
  const char* env = std::getenv("VERITY_HISTORY_STEPS");
  const int steps = env && *env ? std::atoi(env) : 8;
  int histories = 0, total = 0, violations = 0, aa = 0, aa_accepted = 0;
  std::map<std::string, int> by_kind;  // kind -> histories that showed it
  for (unsigned seed : Seeds()) {
    Checker k(seed, "histcheck" + std::to_string(seed));
    for (int i = 0; i < steps && (k.violations == 0 || KeepGoing()); i++) k.Step();
    if (k.violations == 0 || KeepGoing()) k.CheckTampered();
    for (const auto& [kind, n] : k.kinds) by_kind[kind] += 1;
    histories++;
    total += k.steps;
    violations += k.violations;
    aa += static_cast<int>(k.aa_keys.size());
    aa_accepted += static_cast<int>(k.aa_accepted.size());
  }
  // A/A changes accepted no more often than the stated rate allows (a
  // one-sided binomial test at 0.001: a rate this high happens by chance at
  // most once in a thousand suites).
  const double p = BinomialTail(aa, kStatedRate, aa_accepted);
  std::printf("history check: A/A changes: %d, accepted %d (stated rate %.0f%%, P(this many or more) = %.3g)\n", aa,
              aa_accepted, 100 * kStatedRate, p);
  if (p < 0.001) {
    violations++;
    ADD_FAILURE() << "A/A changes accepted " << aa_accepted << " of " << aa << ", more than a " << kStatedRate
                  << " error rate allows";
  }
  for (const auto& [kind, n] : by_kind) std::printf("history check: in %d histories: %s\n", n, kind.c_str());
  std::printf("history check: %d histories, %d steps, %d invariant violations\n", histories, total, violations);
  EXPECT_EQ(violations, 0);
}

}  // namespace
}  // namespace verity::test
