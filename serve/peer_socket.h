// The accepted socket behind an HTTP request, for a handler that must notice
// its client leaving while it waits (a non-streaming completion writes
// nothing until its last token). Debian's cpp-httplib 0.11 hands a handler
// the peer's address and port but not the socket, so it is found among the
// process's descriptors by its two ends.
#pragma once

#include <string>

namespace verity::serve {

// The descriptor of the connected TCP socket whose ends are
// `local_addr`:`local_port` and `peer_addr`:`peer_port` (as cpp-httplib
// prints them: "127.0.0.1", "::1"; an IPv6 scope "%eth0" is ignored); -1 if
// there is none. The connection stays open while its handler runs (httplib
// closes it on the same thread afterwards), so the descriptor is valid until
// the handler returns.
[[nodiscard]] int FindPeerSocket(const std::string& peer_addr, int peer_port, const std::string& local_addr,
                                 int local_port);

// True iff the peer has closed its end or the socket has failed (poll's
// POLLRDHUP, POLLHUP or POLLERR, without waiting). A pipelined next request
// (readable data) is not a hang-up.
[[nodiscard]] bool PeerHungUp(int fd);

}  // namespace verity::serve
