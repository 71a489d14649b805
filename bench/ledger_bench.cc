// Google Benchmark microbenchmarks for the ledger:
//   BM_SubmitOverhead   ledger time per submission, excluding the bench and
//                       parity commands' own wall time (target <= 50 ms)
//   BM_Insert100kSamples sealed inserts of 100k samples (target <= 1 s)
//   BM_Show / BM_History on a ledger of 10k changes and 1M samples (<= 200 ms)
//   BM_Report           the markdown changelog of that ledger (<= 2 s)
//   BM_Dashboard        the HTML dashboard of that ledger
//   BM_ConcurrentSubmitters 8 submitters (each its own box and connection) at
//                       once on one ledger: every record arrives and verifies
// Run: build/bench/ledger_bench [--changes=N] [--pg=URL] [--benchmark_filter=...]
// --changes (default 10000) sizes the big ledger; the test suite runs every
// benchmark once on a small one and fails when one errors (gbench_test).
// --pg=postgresql://... runs every benchmark on PostgreSQL: each ledger is a
// database `verity_bench_*` created (and dropped first) on that server through
// psql; the big one is kept between runs, as its file is.
#include <benchmark/benchmark.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "ledger/ledger.h"
#include "ledger/migrations.h"
#include "render/dashboard.h"
#include "render/report.h"

namespace verity::ledger {
namespace {
namespace fs = std::filesystem;

int g_changes = 10000;  // --changes

std::string Scratch(const std::string& name) {
  fs::path p = fs::temp_directory_path() / "verity-bench";
  fs::create_directories(p);
  return (p / name).string();
}

// The benchmarks' own box-lock folder: a measurement elsewhere on this
// machine (its lock in /tmp) must not hold them up.
std::string LockDir() {
  const std::string d = Scratch("locks");
  fs::create_directories(d);
  return d;
}

std::string g_pg;  // --pg: a PostgreSQL server URL ("" = SQLite files)

// Runs `sql` (no single quotes in it) on --pg's server with psql; true when it
// succeeded and, if `want` is given, printed exactly that.
bool Psql(const std::string& sql, const char* want = nullptr) {
  const std::string cmd = "psql -X -qAt -v ON_ERROR_STOP=1 -c '" + sql + "' '" + g_pg + "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return false;
  std::string out;
  char buf[256];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const bool ok = pclose(p) == 0 && (!want || out == want);
  if (!ok && !want) std::fprintf(stderr, "ledger_bench: %s: %s", sql.c_str(), out.c_str());
  return ok;
}
std::string DbName(const std::string& ledger) { return ledger.substr(ledger.rfind('/') + 1); }

// Where the scratch ledger `name` lives: a file, or a database on --pg's server.
std::string LedgerAt(const std::string& name) {
  if (g_pg.empty()) return Scratch(name + ".db");
  std::string db = "verity_bench_";
  for (char c : name) db += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return g_pg.substr(0, g_pg.rfind('/') + 1) + db;
}

// Makes `db` empty: the file removed, or the database dropped and created again.
void Remove(const std::string& db) {
  if (!IsPostgresUrl(db)) {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db + suffix);
    return;
  }
  if (!Psql("DROP DATABASE IF EXISTS " + DbName(db)) ||
      !Psql("CREATE DATABASE " + DbName(db) + " ENCODING SQL_ASCII LOCALE \"C\" TEMPLATE template0")) {
    std::fprintf(stderr, "ledger_bench: cannot make database %s on %s\n", DbName(db).c_str(), g_pg.c_str());
    std::abort();
  }
}

bool Exists(const std::string& db) {
  if (!IsPostgresUrl(db)) return fs::exists(db);
  return Psql("SELECT count(*) FROM pg_database WHERE datname = $n$" + DbName(db) + "$n$", "1\n");
}

void Rename(const std::string& from, const std::string& to) {
  if (!IsPostgresUrl(from)) return fs::rename(from, to);
  if (!Psql("ALTER DATABASE " + DbName(from) + " RENAME TO " + DbName(to))) std::abort();
}

// A bench command that costs one fork of sh and nothing else.
std::string EchoBench(double value, const std::string& artifact) {
  char b[256];
  std::snprintf(b, sizeof b,
                "echo '{\"schema\":\"verity.bench/1\",\"build\":{\"id\":\"x\",\"artifact_sha256\":\"%s\"},"
                "\"metrics\":{\"decode_tok_s\":%.1f},\"ok\":true}'",
                artifact.c_str(), value);
  return b;
}

// Parity evidence the gate passes (policy v5's floor: 7 depths x 8 positions
// over the whole context), bound to the head's artifact: the submission then
// measures its rounds, which is the overhead worth stating.
std::string EchoParity(const std::string& artifact) {
  std::string depths;
  for (int d = 1; d <= 7; d++)
    depths += (d > 1 ? "," : "") + std::string("{\"depth\":") + std::to_string(d == 7 ? 512 : 73 * d) +
              ",\"positions\":8,\"top1\":1,\"mean_kl\":0,\"max_kl\":0}";
  return "echo '{\"schema\":\"verity.parity/1\",\"reference\":\"echo\",\"dtype\":\"f32\",\"mode\":\"standard\","
         "\"tokens\":512,\"window\":8,\"depths\":[" +
         depths +
         "],\"worst\":{\"top1\":1,\"mean_kl\":0},"
         "\"logits_sha256\":\"" +
         std::string(64, 'b') + "\",\"all_rows_sha256\":\"" + std::string(64, 'c') +
         "\",\"nonfinite\":[],\"build\":{\"id\":\"x\",\"artifact_sha256\":\"" + artifact + "\"},\"ok\":true}'";
}

// A submission of base artifact `base` against head `head` (64 hex each).
ChangeRequest EchoRequest(const std::string& base = std::string(64, 'a'),
                          const std::string& head = std::string(64, 'd')) {
  ChangeRequest req;
  req.title = "bench";
  req.predict_pct = 0.0;
  req.base_cmd = EchoBench(1000, base);
  req.head_cmd = EchoBench(1001, head);
  req.parity_cmd = EchoParity(head);
  return req;
}

// One submission of EchoRequest(); adds the ledger's own seconds (the whole
// submission less the commands' recorded wall time) and the commands'.
Status TimedSubmit(Ledger& l, const ChangeRequest& req, const MeasureOptions& opt, double& overhead, double& commands) {
  auto t0 = std::chrono::steady_clock::now();
  auto o = l.Submit(req, opt);
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!o.ok() || !o->completed())
    return Status::Error("submit failed: " + (o.ok() ? std::string("the run did not complete") : o.status().message()));
  VERITY_ASSIGN_OR_RETURN(auto cmd, l.db().Query("SELECT (SELECT sum(seconds) FROM samples WHERE run_id = ?1) + "
                                                 "(SELECT sum(seconds) FROM parity_results WHERE run_id = ?1)",
                                                 {o->run}));
  double c = AsDouble(cmd[0][0]);
  commands += c;
  overhead += total - c;
  return OkStatus();
}

