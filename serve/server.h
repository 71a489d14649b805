// The HTTP face of `verity serve` (cpp-httplib): the OpenAI completions,
// chat and models endpoints, /health (the prober's verdict) and /metrics.
// docs/serve.md lists the endpoints, fields and errors.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "serve/health.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/scheduler.h"

namespace httplib {
class Server;
}

namespace verity::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;      // 0: any free port (port() says which)
  std::string api_key;  // empty: no key asked for
  size_t max_body_bytes = 1 << 20;
  int io_timeout_s = 30;        // a client that sends or reads nothing this long is dropped
  int request_timeout_s = 600;  // a request that has not finished by then is cancelled (504)
  int handler_threads = 8;
};

class Server {
 public:
  Server(ServerOptions options, const ServedModel& served, Scheduler& scheduler, Prober& prober, Metrics& metrics);
  ~Server();
  // Binds the port; an error names the host and port.
  [[nodiscard]] Status Bind();
  int port() const { return port_; }
  // Serves until Stop() (returns then).
  void Run();
  // Stops accepting connections; in-flight requests finish first.
  void Stop();

 private:
  void Routes();
  // The two ends of a request's connection (serve/peer_socket.h finds its socket).
  struct Peer {
    std::string addr, local_addr;
    int port = -1, local_port = -1;
  };
  void Completion(bool chat, const std::string& body, const Peer& peer, void* response);

  ServerOptions opt_;
  const ServedModel& served_;
  Scheduler& scheduler_;
  Prober& prober_;
  Metrics& metrics_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> run_returned_{false};
  const int64_t created_;
  // /health's build identity, hashed once here, before the port opens.
  const std::string artifact_sha256_;
};

}  // namespace verity::serve
