#include "measure/box_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace verity::measure {
namespace {
std::string ReadHolder(int fd) {
  char buf[256] = {0};
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("unknown holder");
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
}  // namespace

Result<std::unique_ptr<BoxLock>> BoxLock::Acquire(const std::string& dir, const std::string& fingerprint,
                                                  const std::function<void(const std::string&)>& waiting) {
  const std::string path = dir + "/verity-box-" + fingerprint.substr(0, 16) + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return Status::Error(path + ": cannot open the box lock: " + std::strerror(errno));
  fchmod(fd, 0666);  // every user on the box shares one lock, whatever the creator's umask
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      close(fd);
      return Status::Error(path + ": cannot lock: " + std::strerror(errno));
    }
    if (waiting) waiting("waiting for the box lock " + path + " (held by " + ReadHolder(fd) + ")");
    while (flock(fd, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      close(fd);
      return Status::Error(path + ": cannot lock: " + std::strerror(errno));
    }
  }
  // Say who holds it, for whoever waits next (a lock directory may be shared between hosts).
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown");
  const std::string me = "pid " + std::to_string(getpid()) + " host " + host + "\n";
  // Written before truncating, so a waiter never reads an empty file.
  if (pwrite(fd, me.data(), me.size(), 0) < 0 || ftruncate(fd, static_cast<off_t>(me.size())) != 0) {
    // Only the waiting message loses its detail; the lock itself is held.
  }
  return std::unique_ptr<BoxLock>(new BoxLock(fd, path, static_cast<int>(getpid()), host));
}

BoxLock::~BoxLock() {
  flock(fd_, LOCK_UN);
  close(fd_);
}

}  // namespace verity::measure