void BM_SubmitOverhead(benchmark::State& state) {
  const std::string db = LedgerAt("submit");
  Remove(db);
  auto l = Ledger::Open(db);
  if (!l.ok()) {
    state.SkipWithError(l.status().message().c_str());
    return;
  }
  MeasureOptions opt;  // the policy's own rounds: fewer than its floor is refused
  opt.lock_dir = LockDir();
  double overhead = 0.0, commands = 0.0;
  for (auto _ : state) {
    Status s = TimedSubmit(**l, EchoRequest(), opt, overhead, commands);
    if (!s.ok()) {
      state.SkipWithError(s.message().c_str());
      return;
    }
  }
  state.counters["overhead_ms"] = 1e3 * overhead / state.iterations();
  state.counters["commands_ms"] = 1e3 * commands / state.iterations();
}
BENCHMARK(BM_SubmitOverhead)->Unit(benchmark::kMillisecond)->Iterations(10);

// Inserts a change with one run; returns the run id.
Result<int64_t> AddRun(Db& d, int64_t box, const std::string& title, const std::string& kind,
                       std::optional<int64_t> target) {
  VERITY_ASSIGN_OR_RETURN(int64_t change,
                          d.InsertSealed("changes", {{"kind", kind},
                                                     {"title", title},
                                                     {"author", std::string("bench")},
                                                     {"predict_pct", 3.0},
                                                     {"claim_bit_identical", int64_t{0}},
                                                     {"metric", std::string("decode_tok_s")},
                                                     {"base_cmd", std::string("b")},
                                                     {"head_cmd", std::string("h")},
                                                     {"target_change", target ? Value(*target) : Value()},
                                                     {"created_at", NowUtc()}}));
  return d.InsertSealed("runs", {{"change_id", change},
                                 {"purpose", std::string(kind == "change" ? "submit" : kind)},
                                 {"box_id", box},
                                 {"policy_version", int64_t{1}},
                                 {"min_rounds", int64_t{5}},
                                 {"max_rounds", int64_t{20}},
                                 {"started_at", NowUtc()}});
}

