// The per-box measurement lock. Two submissions timing on one box at once
// would interleave their samples and corrupt both, whatever ledger each
// writes to; so every measurement holds an exclusive flock on a file named
// after the box fingerprint, across all its ABBA rounds (not its parity run).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "base/status.h"

namespace verity::measure {

class BoxLock {
 public:
  // Takes the lock `<dir>/verity-box-<fingerprint prefix>.lock`, waiting as
  // long as another process holds it; `waiting` is told once, naming the
  // holder, when the lock is busy. Errors name the lock file.
  static Result<std::unique_ptr<BoxLock>> Acquire(const std::string& dir, const std::string& fingerprint,
                                                  const std::function<void(const std::string&)>& waiting);
  ~BoxLock();
  BoxLock(const BoxLock&) = delete;
  BoxLock& operator=(const BoxLock&) = delete;
  const std::string& path() const { return path_; }
  // Who holds it (this process): recorded with the measurement.
  int holder_pid() const { return pid_; }
  const std::string& holder_host() const { return host_; }

 private:
  BoxLock(int fd, std::string path, int pid, std::string host)
      : fd_(fd), path_(std::move(path)), pid_(pid), host_(std::move(host)) {}
  int fd_;
  std::string path_;
  int pid_;
  std::string host_;
};

}  // namespace verity::measure
