// verity loadgen: a closed-loop load generator for `verity serve` (loopback
// only, bounded in requests and time) that prints one verity.bench/1 record
// the ledger scores: serve_tok_s (generated tokens per second over the run)
// as the metric; time to first token, inter-chunk latency and the server's
// peak RSS as guards. Any failed request fails the sample ("ok": false).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <thread>

#include "cli/engine/commands.h"
#include "protocol/bench_record.h"

namespace verity::cli {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct LoadFlags {
  std::string url = "http://127.0.0.1:8080", api_key;
  int concurrency = 1, requests = 16, prompt_tokens = 16, gen_tokens = 16;
  uint64_t seed = 1;
  double max_seconds = 600;
  double duration = 0;  // > 0: as many requests as fit in this many seconds (a soak)
};

struct Served {
  std::string id, build_id, artifact;
  int vocab = 0;
};

struct Outcome {
  bool ok = false;
  std::string error;
  double ttft_s = 0;
  std::vector<double> gaps_s;  // between consecutive text chunks
  int tokens = 0;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Nearest-rank percentile (q in (0, 1]) of `v` (sorted here).
double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(q * v.size()));
  return v[std::max<size_t>(rank, 1) - 1];
}

httplib::Headers Auth(const LoadFlags& f) {
  httplib::Headers h;
  if (!f.api_key.empty()) h.emplace("Authorization", "Bearer " + f.api_key);
  return h;
}

// The served model's id and vocabulary, and the server's build (from /health, which must be 200).
Result<Served> Discover(httplib::Client& c, const LoadFlags& f) {
  auto models = c.Get("/v1/models", Auth(f));
  if (!models || models->status != 200) return Status::Error(f.url + "/v1/models: no 200 answer");
  json m = json::parse(models->body, nullptr, false);
  auto health = c.Get("/health");
  if (!health) return Status::Error(f.url + "/health: no answer");
  json h = json::parse(health->body, nullptr, false);
  if (health->status != 200)
    return Status::Error(f.url + "/health: " + std::to_string(health->status) + " " + health->body);
  try {
    Served s;
    s.id = m.at("data").at(0).at("id");
    s.vocab = m["data"][0].at("meta").at("vocab_size");
    s.build_id = h.at("build").at("id");
    s.artifact = h["build"].at("artifact_sha256");
    return s;
  } catch (const std::exception& e) {
    return Status::Error(f.url + ": /v1/models or /health lacks a field loadgen needs: " + e.what());
  }
}

// Request i: a fixed prompt of prompt_tokens ids, gen_tokens generated past EOS, streamed.
json Body(const LoadFlags& f, const Served& s, int i) {
  json ids = json::array();
  for (int k = 0; k < f.prompt_tokens; k++)
    ids.push_back(
        static_cast<int>((1 + 7919ull * (static_cast<uint64_t>(i) * f.prompt_tokens + k + f.seed)) % s.vocab));
  return {{"model", s.id},
          {"prompt", ids},
          {"max_tokens", f.gen_tokens},
          {"temperature", 0},
          {"stream", true},
          {"ignore_eos", true},
          {"stream_options", {{"include_usage", true}}}};
}

// Reads the event stream: the first chunk with text ends the wait for a
// first token; usage names the tokens generated.
void OnEvent(const std::string& data, Clock::time_point start, Clock::time_point* last, Outcome* o) {
  if (data == "[DONE]") return;
  json j = json::parse(data, nullptr, false);
  if (j.is_discarded()) return void(o->error = "a chunk is not JSON: " + data.substr(0, 80));
  if (j.contains("error")) return void(o->error = "error event: " + data.substr(0, 200));
  if (j.contains("usage") && j["usage"].is_object()) o->tokens = j["usage"].value("completion_tokens", 0);
  if (!j.contains("choices") || j["choices"].empty() || j["choices"][0].value("text", "").empty()) return;
  const auto now = Clock::now();
  if (o->ttft_s == 0) o->ttft_s = Seconds(now - start);
  else o->gaps_s.push_back(Seconds(now - *last));
  *last = now;
}