Status InsertSamples(Db& d, int64_t run, int64_t box, int n, std::mt19937_64& rng, double level = 1000.0) {
  std::normal_distribution<double> noise(level, 10.0);
  for (int i = 0; i < n; i++)
    VERITY_RETURN_IF_ERROR(d.InsertSealed("samples", {{"run_id", run},
                                                      {"round", int64_t{i / 4}},
                                                      {"side", std::string(i % 4 == 1 || i % 4 == 2 ? "head" : "base")},
                                                      {"ord", int64_t{i % 4}},
                                                      {"value", noise(rng)},
                                                      {"seconds", 0.05},
                                                      {"taken_at", std::string("2026-11-29T00:00:00.000Z")},
                                                      {"box_id", box}}));
  return OkStatus();
}

Result<int64_t> Box(Db& d) {
  VERITY_ASSIGN_OR_RETURN(auto rows, d.Query("SELECT id FROM boxes"));
  if (!rows.empty()) return AsInt(rows[0][0]);
  return d.InsertSealed("boxes", {{"fingerprint", std::string("benchbox")}, {"detail", std::string("{}")}});
}

constexpr int kBigBoxes = 20;  // the team-sized ledger of issue 28's goals

// The big ledger's boxes: benchbox-00 .. benchbox-19.
Result<std::vector<int64_t>> Boxes(Db& d) {
  std::vector<int64_t> ids;
  for (int b = 0; b < kBigBoxes; b++) {
    char name[32];
    std::snprintf(name, sizeof name, "benchbox-%02d", b);
    VERITY_ASSIGN_OR_RETURN(
        int64_t id, d.InsertSealed("boxes", {{"fingerprint", std::string(name)}, {"detail", std::string("{}")}}));
    ids.push_back(id);
  }
  return ids;
}

void BM_Insert100kSamples(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    const std::string db = LedgerAt("insert");
    Remove(db);
    auto l = Ledger::Open(db);
    Db& d = (*l)->db();
    int64_t run = 0, box = 0;
    (void)d.Transaction([&]() -> Status {
      VERITY_ASSIGN_OR_RETURN(box, Box(d));
      VERITY_ASSIGN_OR_RETURN(run, AddRun(d, box, "insert", "change", std::nullopt));
      return OkStatus();
    });
    std::mt19937_64 rng(1);
    state.ResumeTiming();
    Status s = d.Transaction([&] { return InsertSamples(d, run, box, 100000, rng); });
    if (!s.ok()) state.SkipWithError(s.message().c_str());
  }
}
BENCHMARK(BM_Insert100kSamples)->Unit(benchmark::kMillisecond)->Iterations(3);

// Change n of the big ledger: its run on box n % kBigBoxes (every 50th a
// revert), 100 samples, parity, a score, and now and then a retraction and a
// frontier event.
Status AddBigChange(Db& d, const std::vector<int64_t>& boxes, int n, std::mt19937_64& rng) {
  const int64_t box = boxes[n % kBigBoxes];
  const bool revert = n % 50 == 49;
  VERITY_ASSIGN_OR_RETURN(int64_t run, AddRun(d, box, "change " + std::to_string(n), revert ? "revert" : "change",
                                              revert ? std::optional<int64_t>(n - 1) : std::nullopt));
  // Half the boxes step up 3% halfway: drift finds change points
  // there and runs its full permutation tests, as on a real ledger.
  const bool stepped = (n % kBigBoxes) % 2 == 0 && n >= g_changes / 2;
  VERITY_RETURN_IF_ERROR(InsertSamples(d, run, box, 100, rng, stepped ? 1030.0 : 1000.0));
  VERITY_RETURN_IF_ERROR(d.InsertSealed("parity_results", {{"run_id", run},
                                                           {"side", std::string("head")},
                                                           {"mode", std::string("standard")},
                                                           {"exit_code", int64_t{0}},
                                                           {"passed", int64_t{1}},
                                                           {"worst_top1", 1.0},
                                                           {"worst_mean_kl", 0.0},
                                                           {"message", std::string("pass")},
                                                           {"seconds", 0.1}}));
  const char* verdict = n % 3 == 0 ? "none" : (revert ? "refused" : "accepted");
  VERITY_RETURN_IF_ERROR(d.InsertSealed("scores", {{"run_id", run},
                                                   {"policy_version", int64_t{1}},
                                                   {"verdict", std::string(verdict)},
                                                   {"tier", std::string(n % 3 == 0 ? "none" : "s")},
                                                   {"gain", 0.03},
                                                   {"ci_low", 0.02},
                                                   {"ci_high", 0.04},
                                                   {"gate", 20.0},
                                                   {"frontier_before", 1000.0},
                                                   {"frontier_after", 1030.0},
                                                   {"base_median", 1000.0},
                                                   {"head_median", 1030.0},
                                                   {"rounds", int64_t{25}},
                                                   {"surprise", int64_t{0}},
                                                   {"note", std::string("")},
                                                   {"scored_at", NowUtc()}}));
  if (n % 500 == 7)
    VERITY_RETURN_IF_ERROR(
        d.InsertSealed("retractions", {{"run_id", run}, {"reason", std::string("bench")}, {"retracted_at", NowUtc()}}));
  if (n % 100 < kBigBoxes)  // each box's frontier moves every 100 changes
    VERITY_RETURN_IF_ERROR(d.InsertSealed("frontier_events", {{"metric", std::string("decode_tok_s")},
                                                              {"box_id", box},
                                                              {"value", 1000.0 + n},
                                                              {"run_id", run},
                                                              {"reason", std::string("accepted")},
                                                              {"at", NowUtc()}}));
  return OkStatus();
}

