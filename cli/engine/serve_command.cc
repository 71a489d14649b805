// verity serve: load, audit, probe, then open the port (docs/serve.md).
// Nothing is served until the checkpoint audit (Hugging Face directories)
// and the coherence probe have passed through the serving path itself.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "cli/engine/commands.h"
#include "engine/slots.h"
#include "serve/server.h"
#include "verify/audit.h"

namespace verity::cli {
namespace {

struct ServeFlags {
  std::string model, tokenizer, probes, dtype = "f32", backend = "fast", chat_template, name;
  serve::ServerOptions server;
  int ctx = kModelContext, parallel = 4, queue = 16, threads = 0;
  double probe_every = 60, drain_s = 30;
  bool no_chat = false;
};

bool IsDirectory(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::string Stem(const std::string& path) {
  std::string s = path;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  s = s.substr(s.find_last_of('/') == std::string::npos ? 0 : s.find_last_of('/') + 1);
  const size_t dot = s.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? s : s.substr(0, dot);
}

// The chat template the server renders, or the reason chat is refused. A
// model's own template must parse (serve/jinja.h's subset) and render a
// one-message conversation, or the server does not start.
Status ChooseChat(const ServeFlags& f, std::unique_ptr<serve::ChatTemplate>* chat, std::string* reason) {
  if (f.no_chat) {
    *reason = "chat is off on this server (--no-chat): use /v1/completions";
    return OkStatus();
  }
  VERITY_ASSIGN_OR_RETURN(std::unique_ptr<serve::ChatTemplate> own, serve::ModelChatTemplateOf(f.model));
  if (own) {
    if (!f.chat_template.empty())
      return Status::Error("--chat-template " + f.chat_template +
                           ": the model has its own chat template "
                           "(tokenizer_config.json), which is the one it was trained with");
    auto probe = own->Render({{"user", "Hello"}});
    if (!probe.ok())
      return Status::Error("the model's chat template cannot render a one-message conversation: " +
                           probe.status().message());
    std::printf("serve: chat: %s, %zu bytes for a one-message conversation\n", own->name(), probe->size());
    *chat = std::move(own);
    return OkStatus();
  }
  if (f.chat_template.empty()) {
    *reason = "the model has no chat template; the operator can choose one with --chat-template chatml";
    return OkStatus();
  }
  VERITY_ASSIGN_OR_RETURN(*chat, serve::BuiltinChatTemplate(f.chat_template));
  return OkStatus();
}

// A Hugging Face directory is audited as `verity audit` does; files have no index to audit.
bool AuditPasses(const std::string& model) {
  if (!IsDirectory(model)) {
    std::printf("serve: audit: not applicable (%s is a single file)\n", model.c_str());
    return true;
  }
  AuditReport a = AuditCheckpoint(model, /*experts_elsewhere=*/false);
  for (const std::string& line : a.findings) std::printf("%s\n", line.c_str());
  std::printf("serve: %s\n", a.Summary().c_str());
  return a.pass;
}

bool StartupProbePasses(serve::Prober& prober) {
  const serve::ProbeRound r = prober.RunRound();
  for (const serve::ProbeOutcome& o : r.probes)
    std::printf("serve: %s %s -> expected \"%s\", got \"%.60s\"\n", o.pass ? "PASS" : "FAIL", o.prompt.c_str(),
                o.expect.c_str(), o.got.c_str());
  if (!r.error.empty()) std::printf("serve: probe error: %s\n", r.error.c_str());
  std::printf("serve: startup %s\n", r.Summary().c_str());
  std::fflush(stdout);
  return r.pass;
}

// SIGTERM or SIGINT: stop taking requests, let queued and running ones
// finish (at most drain_s), then close the port.
std::thread DrainOnSignal(serve::Scheduler& s, serve::Server& server, double drain_s, sigset_t set) {
  return std::thread([&s, &server, drain_s, set] {
    int sig = 0;
    sigwait(&set, &sig);
    std::fprintf(stderr, "verity: serve: signal %d: draining %d request(s), at most %.0f s\n", sig, s.pending(),
                 drain_s);
    s.Drain();
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(drain_s);
    while (s.pending() > 0 && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // Past the deadline, what is left is cancelled (its clients get 503), so
    // the handler threads the server joins are not still waiting on it.
    if (s.pending() > 0) s.Stop();
    server.Stop();
  });
}

int RunServe(ServeFlags f) {
  // Blocked before any thread exists, so only the drain thread receives them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
  if (f.threads > 0) setenv("VERITY_THREADS", std::to_string(f.threads).c_str(), 1);
  if (f.probes.empty()) f.probes = DefaultProbesPath(f.model);
  if (auto s = CheckRegularFile(f.probes, "--probes (the coherence probe: health is a correct answer)"); !s.ok())
    return Fail(s);
  if (!AuditPasses(f.model)) return 1;
  auto dtype = kernels::DTypeFromName(f.dtype);
  if (!dtype.ok()) return Fail(Status::Error("--dtype: " + dtype.status().message()));
  auto model = LoadModel(f.model, *dtype, f.ctx);
  if (!model.ok()) return Fail(model.status());
  auto tok = LoadModelTokenizer(f.tokenizer.empty() ? f.model : f.tokenizer, **model);
  if (!tok.ok()) return Fail(tok.status());
  std::unique_ptr<serve::ChatTemplate> chat;
  serve::ServedModel served;
  if (auto s = ChooseChat(f, &chat, &served.no_chat_reason); !s.ok()) return Fail(s);
  auto backend = kernels::MakeBackend(f.backend);
  if (!backend.ok()) return Fail(backend.status());
  auto slots = SlotDecoder::Create(**model, std::move(backend).value(), f.parallel);
  if (!slots.ok()) return Fail(slots.status());
  serve::TextCodec codec(**tok, (*model)->config);
  served.id = f.name.empty() ? Stem(f.model) : f.name;
  served.codec = &codec;
  served.chat = chat.get();
  served.context = (*slots)->context();
  served.vocab = (*model)->config.vocab_size;
  const Footprint fp = FootprintOf(**model);
  std::printf("serve: %s (%s, %s backend): %d slots x %d positions, KV cache %.1f MiB, weights %.1f MiB; chat: %s\n",
              served.id.c_str(), kernels::DTypeName((*model)->dtype), (*slots)->backend_name(), f.parallel,
              served.context, (*slots)->kv_cache_bytes() / 1048576.0, fp.resident_weight_bytes / 1048576.0,
              chat ? chat->name() : "off");
  serve::Metrics metrics;
  serve::Scheduler scheduler(**slots, codec, metrics, f.queue);
  serve::Prober prober(scheduler, codec, f.probes, metrics);
  if (!StartupProbePasses(prober)) {
    std::fprintf(stderr, "verity: error: serve: the coherence probe failed before the port opened (%s): not serving\n",
                 f.probes.c_str());
    return 1;
  }
  // A keep-alive connection holds a handler thread while idle (up to 5 s): headroom for monitors and reconnects.
  f.server.handler_threads = std::max(8, f.parallel + f.queue + 16);
  serve::Server server(f.server, served, scheduler, prober, metrics);
  if (auto s = server.Bind(); !s.ok()) return Fail(s);
  std::printf("serve: listening on http://%s:%d (model %s)\n", f.server.host.c_str(), server.port(), served.id.c_str());
  std::fflush(stdout);
  if (f.probe_every > 0) prober.Every(f.probe_every);
  std::thread drain = DrainOnSignal(scheduler, server, f.drain_s, set);
  server.Run();
  // Run() also returns when listening fails: wake the drain thread if no signal did.
  pthread_kill(drain.native_handle(), SIGTERM);
  prober.Stop();
  scheduler.Stop();
  drain.join();
  std::printf("serve: stopped\n");
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, Registry& reg) {
  auto f = std::make_shared<ServeFlags>();
  auto* sub = app.add_subcommand("serve",
                                 "OpenAI-compatible server (/v1/completions, /v1/chat/completions, /v1/models, "
                                 "/health, /metrics) whose health is the coherence probe's answer (docs/serve.md)");
  sub->add_option("--model", f->model, "llama2.c .bin, GGUF file or Hugging Face directory")->required();
  sub->add_option("--tokenizer", f->tokenizer, "tokenizer file (default: found with the model)");
  sub->add_option("--host", f->server.host, "address to listen on")->capture_default_str();
  sub->add_option("--port", f->server.port, "port (0: any free one, printed)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  sub->add_option("--ctx", f->ctx, kCtxHelp);
  sub->add_option("--parallel", f->parallel, "KV-cache slots: sequences decoded together")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  sub->add_option("--queue", f->queue, "requests that may wait for a slot; more get 503 + Retry-After")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  sub->add_option("--dtype", f->dtype, "weights: f32, bf16 or q8_0")->capture_default_str();
  sub->add_option("--backend", f->backend, "reference, fast or cuda")->capture_default_str();
  sub->add_option("--threads", f->threads, "compute threads (default: VERITY_THREADS, else every core)")
      ->check(CLI::Range(1, 1024));
  sub->add_option("--api-key", f->server.api_key, "require Authorization: Bearer KEY on /v1/");
  sub->add_option("--probes", f->probes, "probes JSON (default: beside the model); read again every round");
  sub->add_option("--probe-every", f->probe_every, "seconds between probe rounds (0: at startup only)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  sub->add_option("--chat-template", f->chat_template, "for a model without one: a format verity renders (chatml)");
  sub->add_flag("--no-chat", f->no_chat, "serve completions only (a model whose own template verity cannot render)");
  sub->add_option("--model-name", f->name, "the model id /v1/models lists (default: the file's stem)");
  sub->add_option("--max-body-bytes", f->server.max_body_bytes, "larger request bodies get 413")->capture_default_str();
  sub->add_option("--timeout", f->server.request_timeout_s, "seconds a request may take (then 504)")
      ->capture_default_str()
      ->check(CLI::Range(1, 86400));
  sub->add_option("--io-timeout", f->server.io_timeout_s, "seconds a silent client is kept")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  sub->add_option("--drain", f->drain_s, "seconds SIGTERM waits for in-flight requests")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  reg.On(sub, [f] { return RunServe(*f); });
}

}  // namespace verity::cli