Outcome OneRequest(httplib::Client& c, const LoadFlags& f, const Served& s, int i) {
  Outcome o;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = Auth(f);
  req.headers.emplace("Content-Type", "application/json");
  req.body = Body(f, s, i).dump();
  std::string buf;
  const auto start = Clock::now();
  auto last = start;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    buf.append(data, n);
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos; buf.erase(0, end + 2))
      if (buf.rfind("data: ", 0) == 0) OnEvent(buf.substr(6, end - 6), start, &last, &o);
    return true;
  };
  auto res = c.send(req);
  if (!res) o.error = "no response (" + httplib::to_string(res.error()) + ")";
  else if (res->status != 200) o.error = "HTTP " + std::to_string(res->status) + " " + res->body.substr(0, 200);
  else if (o.error.empty() && o.tokens != f.gen_tokens)
    o.error = "usage.completion_tokens " + std::to_string(o.tokens) + ", asked " + std::to_string(f.gen_tokens);
  o.ok = o.error.empty();
  return o;
}

// A sample's value in /metrics' text, NaN when absent (an older server).
double MetricValue(const std::string& body, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = body.find(key);
  return at == std::string::npos ? NAN : std::strtod(body.c_str() + at + key.size(), nullptr);
}

std::string MetricsText(httplib::Client& c) {
  auto m = c.Get("/metrics");
  return m && m->status == 200 ? m->body : std::string();
}

double PeakRssMb(const std::string& metrics) {
  return MetricValue(metrics, "verity_peak_resident_memory_bytes") / 1048576.0;
}

// Where the server's engine spent the run, from its /metrics before and
// after: decode rows per decode-step second is the aggregate decode rate,
// prefills apart. Nulls when the server does not count them.
json EngineShare(const std::string& before, const std::string& after) {
  auto delta = [&](const char* name) { return MetricValue(after, name) - MetricValue(before, name); };
  const double rows = delta("verity_decode_step_rows_total"), decode_s = delta("verity_decode_seconds_total"),
               prefill_s = delta("verity_prefill_seconds_total");
  auto num = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  return {{"decode_rows", num(rows)},
          {"decode_seconds", num(decode_s)},
          {"prefill_seconds", num(prefill_s)},
          {"decode_rows_per_s", num(decode_s > 0 ? rows / decode_s : NAN)}};
}

Status CheckLoopback(const std::string& url) {
  for (const char* ok : {"http://127.0.0.1:", "http://localhost:", "http://[::1]:"})
    if (url.rfind(ok, 0) == 0) return OkStatus();
  return Status::Error("--url " + url + ": loadgen drives loopback servers only (http://127.0.0.1:PORT)");
}

// Runs f.concurrency closed-loop clients from t0: each sends its next request
// when its last finished, until f.requests are sent or f.max_seconds have passed.
std::vector<Outcome> SendRequests(const LoadFlags& f, const Served& served, Clock::time_point t0) {
  std::atomic<int> next{0};
  std::mutex mu;
  std::vector<Outcome> outcomes;
  const auto until = t0 + std::chrono::duration<double>(f.max_seconds);
  std::vector<std::thread> workers;
  for (int w = 0; w < f.concurrency; w++)
    workers.emplace_back([&] {
      httplib::Client c(f.url);
      c.set_read_timeout(static_cast<time_t>(f.max_seconds) + 1, 0);
      for (int i; (i = next++) < f.requests && Clock::now() < until;) {
        Outcome o = OneRequest(c, f, served, i);
        std::lock_guard<std::mutex> l(mu);
        outcomes.push_back(std::move(o));
      }
    });
  for (auto& t : workers) t.join();
  return outcomes;
}

// The run summed up: the latencies (ms) and tokens of the requests that
// completed, the failures with the first error, and the requests never run.
struct Tally {
  std::vector<double> ttft, gaps;
  int ran = 0, tokens = 0, failed = 0, missing = 0;
  std::string first_error;
  double wall = 0;
};

Tally TallyOutcomes(const LoadFlags& f, const std::vector<Outcome>& outcomes, double wall) {
  Tally t;
  t.ran = static_cast<int>(outcomes.size());
  t.wall = wall;
  for (const Outcome& o : outcomes) {
    if (!o.ok) {
      t.failed++;
      if (t.first_error.empty()) t.first_error = o.error;
      continue;
    }
    t.tokens += o.tokens;
    t.ttft.push_back(o.ttft_s * 1e3);
    for (double g : o.gaps_s) t.gaps.push_back(g * 1e3);
  }
  t.missing = f.duration > 0 ? 0 : f.requests - t.ran;
  return t;
}

