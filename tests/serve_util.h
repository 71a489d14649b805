// A real `verity serve` in the background for the serving tests: started on
// a free port, its stdout read until it says where it listens (or exits),
// stopped by SIGTERM. Its stderr goes to a file the tests read.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace verity::test {

class ServeProcess {
 public:
  // Runs `bin serve ARGS --port 0`; waits up to `wait_s` for the listening line.
  explicit ServeProcess(const std::string& args, const std::string& bin = VerityBin(), double wait_s = 120) {
    err_path_ = TempDir("serve") + "/stderr.txt";
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      close(out[0]);
      const std::string cmd = "exec " + bin + " serve --port 0 " + args + " 2>" + err_path_;
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    out_ = fdopen(out[0], "r");
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    char line[4096];
    while (std::chrono::steady_clock::now() < until && std::fgets(line, sizeof line, out_)) {
      stdout_ += line;
      const std::string l = line;
      const std::string key = "serve: listening on http://127.0.0.1:";
      if (l.rfind(key, 0) == 0) {
        port_ = std::stoi(l.substr(key.size()));
        break;
      }
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && exit_code_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_) std::fclose(out_);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  const std::string& startup_stdout() const { return stdout_; }
  std::string stderr_text() const { return ReadFile(err_path_); }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  // Waits for the process to exit (SIGTERM first when `term`); its exit code, or -1 on timeout.
  int Wait(bool term, double wait_s = 60) {
    if (term) kill(pid_, SIGTERM);
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
    while (std::chrono::steady_clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        char line[4096];
        while (out_ && std::fgets(line, sizeof line, out_)) stdout_ += line;
        return exit_code_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  int port_ = -1, exit_code_ = -1;
  std::string stdout_, err_path_;
};

}  // namespace verity::test
