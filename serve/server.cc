#include "serve/server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>
#include <random>

#include "base/build_info.h"
#include "serve/openai_json.h"
#include "serve/peer_socket.h"

namespace verity::serve {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
// The status a non-streaming request whose client left before its answer is
// given and counted with (nginx's name for it); a client that only
// half-closed its socket can still read it, with Connection: close.
constexpr int kClientClosedRequest = 499;
// How often a handler that waits for a token looks at its client's socket.
constexpr auto kHangUpPoll = std::chrono::milliseconds(50);

// Waits until the job has an event or the deadline passes, in slices, looking
// at the client's socket between them: true when the client hung up. So a
// client that leaves while its request is still queued is seen then, before
// its prefill runs, not at the first token.
bool LeftWhileWaiting(Job& job, int fd, Clock::time_point deadline) {
  for (;;) {
    if (PeerHungUp(fd)) return true;
    const auto now = Clock::now();
    if (now >= deadline || job.Ready(std::min(deadline, now + kHangUpPoll))) return false;
  }
}

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) { SendJson(res, e.status, ErrorBody(e)); }

// One request's tokens as text: the stream of deltas, stop strings, the
// finish reason, usage and logprobs, from the scheduler's events.
class Generation {
 public:
  Generation(const CompletionRequest& r, const ServedModel& m, std::shared_ptr<Job> job)
      : r_(r), m_(m), job_(std::move(job)), text_(*m.codec, r.prompt, r.stop) {}

  // Waits for the next event; appends released text to `delta`. False once finished.
  bool Next(Clock::time_point deadline, std::string* delta) {
    if (done_) return false;
    auto e = job_->Next(deadline);
    if (!e) return Fail("request timed out", 504);
    if (e->token) return Token(*e->token, delta);
    if (e->finish == FinishReason::kError) return Fail("the engine failed: " + e->error, 500);
    if (e->finish == FinishReason::kCancelled) return Fail("the request was cancelled: " + e->error, 503);
    finish_ = e->finish == FinishReason::kEos ? "stop" : "length";
    *delta += text_.Take(/*final=*/true);
    done_ = true;
    return false;
  }

  const std::string& finish() const { return finish_; }
  const std::optional<ApiError>& error() const { return error_; }
  Usage usage() const { return {static_cast<int>(r_.prompt.size()), tokens_}; }
  json logprobs() const { return r_.logprobs >= 0 ? LogprobsJson(logs_) : json(nullptr); }

 private:
  bool Token(const TokenEvent& t, std::string* delta) {
    tokens_++;
    if (r_.logprobs >= 0) Log(t);
    prev_ = t.token;
    if (text_.Add(t.token)) {  // a stop string: the text ends before it
      job_->Cancel();
      finish_ = "stop";
      *delta += text_.Take(/*final=*/true);
      done_ = true;
      return false;
    }
    *delta += text_.Take(/*final=*/false);
    return true;
  }
  void Log(const TokenEvent& t) {
    const int prev = prev_ >= 0 ? prev_ : r_.prompt.back();
    TokenLog l{m_.codec->TokenText(prev, t.token), t.logprob, {}};
    for (const auto& [id, lp] : t.top) l.top.push_back({m_.codec->TokenText(prev, id), lp});
    logs_.push_back(std::move(l));
  }
  bool Fail(const std::string& message, int status) {
    job_->Cancel();
    error_ = ApiError{status, status == 500 ? "server_error" : "timeout_error", message, "", ""};
    done_ = true;
    return false;
  }

  const CompletionRequest& r_;
  const ServedModel& m_;
  std::shared_ptr<Job> job_;
  TextStream text_;
  std::vector<TokenLog> logs_;
  std::string finish_;
  std::optional<ApiError> error_;
  int tokens_ = 0, prev_ = -1;
  bool done_ = false;
};

JobParams ParamsOf(const CompletionRequest& r) {
  JobParams p;
  p.prompt = r.prompt;
  p.max_tokens = r.max_tokens;
  // top_p 0 keeps only the most likely token (OpenAI's sense); run.c's sampler reads 0 as "no nucleus".
  p.temperature = r.top_p == 0.0f ? 0.0f : r.temperature;
  p.top_p = r.top_p;
  // run.c's xorshift state 0 stays 0 (every draw the same): seed 0 is mapped to a fixed odd constant.
  p.seed = r.seed != 0 ? r.seed : 0x9E3779B97F4A7C15ull;
  p.ignore_eos = r.ignore_eos;
  p.logprobs = r.logprobs;
  return p;
}

// The endpoint label of a request in /metrics: one of the served paths, or
// "other", so that clients asking for arbitrary paths cannot grow the series.
std::string EndpointLabel(const std::string& path) {
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"})
    if (path == p) return p;
  return "other";
}

json RoundJson(const ProbeRound& r) {
  json probes = json::array();
  for (const ProbeOutcome& o : r.probes)
    probes.push_back({{"prompt", o.prompt}, {"expected", o.expect}, {"actual", o.got}, {"pass", o.pass}});
  json j = {
      {"unix_ms", r.unix_ms}, {"pass", r.pass}, {"passed", r.passed()}, {"total", r.probes.size()}, {"probes", probes}};
  if (!r.error.empty()) j["error"] = r.error;
  return j;
}