// The verity.bench/1 record of the run; the server's /metrics before and after
// give its peak RSS and where its engine spent the time.
protocol::BenchRecord LoadRecord(const LoadFlags& f, const Served& served, const Tally& t,
                                 const std::string& metrics_before, const std::string& metrics_after) {
  protocol::BenchRecord rec;
  rec.ok = t.failed == 0 && t.missing == 0;
  rec.build = {served.build_id, served.artifact};
  rec.workload = "serve " + served.id + " c" + std::to_string(f.concurrency) + " pp" + std::to_string(f.prompt_tokens) +
                 "+tg" + std::to_string(f.gen_tokens);
  rec.metrics = {{"serve_tok_s", t.tokens / t.wall},
                 {"ttft_p50_ms", Percentile(t.ttft, 0.5)},
                 {"ttft_p99_ms", Percentile(t.ttft, 0.99)},
                 {"itl_p99_ms", Percentile(t.gaps, 0.99)},
                 {"peak_rss_mb", PeakRssMb(metrics_after)}};
  rec.prompt_tokens = f.prompt_tokens, rec.gen_tokens = f.gen_tokens;
  rec.extra = {{"requests", f.requests},
               {"completed", t.ran - t.failed},
               {"errors", {{"failed", t.failed}, {"not_run", t.missing}, {"first", t.first_error}}},
               {"concurrency", f.concurrency},
               {"wall_s", t.wall},
               {"generated_tokens", t.tokens},
               {"engine", EngineShare(metrics_before, metrics_after)}};
  return rec;
}

int RunLoadgen(const LoadFlags& f) {
  if (auto s = CheckLoopback(f.url); !s.ok()) return Fail(s);
  httplib::Client probe(f.url);
  auto served = Discover(probe, f);
  if (!served.ok()) return Fail(served.status());
  const std::string metrics_before = MetricsText(probe);
  const auto t0 = Clock::now();
  const std::vector<Outcome> outcomes = SendRequests(f, *served, t0);
  const Tally t = TallyOutcomes(f, outcomes, Seconds(Clock::now() - t0));
  const std::string metrics_after = MetricsText(probe);
  const protocol::BenchRecord rec = LoadRecord(f, *served, t, metrics_before, metrics_after);
  std::printf("%s\n", JsonLine(protocol::ToJson(rec)).c_str());
  std::fprintf(stderr, "loadgen: %d/%d requests ok, %d failed, %d not run, %.1f tok/s%s%s\n", t.ran - t.failed,
               f.requests, t.failed, t.missing, t.tokens / t.wall,
               t.first_error.empty() ? "" : "; first error: ", t.first_error.c_str());
  return rec.ok ? 0 : 1;
}

}  // namespace

void RegisterLoadgenCommand(CLI::App& app, Registry& reg) {
  auto f = std::make_shared<LoadFlags>();
  auto* sub = app.add_subcommand("loadgen",
                                 "Closed-loop load on a loopback `verity serve`; prints a verity.bench/1 record "
                                 "(serve_tok_s; TTFT, inter-chunk p99 and peak RSS as guards)");
  sub->add_option("--url", f->url, "server base URL (loopback only)")->capture_default_str();
  sub->add_option("--api-key", f->api_key, "Authorization: Bearer KEY");
  sub->add_option("--concurrency", f->concurrency, "clients, each sending its next request when the last finished")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  sub->add_option("--requests", f->requests, "requests in all")->capture_default_str()->check(CLI::Range(1, 1000000));
  sub->add_option("--prompt-tokens", f->prompt_tokens, "prompt ids per request")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--gen-tokens", f->gen_tokens, "tokens generated per request (past EOS)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--seed", f->seed, "varies the prompts")->capture_default_str();
  sub->add_option("--max-seconds", f->max_seconds, "no request starts after this long")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 86400.0));
  sub->add_option("--duration", f->duration, "instead of --requests: send requests for this many seconds (a soak)")
      ->check(CLI::Range(1.0, 86400.0));
  reg.On(sub, [f] {
    if (f->duration > 0) f->requests = 1000000000, f->max_seconds = f->duration;
    return RunLoadgen(*f);
  });
}

}  // namespace verity::cli