// --changes changes (10k) x 100 samples = 1M samples on 20 boxes (change n
// measured on box n % 20; half of them 3% faster from the middle on), with scores, parity, reverts, retractions and
// parked changes. Built once and cached between runs.
const std::string& BigLedger() {
  static const std::string path = [] {
    std::string schema;
    for (const auto& m : EmbeddedMigrations()) schema += m.sql;
    const std::string name =
        "big-" + std::to_string(g_changes) + "-b" + std::to_string(kBigBoxes) + "s-" + Sha256Hex(schema).substr(0, 12);
    const std::string db = LedgerAt(name);
    if (Exists(db)) return db;
    const std::string tmp = LedgerAt(name + "-building");
    Remove(tmp);
    auto l = Ledger::Open(tmp);
    Db& d = (*l)->db();
    std::mt19937_64 rng(7);
    std::vector<int64_t> boxes;
    (void)d.Transaction([&]() -> Status {
      VERITY_ASSIGN_OR_RETURN(boxes, Boxes(d));
      return OkStatus();
    });
    for (int batch = 0; batch < (g_changes + 99) / 100; batch++) {
      Status s = d.Transaction([&]() -> Status {
        for (int i = 0; i < 100; i++) {
          VERITY_RETURN_IF_ERROR(AddBigChange(d, boxes, batch * 100 + i, rng));
        }
        return OkStatus();
      });
      if (!s.ok()) {
        std::fprintf(stderr, "building the big ledger failed: %s\n", s.message().c_str());
        std::abort();
      }
    }
    l->reset();
    Rename(tmp, db);
    return db;
  }();
  return path;
}

void BM_Show(benchmark::State& state) {
  auto l = Ledger::Open(BigLedger());
  for (auto _ : state) {
    auto j = (*l)->Show(g_changes / 2 + 1);  // one from the middle
    if (!j.ok()) state.SkipWithError(j.status().message().c_str());
    benchmark::DoNotOptimize(j);
  }
}
BENCHMARK(BM_Show)->Unit(benchmark::kMillisecond);