// Where a completion's answer goes: its response, and its count in /metrics.
struct Answer {
  httplib::Response& res;
  Metrics& metrics;
  const std::string& endpoint;
};

// The request, or null once its refusal (not a valid request, or logprobs
// asked of a stream) is sent and counted.
std::shared_ptr<CompletionRequest> ParseOrRefuse(bool chat, const std::string& body, const ServedModel& served,
                                                 const Answer& a) {
  auto parsed = ParseCompletionRequest(body, chat, served, std::random_device{}());
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    SendError(a.res, *e);
    a.metrics.Request(a.endpoint, e->status);
    return nullptr;
  }
  auto r = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(std::move(parsed)));
  if (r->stream && r->logprobs >= 0) {
    SendError(a.res,
              {400, "invalid_request_error", "logprobs with stream is not supported by verity serve", "logprobs", ""});
    a.metrics.Request(a.endpoint, 400);
    return nullptr;
  }
  return r;
}

// The request's job, queued; or null once the 503 of a full queue or a
// draining server is sent and counted.
std::shared_ptr<Job> QueueOrRefuse(const CompletionRequest& r, Scheduler& scheduler, const Answer& a) {
  auto job = std::make_shared<Job>(ParamsOf(r));
  const auto admitted = scheduler.Submit(job);
  if (admitted != Scheduler::Admission::kQueued) {
    a.res.set_header("Retry-After", "1");
    SendError(a.res, {503, "server_error",
                      admitted == Scheduler::Admission::kFull ? "the queue is full; retry later"
                                                              : "the server is shutting down",
                      "", ""});
    a.metrics.Request(a.endpoint, 503);
    return nullptr;
  }
  return job;
}

// A non-streamed answer: the whole text once the job finishes, or 499 when
// the client (its socket `fd`) left first.
void AnswerWhole(Job& job, Generation& gen, const CompletionHead& head, Clock::time_point deadline, int fd,
                 const Answer& a) {
  std::string text;
  bool gone = false;
  while (!(gone = LeftWhileWaiting(job, fd, deadline)) && gen.Next(deadline, &text)) {
  }
  if (gone) {
    job.Cancel();
    a.res.set_header("Connection", "close");
    SendError(a.res, {kClientClosedRequest, "invalid_request_error", "the client closed its connection", "", ""});
    a.metrics.Request(a.endpoint, kClientClosedRequest);
    return;
  }
  if (gen.error()) {
    SendError(a.res, *gen.error());
  } else {
    SendJson(a.res, 200, CompletionBody(head, text, gen.finish(), gen.usage(), gen.logprobs()));
  }
  a.metrics.Request(a.endpoint, a.res.status);
}

}  // namespace

Server::Server(ServerOptions options, const ServedModel& served, Scheduler& scheduler, Prober& prober, Metrics& metrics)
    : opt_(std::move(options)),
      served_(served),
      scheduler_(scheduler),
      prober_(prober),
      metrics_(metrics),
      http_(std::make_unique<httplib::Server>()),
      created_(std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                   .count()),
      artifact_sha256_(ArtifactSha256()) {
  Routes();
}

Server::~Server() = default;

Status Server::Bind() {
  const int threads = opt_.handler_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(opt_.max_body_bytes);
  http_->set_read_timeout(opt_.io_timeout_s, 0);
  http_->set_write_timeout(opt_.io_timeout_s, 0);
  // Connections kept for many requests: a reconnect costs a handshake (and see the backlog below).
  http_->set_keep_alive_max_count(100000);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT, with which a
  // second server on a port in use binds silently and takes half its traffic.
  int listen_fd = -1;
  http_->set_socket_options([&listen_fd](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    listen_fd = sock;
  });
  port_ = opt_.port == 0 ? http_->bind_to_any_port(opt_.host)
                         : (http_->bind_to_port(opt_.host, opt_.port) ? opt_.port : -1);
  if (port_ < 0)
    return Status::Error("--host " + opt_.host + " --port " + std::to_string(opt_.port) +
                         ": cannot bind (in use, or not an address of this machine)");
  // Debian's libcpp-httplib listens with a backlog of 5: a burst of more
  // connections loses SYNs, and each client waits out a 1 s retransmit
  // (seen as TTFT p99 ~1024 ms at 8 clients). Listening again raises it.
  if (listen_fd >= 0) ::listen(listen_fd, 1024);
  return OkStatus();
}

void Server::Run() {
  http_->listen_after_bind();
  run_returned_ = true;
}

