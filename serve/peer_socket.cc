#include "serve/peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

namespace verity::serve {
namespace {

// The address and port of one end of a socket, as text and a number.
bool End(int fd, bool peer, std::string* addr, int* port) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  auto* sa = reinterpret_cast<sockaddr*>(&ss);
  if ((peer ? getpeername(fd, sa, &len) : getsockname(fd, sa, &len)) != 0) return false;
  char text[INET6_ADDRSTRLEN] = {0};
  if (ss.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
    if (!inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text))) return false;
    *port = ntohs(in->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (!inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text))) return false;
    *port = ntohs(in6->sin6_port);
  } else {
    return false;
  }
  *addr = text;
  return true;
}

// inet_ntop leaves out an IPv6 address's scope ("fe80::1%eth0"); so does the match.
std::string Unscoped(const std::string& addr) { return addr.substr(0, addr.find('%')); }

}  // namespace

int FindPeerSocket(const std::string& peer_addr, int peer_port, const std::string& local_addr, int local_port) {
  const std::string peer = Unscoped(peer_addr), local = Unscoped(local_addr);
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    std::string addr, self;
    int port = -1, lport = -1;
    if (End(static_cast<int>(fd), /*peer=*/true, &addr, &port) && port == peer_port && addr == peer &&
        End(static_cast<int>(fd), /*peer=*/false, &self, &lport) && lport == local_port && self == local) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

bool PeerHungUp(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace verity::serve