void BM_History(benchmark::State& state, const std::string& what) {
  auto l = Ledger::Open(BigLedger());
  for (auto _ : state) {
    auto j = (*l)->History(what);
    if (!j.ok()) state.SkipWithError(j.status().message().c_str());
    benchmark::DoNotOptimize(j);
  }
}
BENCHMARK_CAPTURE(BM_History, reverts, std::string("reverts"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_History, retractions, std::string("retractions"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_History, none, std::string("none"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_History, all, std::string("all"))->Unit(benchmark::kMillisecond);

void BM_Report(benchmark::State& state) {
  auto l = Ledger::Open(BigLedger());
  reports::ReportOptions opt;
  opt.out = Scratch("big-report.md");
  size_t bytes = 0;
  for (auto _ : state) {
    auto w = reports::WriteReport(**l, opt);
    if (!w.ok()) state.SkipWithError(w.status().message().c_str());
    bytes = fs::file_size(opt.out);
  }
  state.counters["report_MB"] = bytes / 1e6;
}
BENCHMARK(BM_Report)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_Dashboard(benchmark::State& state) {
  auto l = Ledger::Open(BigLedger());
  for (auto _ : state) {
    auto w = reports::WriteDashboard(**l, {Scratch("big-dashboard")});
    if (!w.ok()) state.SkipWithError(w.status().message().c_str());
  }
}
BENCHMARK(BM_Dashboard)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_Frontier(benchmark::State& state) {
  auto l = Ledger::Open(BigLedger());
  for (auto _ : state) benchmark::DoNotOptimize((*l)->Frontier());
}
BENCHMARK(BM_Frontier)->Unit(benchmark::kMillisecond);

// Every submitter's records are there and the chain verifies.
Status CheckConcurrent(const std::string& db, int64_t want) {
  VERITY_ASSIGN_OR_RETURN(auto l, Ledger::OpenForVerify(db));
  VERITY_ASSIGN_OR_RETURN(auto n, l->db().Query("SELECT count(*) FROM scores"));
  if (AsInt(n[0][0]) != want)
    return Status::Error(std::to_string(AsInt(n[0][0])) + " scores recorded, " + std::to_string(want) + " submitted");
  VERITY_ASSIGN_OR_RETURN(const VerifyReport v, l->Verify(""));
  if (!v.ok) return Status::Error("verify FAILs: " + v.first_broken);
  return OkStatus();
}

// kSubmitters submitters at once, each its own box (so its own measurement
// lock: they measure in parallel) and its own connection, kEach submissions
// each; they take turns only to record.
void BM_ConcurrentSubmitters(benchmark::State& state) {
  constexpr int kSubmitters = 8, kEach = 2;
  double overhead = 0.0, commands = 0.0;
  for (auto _ : state) {
    state.PauseTiming();
    const std::string db = LedgerAt("concurrent");
    Remove(db);
    if (auto l = Ledger::Open(db); !l.ok()) return state.SkipWithError(l.status().message().c_str());
    state.ResumeTiming();
    std::vector<std::thread> threads;
    std::vector<std::string> errors(kSubmitters);
    std::vector<double> own(kSubmitters, 0.0), cmds(kSubmitters, 0.0);
    for (int t = 0; t < kSubmitters; t++)
      threads.emplace_back([&, t] {
        auto l = Ledger::Open(db);
        if (!l.ok()) return void(errors[t] = l.status().message());
        MeasureOptions opt;
        opt.lock_dir = LockDir();
        opt.read_box = [t] {
          return measure::Box{"bench-submitter-" + std::to_string(t), "{\"submitter\":" + std::to_string(t) + "}"};
        };
        for (int k = 0; k < kEach && errors[t].empty(); k++) {
          // Each submission its own artifact pair: the same pair from two
          // submitters at once is one change measured twice (policy v4), and
          // the later score is superseded.
          char base[80], head[80];
          std::snprintf(base, sizeof base, "%056d%08x", 0, 2 * (t * kEach + k));
          std::snprintf(head, sizeof head, "%056d%08x", 0, 2 * (t * kEach + k) + 1);
          Status s = TimedSubmit(**l, EchoRequest(base, head), opt, own[t], cmds[t]);
          if (!s.ok()) errors[t] = s.message();
        }
      });
    for (auto& th : threads) th.join();
    state.PauseTiming();
    for (const auto& e : errors)
      if (!e.empty()) return state.SkipWithError(e.c_str());
    if (Status s = CheckConcurrent(db, int64_t{kSubmitters} * kEach); !s.ok())
      return state.SkipWithError(s.message().c_str());
    for (int t = 0; t < kSubmitters; t++) overhead += own[t], commands += cmds[t];
    state.ResumeTiming();
  }
  const double submissions = static_cast<double>(state.iterations()) * kSubmitters * kEach;
  state.counters["submitters"] = kSubmitters;
  state.counters["submissions"] = submissions;
  state.counters["overhead_ms"] = 1e3 * overhead / submissions;
  state.counters["commands_ms"] = 1e3 * commands / submissions;
}
BENCHMARK(BM_ConcurrentSubmitters)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace
}  // namespace verity::ledger

// Google Benchmark's main, with --changes=N taken out of the arguments first.
int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; i++) {
    const std::string a = argv[i];
    if (a.rfind("--changes=", 0) == 0) {
      char* end = nullptr;
      const long n = std::strtol(a.c_str() + 10, &end, 10);
      if (*end != '\0' || n < 100 || n > 1000000) {
        std::fprintf(stderr, "ledger_bench: --changes must be an integer in 100..1000000, got '%s'\n", a.c_str() + 10);
        return 2;
      }
      verity::ledger::g_changes = static_cast<int>(n);
    } else if (a.rfind("--pg=", 0) == 0) {
      verity::ledger::g_pg = a.substr(5);
      if (!verity::ledger::IsPostgresUrl(verity::ledger::g_pg)) {
        std::fprintf(stderr, "ledger_bench: --pg must be a postgresql:// URL, got '%s'\n",
                     verity::ledger::g_pg.c_str());
        return 2;
      }
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