// httplib's stop() does nothing before listening has begun: a signal that
// arrives between Bind() and Run() would be lost, and the server would then
// ignore every later one. So wait for Run to be listening (or to have ended).
void Server::Stop() {
  while (!http_->is_running() && !run_returned_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  http_->stop();
}

void Server::Routes() {
  // Every /v1/ request must carry the key when one is set; /health and
  // /metrics stay open to the monitor.
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + opt_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, {401, "invalid_request_error", "Incorrect API key provided (Authorization: Bearer KEY)", "",
                    "invalid_api_key"});
    res.set_header("Connection", "close");  // the body was never read: nothing more can be parsed on this connection
    metrics_.Request(EndpointLabel(req.path), 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  http_->set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, {500, "server_error", "internal error: " + what, "", ""});
    metrics_.Request(EndpointLabel(req.path), 500);
  });
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string msg = res.status == 413   ? "the body exceeds " + std::to_string(opt_.max_body_bytes) + " bytes"
                            : res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                                                : "HTTP " + std::to_string(res.status);
    SendError(res, {res.status, "invalid_request_error", msg, "", ""});
    metrics_.Request(EndpointLabel(req.path), res.status);
  });
  http_->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(
        res, 200,
        {{"object", "list"},
         {"data", json::array({{{"id", served_.id},
                                {"object", "model"},
                                {"created", created_},
                                {"owned_by", "verity"},
                                {"meta", {{"vocab_size", served_.vocab}, {"context_length", served_.context}}}}})}});
    metrics_.Request("/v1/models", 200);
  });
  http_->Get("/health", [this](const httplib::Request& req, httplib::Response& res) {
    const ProbeRound last = prober_.last();
    const bool ok = prober_.healthy();
    json body = {
        {"status", ok ? "ok" : "unhealthy"},
        {"model", served_.id},
        {"last_probe", RoundJson(last)},
        {"build", {{"id", BuildId()}, {"artifact_sha256", artifact_sha256_}, {"corruption", CorruptionName()}}}};
    if (req.has_param("history")) {
      json h = json::array();
      for (const ProbeRound& r : prober_.history()) h.push_back(RoundJson(r));
      body["history"] = h;
    }
    SendJson(res, ok ? 200 : 503, body);
    metrics_.Request("/health", res.status);
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.Render(), "text/plain; version=0.0.4");
    metrics_.Request("/metrics", 200);
  });
  auto peer = [](const httplib::Request& req) {
    return Peer{req.remote_addr, req.local_addr, req.remote_port, req.local_port};
  };
  http_->Post("/v1/completions", [this, peer](const httplib::Request& req, httplib::Response& res) {
    Completion(false, req.body, peer(req), &res);
  });
  http_->Post("/v1/chat/completions", [this, peer](const httplib::Request& req, httplib::Response& res) {
    Completion(true, req.body, peer(req), &res);
  });
}

void Server::Completion(bool chat, const std::string& body, const Peer& peer, void* response) {
  httplib::Response& res = *static_cast<httplib::Response*>(response);
  const std::string endpoint = chat ? "/v1/chat/completions" : "/v1/completions";
  const Answer answer{res, metrics_, endpoint};
  const std::shared_ptr<CompletionRequest> r = ParseOrRefuse(chat, body, served_, answer);
  if (!r) return;
  const std::shared_ptr<Job> job = QueueOrRefuse(*r, scheduler_, answer);
  if (!job) return;
  const CompletionHead head{(chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++), served_.id, created_, chat};
  const auto deadline = Clock::now() + std::chrono::seconds(opt_.request_timeout_s);
  auto gen = std::make_shared<Generation>(*r, served_, job);
  if (!r->stream) {
    // Nothing is written until the last token, so a client that leaves is
    // seen by its socket's hang-up between tokens (a stream's failed write
    // does it for SSE): the job is cancelled and frees its slot within a step.
    const int fd = FindPeerSocket(peer.addr, peer.port, peer.local_addr, peer.local_port);
    AnswerWhole(*job, *gen, head, deadline, fd, answer);
    return;
  }
  // Server-sent events: a chunk per released piece of text, the finish, usage if asked, [DONE].
  metrics_.Request(endpoint, 200);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [r, job, gen, head, deadline, peer, fd = -2, first = true](size_t, httplib::DataSink& sink) mutable {
        if (fd == -2) fd = FindPeerSocket(peer.addr, peer.port, peer.local_addr, peer.local_port);
        if (LeftWhileWaiting(*job, fd, deadline)) {
          job->Cancel();  // gone before a write could tell: free its slot, or never prefill it
          return false;
        }
        auto send = [&](const json& j) {
          const std::string s = "data: " + Dump(j) + "\n\n";
          return sink.write(s.data(), s.size());
        };
        std::string delta;
        const bool more = gen->Next(deadline, &delta);
        if (gen->error()) {
          send(ErrorBody(*gen->error()));
        } else if ((!delta.empty() || first) && !send(ChunkBody(head, delta, "", first))) {
          job->Cancel();  // the client is gone: free its slot
          return false;
        }
        first = false;
        if (more) return true;
        if (!gen->error()) send(ChunkBody(head, "", gen->finish(), false));
        if (!gen->error() && r->include_usage) send(UsageChunk(head, gen->usage()));
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        return true;
      },
      [job](bool) { job->Cancel(); });
}

}  // namespace verity::serve
