// verity serve over real HTTP (cpp-httplib's client): it answers as
// `verity generate` does, refuses bad input with a named 4xx, gives each
// request the same tokens alone or batched, turns /health 503 when the probe
// fails without exiting, frees a slot when its client leaves, answers 503 +
// Retry-After when full, and drains in-flight requests on SIGTERM.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/serve_util.h"

namespace verity {
namespace {

using json = nlohmann::json;
using test::ServeProcess;

std::string Base(const std::string& extra = "", const std::string& probe_every = "0") {
  return "--model " + test::Model("stories260K.bin") + " --tokenizer " + test::Model("tok512.bin") +
         " --threads 1 --probe-every " + probe_every + " " + extra;
}

json Post(httplib::Client& c, const std::string& path, const json& body, int* status = nullptr) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  if (!r) return json{{"transport_error", httplib::to_string(r.error())}};
  if (status) *status = r->status;
  return json::parse(r->body, nullptr, false);
}

json Completion(const std::string& prompt, int max_tokens) {
  return {{"model", "stories260K"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

TEST(Serve, GreedyCompletionIsWhatGeneratePrints) {
  ServeProcess s(Base());
  ASSERT_GT(s.port(), 0) << s.startup_stdout() << s.stderr_text();
  EXPECT_NE(s.startup_stdout().find("serve: startup probe: passed=3/3 verdict=PASS"), std::string::npos)
      << s.startup_stdout();
  const std::string prompt = "Once upon a time";
  auto c = s.Client();
  int status = 0;
  json r = Post(c, "/v1/completions", Completion(prompt, 60), &status);
  ASSERT_EQ(status, 200) << r.dump();
  const int n_prompt = r["usage"]["prompt_tokens"];
  EXPECT_GT(n_prompt, 1);
  EXPECT_EQ(r["usage"]["completion_tokens"].get<int>() + n_prompt, r["usage"]["total_tokens"].get<int>());
  // generate's --steps count positions: the prompt's (BOS included), then
  // one per sampled token but the last, which is printed and never fed.
  auto gen = test::Shell(test::VerityBin() + " generate --model " + test::Model("stories260K.bin") + " --tokenizer " +
                         test::Model("tok512.bin") + " --temperature 0 --steps " + std::to_string(n_prompt + 60 - 1) +
                         " --prompt '" + prompt + "'");
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const std::string text = r["choices"][0]["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(prompt + text + "\n", gen.out);
  EXPECT_EQ(s.Wait(true), 0) << s.stderr_text();
}

struct BadCase {
  const char* name;
  std::string body;
  int status;
  std::string names;  // the parameter or phrase the error must name
};

TEST(Serve, BadInputIsANamed4xxAndTheServerLives) {
  ServeProcess s(Base("--api-key sekret --max-body-bytes 300000"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  auto c = s.Client();
  c.set_bearer_token_auth("sekret");
  const std::vector<BadCase> cases = {
      {"malformed JSON", "{\"model\": ", 400, "not valid JSON"},
      {"not an object", "[1, 2]", 400, "JSON object"},
      {"unknown field", R"({"model":"stories260K","prompt":"a","frobnicate":1})", 400, "frobnicate"},
      {"wrong type", R"({"model":"stories260K","prompt":"a","temperature":"hot"})", 400, "temperature"},
      {"out of range", R"({"model":"stories260K","prompt":"a","top_p":1.5})", 400, "top_p"},
      {"n > 1", R"({"model":"stories260K","prompt":"a","n":2})", 400, "n"},
      {"nested 100000 deep",
       R"({"model":"stories260K","prompt":"a","n":)" + std::string(100000, '[') + std::string(100000, ']') + "}", 400,
       "deeper than 32"},
      {"seed past 64 bits", R"({"model":"stories260K","prompt":"a","seed":18446744073709551615})", 400, "seed"},
      {"bad token id", R"({"model":"stories260K","prompt":[1, 999999]})", 400, "999999"},
      {"prompt beyond the context", json{{"model", "stories260K"}, {"prompt", std::vector<int>(600, 5)}}.dump(), 400,
       "context"},
      {"max_tokens beyond it", R"({"model":"stories260K","prompt":"a","max_tokens":5000})", 400, "max_tokens"},
      {"invalid UTF-8", std::string("{\"model\":\"stories260K\",\"prompt\":\"\xC3\x28\"}"), 400, "UTF-8"},
      {"wrong model", R"({"model":"gpt-4","prompt":"a"})", 404, "gpt-4"},
      {"stream with logprobs", R"({"model":"stories260K","prompt":"a","stream":true,"logprobs":2})", 400, "logprobs"},
      {"chat without a template", R"({"model":"stories260K","messages":[{"role":"user","content":"hi"}]})", 400,
       "chat template"},
      {"body over the limit", json{{"model", "stories260K"}, {"prompt", std::string(400000, 'a')}}.dump(), 413,
       "300000"},
  };
  for (const BadCase& b : cases) {
    const bool chat = b.body.find("messages") != std::string::npos;
    auto r = c.Post(chat ? "/v1/chat/completions" : "/v1/completions", b.body, "application/json");
    ASSERT_TRUE(r) << b.name;
    EXPECT_EQ(r->status, b.status) << b.name << ": " << r->body;
    json e = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(e.contains("error")) << b.name << ": " << r->body;
    EXPECT_NE(e["error"].dump().find(b.names), std::string::npos) << b.name << ": " << r->body;
  }
  httplib::Client anon("127.0.0.1", s.port());
  auto r = anon.Post("/v1/completions", Completion("a", 2).dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  auto ok = c.Post("/v1/completions", Completion("a", 2).dump(), "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << "after every refusal the server still answers: " << ok->body;
  EXPECT_EQ(s.Wait(true), 0);
}

// An unlabelled metric's value in a /metrics body; -1 if it is absent.
double MetricIn(const std::string& body, const std::string& name) {
  const std::string key = "\n" + name + " ";
  const size_t at = body.find(key);
  return at == std::string::npos ? -1.0 : std::stod(body.substr(at + key.size()));
}
// The same, read from a live server; -2 when the GET itself failed (a timed-out read under load: not a value).
double Metric(httplib::Client& c, const std::string& name) {
  auto m = c.Get("/metrics");
  return m ? MetricIn(m->body, name) : -2.0;
}

// The decode-step counters of /metrics: steps run and the sequences they held.
struct StepCounts {
  double steps = -1, rows = -1, prefills = -1, prompts = -1;
};
StepCounts Steps(httplib::Client& c) {
  StepCounts n;
  auto m = c.Get("/metrics");
  if (!m) return n;
  n.steps = MetricIn(m->body, "verity_decode_steps_total");
  n.rows = MetricIn(m->body, "verity_decode_step_rows_total");
  n.prefills = MetricIn(m->body, "verity_prefills_total");
  n.prompts = MetricIn(m->body, "verity_prefill_prompts_total");
  return n;
}

// Alone means one sequence per decode step, batched means steps that held
// several: /metrics' step counters say which happened, so the comparison
// cannot pass without batching having run. Concurrent rounds (in alternating
// order) go on until their steps held more sequences than there were steps,
// at most 12; every round's tokens must be alone's.
TEST(Serve, EachRequestGetsTheSameTokensAloneOrBatched) {
  ServeProcess s(Base("--parallel 8"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  std::vector<std::string> prompts;
  for (int i = 0; i < 8; i++) prompts.push_back(i % 2 ? "The cat was" : "One day, " + std::string(i, 'a'));
  std::vector<std::string> alone(prompts.size()), together(prompts.size());
  auto c = s.Client();
  const StepCounts start = Steps(c);
  ASSERT_GE(start.steps, 0) << "no verity_decode_steps_total in /metrics";
  for (size_t i = 0; i < prompts.size(); i++)
    alone[i] = Post(c, "/v1/completions", Completion(prompts[i], 24 + i))["choices"][0]["text"];
  const StepCounts after_alone = Steps(c);
  ASSERT_GT(after_alone.steps, start.steps) << "the requests ran no decode step";
  EXPECT_EQ(after_alone.rows - start.rows, after_alone.steps - start.steps) << "an 'alone' request shared a step";
  EXPECT_EQ(after_alone.prompts - start.prompts, after_alone.prefills - start.prefills)
      << "an 'alone' request shared a prefill";
  int round = 0;
  StepCounts now = after_alone;
  auto shared = [&](const StepCounts& n) {
    return n.rows - after_alone.rows > n.steps - after_alone.steps &&
           n.prompts - after_alone.prompts > n.prefills - after_alone.prefills;
  };
  for (; round < 12 && (round < 2 || !shared(now)); round++) {
    std::vector<std::thread> ts;
    for (size_t k = 0; k < prompts.size(); k++) {
      const size_t i = round % 2 ? prompts.size() - 1 - k : k;  // every other round in the other order
      ts.emplace_back([&, i] {
        auto cc = s.Client();
        together[i] = Post(cc, "/v1/completions", Completion(prompts[i], 24 + i))["choices"][0]["text"];
      });
    }
    for (auto& t : ts) t.join();
    for (size_t i = 0; i < prompts.size(); i++)
      EXPECT_EQ(together[i], alone[i]) << "request " << i << " round " << round;
    now = Steps(c);
  }
  EXPECT_GT(now.rows - after_alone.rows, now.steps - after_alone.steps)
      << "in " << round << " rounds of 8 concurrent requests no decode step held two: batching was not tested";
  EXPECT_GT(now.prompts - after_alone.prompts, now.prefills - after_alone.prefills)
      << "in " << round
      << " rounds of 8 concurrent requests no prefill held two prompts: shared prefills were not tested";
  std::printf(
      "batch invariance: %d concurrent rounds, %.0f rows in %.0f steps (mean batch %.2f), %.0f prompts in %.0f "
      "prefills, tokens identical\n",
      round, now.rows - after_alone.rows, now.steps - after_alone.steps,
      (now.rows - after_alone.rows) / std::max(1.0, now.steps - after_alone.steps), now.prompts - after_alone.prompts,
      now.prefills - after_alone.prefills);
  auto m = c.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("verity_kv_slots 8"), std::string::npos) << m->body;
  // The engine's time in steps and prefills is counted, so rows per step-second can be read.
  EXPECT_GT(MetricIn(m->body, "verity_decode_seconds_total"), 0.0) << m->body;
  EXPECT_GT(MetricIn(m->body, "verity_prefill_seconds_total"), 0.0) << m->body;
  EXPECT_EQ(s.Wait(true), 0);
}

// A non-streaming request writes nothing until its last token, so its
// client's leaving is seen on the socket: a client that gives up after 40 ms
// frees its slot long before 500 tokens of the reference backend would end
// (~250 ms on an idle box), and the request is counted as 499.
TEST(Serve, ANonStreamingClientThatLeavesFreesItsSlotToo) {
  ServeProcess s(Base("--parallel 1 --backend reference"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  auto probe = s.Client();
  const double before = Metric(probe, "verity_generated_tokens_total");
  {
    auto c = s.Client();
    c.set_read_timeout(0, 40 * 1000);
    json longreq = {{"model", "stories260K"}, {"prompt", "Once"}, {"max_tokens", 500}, {"ignore_eos", true}};
    auto r = c.Post("/v1/completions", longreq.dump(), "application/json");
    EXPECT_FALSE(r) << "the request ended within its client's 40 ms; the test needs a slower one";
  }  // the client closes its socket here
  auto c = s.Client();
  for (int i = 0; i < 500 && Metric(probe, "verity_kv_slots_in_use") != 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Metric(probe, "verity_kv_slots_in_use"), 0);
  EXPECT_LT(Metric(probe, "verity_generated_tokens_total") - before, 500)
      << "the request was cancelled, not run to its end";
  std::string body;
  for (int i = 0; i < 200; i++) {  // the handler counts it as it returns
    auto m = probe.Get("/metrics");
    body = m ? m->body : "";
    if (body.find("endpoint=\"/v1/completions\",status=\"499\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(body.find("endpoint=\"/v1/completions\",status=\"499\"} 1"), std::string::npos) << body;
  int status = 0;
  Post(c, "/v1/completions", Completion("a", 2), &status);
  EXPECT_EQ(status, 200) << "the slot serves the next request";
  EXPECT_EQ(s.Wait(true), 0);
}

// A client that leaves while its request is still queued (the only slot
// busy) is seen then, streaming or not: its request is never prefilled (a
// non-streaming one is answered 499), while the running request goes on.
TEST(Serve, AQueuedClientThatLeavesIsSeenBeforeItsPrefill) {
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "streaming" : "non-streaming");
    ServeProcess s(Base("--parallel 1 --backend reference"));
    ASSERT_GT(s.port(), 0) << s.stderr_text();
    auto probe = s.Client();
    const double prompt_before = Metric(probe, "verity_prompt_tokens_total");
    std::thread running([&] {
      auto c = s.Client();
      c.set_read_timeout(60, 0);
      json longreq = {{"model", "stories260K"}, {"prompt", "Once"}, {"max_tokens", 500}, {"ignore_eos", true}};
      auto r = c.Post("/v1/completions", longreq.dump(), "application/json");
      EXPECT_TRUE(r && r->status == 200) << "the running request must end normally";
    });
    // Running: its slot in use and its prompt counted (two gauges, published apart).
    for (int i = 0; i < 1000 && (Metric(probe, "verity_kv_slots_in_use") != 1 ||
                                 Metric(probe, "verity_prompt_tokens_total") == prompt_before);
         i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(Metric(probe, "verity_kv_slots_in_use"), 1) << "the long request never started";
    const double prompt_running = Metric(probe, "verity_prompt_tokens_total");
    {
      // A raw connection, closed only once the server has queued its request
      // (a client timeout could fire before a loaded server read it at all).
      const std::string body = json{
          {"model", "stories260K"},
          {"prompt", "Lily and Ben went to the park to play"},
          {"max_tokens", 4},
          {"stream", stream}}.dump();
      const std::string req =
          "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
          "Content-Length: " +
          std::to_string(body.size()) + "\r\n\r\n" + body;
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(static_cast<uint16_t>(s.port()));
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
      ASSERT_EQ(write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
      for (int i = 0; i < 1000 && Metric(probe, "verity_queue_depth") != 1; i++)
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      EXPECT_EQ(Metric(probe, "verity_queue_depth"), 1) << "the request was never queued";
      close(fd);  // gone while queued
    }
    if (!stream) {
      std::string body;
      bool seen = false;
      for (int i = 0; i < 200 && !seen; i++) {
        auto m = probe.Get("/metrics");
        body = m ? m->body : "";
        seen = body.find("endpoint=\"/v1/completions\",status=\"499\"} 1") != std::string::npos;
        if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      EXPECT_TRUE(seen) << body;
      EXPECT_EQ(Metric(probe, "verity_kv_slots_in_use"), 1) << "seen while the long request still ran";
    }
    running.join();
    // The scheduler takes the next job as the slot frees: give it the time to (not) prefill it.
    for (int i = 0; i < 50 && Metric(probe, "verity_prompt_tokens_total") == prompt_running; i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(Metric(probe, "verity_prompt_tokens_total"), prompt_running) << "the queued request was prefilled";
    EXPECT_GT(prompt_running, prompt_before);
    EXPECT_EQ(s.Wait(true), 0);
  }
}

// The probes file is read every round: a wrong expectation makes the next
// round fail (503 with question, expected and actual; an ALERT; counted), the
// server keeps answering, and the right one makes it healthy again.
TEST(Serve, AFailedProbeTurnsHealth503WithoutExitingAndARightOneRecovers) {
  const std::string probes = test::TempDir("probes") + "/p.json";
  const std::string good = test::ReadFile(test::Model("stories260K.probes.json"));
  test::WriteFile(probes, good);
  ServeProcess s(Base("--probes " + probes, "0.2"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  auto c = s.Client();
  auto health = [&] {
    auto r = c.Get("/health");
    return r ? r->status : -1;
  };
  EXPECT_EQ(health(), 200);
  test::WriteFile(probes, R"([{"prompt": "Once upon a time, there was a little girl named", "expect": " Zebulon"}])");
  int status = 0;
  for (int i = 0; i < 300 && (status = health()) == 200; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(status, 503);
  json h = json::parse(c.Get("/health")->body);
  EXPECT_EQ(h["last_probe"]["probes"][0]["expected"], " Zebulon") << h.dump();
  EXPECT_EQ(h["last_probe"]["probes"][0]["actual"].get<std::string>().rfind(" Lily", 0), 0u) << h.dump();
  int code = 0;
  Post(c, "/v1/completions", Completion("a", 2), &code);
  EXPECT_EQ(code, 200) << "an unhealthy server still serves: alerting is the job, not stopping";
  EXPECT_NE(c.Get("/metrics")->body.find("verity_healthy 0"), std::string::npos);
  test::WriteFile(probes, good);
  for (int i = 0; i < 300 && (status = health()) == 503; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(status, 200);
  json hist = json::parse(c.Get("/health?history=1")->body);
  bool saw_fail = false, saw_pass_after = false;
  for (const json& r : hist["history"]) {
    if (!r["pass"].get<bool>()) saw_fail = true;
    else if (saw_fail) saw_pass_after = true;
  }
  EXPECT_TRUE(saw_fail && saw_pass_after) << hist.dump();
  EXPECT_EQ(s.Wait(true), 0);
  EXPECT_NE(s.stderr_text().find("verity: ALERT: coherence probe failed"), std::string::npos);
}

// The resident bytes of `pid`'s thread stacks: its anonymous mappings of the
// default thread stack's size (RLIMIT_STACK, which the server inherits; glibc
// adds a guard page). Sets *stacks to how many it found.
long ThreadStackKb(pid_t pid, int* stacks) {
  rlimit rl{};
  getrlimit(RLIMIT_STACK, &rl);
  const unsigned long size = rl.rlim_cur == RLIM_INFINITY ? 8UL << 20 : rl.rlim_cur;
  std::istringstream in(test::ReadFile("/proc/" + std::to_string(pid) + "/smaps"));
  long kb = 0;
  bool stack = false;
  *stacks = 0;
  for (std::string line; std::getline(in, line);) {
    unsigned long lo = 0, hi = 0;
    char name[256] = "";
    if (std::sscanf(line.c_str(), "%lx-%lx %*s %*s %*s %*s %255s", &lo, &hi, name) >= 2 && line.find(':') > 20) {
      stack = name[0] == '\0' && (hi - lo == size || hi - lo == size + 4096);
      *stacks += stack;
    } else if (stack && line.rfind("Rss:", 0) == 0) {
      kb += std::stol(line.substr(4));
    }
  }
  return kb;
}

// Issue 25's soak crept: every /health hashed the executable (7 MB) through a
// 64 KB buffer on the handler thread's stack, which then stayed resident for
// the thread's life, one more thread every few health checks (~2 MB over the
// 10-minute soak, where its 5% bound is 1.5 MB). Health checks on fresh
// connections (so on many handler threads) may grow the stacks by a thread's
// first use, not by a buffer.
TEST(Serve, HealthChecksLeaveTheHandlerThreadStacksSmall) {
  ServeProcess s(Base("--parallel 4 --queue 4"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  // The listening line comes before httplib has started its thread pool.
  ASSERT_EQ(s.Client().Get("/health")->status, 200);
  int stacks = 0;
  long before = ThreadStackKb(s.pid(), &stacks);
  for (int i = 0; i < 500 && stacks < 8; i++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    before = ThreadStackKb(s.pid(), &stacks);
  }
  ASSERT_GE(stacks, 8) << "found no handler thread stacks to watch in /proc/" << s.pid() << "/smaps";
  constexpr int kChecks = 32;
  for (int i = 0; i < kChecks; i++) {
    auto c = s.Client();  // a new connection each time: httplib hands it to whichever thread is idle
    auto r = c.Get("/health");
    ASSERT_TRUE(r && r->status == 200) << "health check " << i;
  }
  const long after = ThreadStackKb(s.pid(), &stacks);
  std::printf("health checks: %d on fresh connections, %d thread stacks, %ld KB resident before, %ld KB after\n",
              kChecks, stacks, before, after);
  EXPECT_LE(after - before, 16L * kChecks) << "KB of thread stacks resident after " << kChecks << " health checks";
  EXPECT_EQ(s.Wait(true), 0);
}

// A probes file edited to hold a prompt beyond the context fails its round
// (the prompt never reaches the decoder) and leaves the server serving.
TEST(Serve, AProbePromptBeyondTheContextFailsItsRoundAndNothingElse) {
  const std::string probes = test::TempDir("longprobe") + "/p.json";
  const std::string good = test::ReadFile(test::Model("stories260K.probes.json"));
  test::WriteFile(probes, good);
  ServeProcess s(Base("--probes " + probes, "0.2"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  test::WriteFile(probes, json::array({{{"prompt", std::string(3000, 'a') + " "}, {"expect", " b"}}}).dump());
  auto c = s.Client();
  int status = 0;
  for (int i = 0; i < 300 && (status = c.Get("/health")->status) == 200; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(status, 503);
  Post(c, "/v1/completions", Completion("Once upon a time", 8), &status);
  EXPECT_EQ(status, 200) << "the decoder was never handed the over-long prompt";
  test::WriteFile(probes, good);
  for (int i = 0; i < 300 && (status = c.Get("/health")->status) == 503; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(s.Wait(true), 0);
}

TEST(Serve, AWrongAnswerAtStartupRefusesToOpenThePort) {
  const std::string probes = test::TempDir("badprobes") + "/p.json";
  test::WriteFile(probes, R"([{"prompt": "The cat was very", "expect": " purple"}])");
  ServeProcess s(Base("--probes " + probes));
  EXPECT_EQ(s.port(), -1);
  EXPECT_EQ(s.Wait(false), 1);
  EXPECT_NE(s.startup_stdout().find("serve: startup probe: passed=0/1 verdict=FAIL"), std::string::npos)
      << s.startup_stdout();
  EXPECT_NE(s.stderr_text().find("not serving"), std::string::npos) << s.stderr_text();
}

// The reference backend is slow enough that 500 tokens take a while, so a
// hang-up after two chunks is seen long before the request could finish.
TEST(Serve, AClientThatLeavesFreesItsSlotBeforeItsRequestWouldEnd) {
  ServeProcess s(Base("--parallel 1 --backend reference"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  auto probe = s.Client();
  const double before = Metric(probe, "verity_generated_tokens_total");  // the startup probe's
  json longreq = {
      {"model", "stories260K"}, {"prompt", "Once"}, {"max_tokens", 500}, {"stream", true}, {"ignore_eos", true}};
  {
    auto c = s.Client();
    int chunks = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers.emplace("Content-Type", "application/json");
    req.body = longreq.dump();
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 2; };
    c.send(req);  // returns once the receiver refuses: the connection is closed
    EXPECT_EQ(chunks, 2);
  }
  auto c = s.Client();
  for (int i = 0; i < 500 && Metric(probe, "verity_kv_slots_in_use") > 0; i++)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(Metric(probe, "verity_kv_slots_in_use"), 0);
  EXPECT_LT(Metric(probe, "verity_generated_tokens_total") - before, 500)
      << "the request was cancelled, not run to its end";
  int status = 0;
  Post(c, "/v1/completions", Completion("a", 2), &status);
  EXPECT_EQ(status, 200);
  EXPECT_EQ(s.Wait(true), 0);
}

// One slot, no queue, sixteen requests at once: whoever finds the slot taken
// is told 503 with Retry-After, and nothing else goes wrong.
TEST(Serve, AFullServerAnswers503WithRetryAfter) {
  ServeProcess s(Base("--parallel 1 --queue 0 --backend reference"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  json body = {{"model", "stories260K"}, {"prompt", "Once"}, {"max_tokens", 200}, {"ignore_eos", true}};
  std::atomic<int> ok{0}, full{0}, other{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < 16; i++)
    ts.emplace_back([&] {
      auto c = s.Client();
      auto r = c.Post("/v1/completions", body.dump(), "application/json");
      if (r && r->status == 200) ok++;
      else if (r && r->status == 503 && r->get_header_value("Retry-After") == "1") full++;
      else other++;
    });
  for (auto& t : ts) t.join();
  EXPECT_GE(ok.load(), 1) << full.load() << " full, " << other.load() << " other";
  EXPECT_GE(full.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(s.Wait(true), 0);
}

TEST(Serve, SigtermFinishesTheRequestInFlightThenExitsZero) {
  ServeProcess s(Base("--parallel 1 --backend reference"));
  ASSERT_GT(s.port(), 0) << s.stderr_text();
  json body = {
      {"model", "stories260K"}, {"prompt", "Once"}, {"max_tokens", 300}, {"ignore_eos", true}, {"temperature", 0}};
  std::atomic<int> status{0};
  json got;
  std::thread t([&] {
    auto c = s.Client();
    int st = 0;
    got = Post(c, "/v1/completions", body, &st);
    status = st;
  });
  auto c = s.Client();
  auto in_use = [&] {
    auto m = c.Get("/metrics");
    return m && m->body.find("\nverity_kv_slots_in_use 1\n") != std::string::npos;
  };
  for (int i = 0; i < 1000 && !in_use(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ASSERT_TRUE(in_use()) << "the request never took its slot";
  EXPECT_EQ(s.Wait(true), 0) << s.stderr_text();
  EXPECT_NE(s.stderr_text().find("draining 1 request(s)"), std::string::npos) << s.stderr_text();
  t.join();
  EXPECT_EQ(status.load(), 200) << got.dump();
  EXPECT_EQ(got["usage"]["completion_tokens"], 300) << "the request in flight ran to its end";
  EXPECT_NE(s.startup_stdout().find("serve: stopped"), std::string::npos);
}

}  // namespace
}  // namespace verity
