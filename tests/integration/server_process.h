// ServerProcess: runs the real `matricxon serve` binary on port 0 for
// integration tests, finds its port in the log line
// "listening on http://127.0.0.1:PORT", and stops it with a signal.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace mx::testing {

inline std::string BinaryPath() { return std::string(MATRICXON_BINARY_DIR) + "/matricxon"; }

class ServerProcess {
 public:
  ~ServerProcess() { Kill(); }

  // Kills the server (if one runs) and waits until it is gone, so that
  // nothing writes to its folders afterwards (a test removes them next).
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  // Starts `matricxon serve --port 0 <args>` with `env` added; waits for the
  // listening line. False (with the log in *error) when it does not come.
  bool Start(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
             const std::string& log_path, std::string* error) {
    log_path_ = log_path;
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = std::fopen(log_path.c_str(), "w");
      if (log != nullptr) {
        dup2(fileno(log), STDERR_FILENO);
        dup2(fileno(log), STDOUT_FILENO);
      }
      // Saved caches stay beside the log unless a test names the folder, so
      // that tests never share (or leave) cache files.
      if (env.count("MATRICXON_PROMPT_CACHE_DIR") == 0) {
        std::string dir = log_path.substr(0, log_path.find_last_of('/') + 1) + "prompt_cache";
        setenv("MATRICXON_PROMPT_CACHE_DIR", dir.c_str(), 1);
      }
      for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
      std::vector<std::string> argv_s = {BinaryPath(), "serve", "--port", "0"};
      argv_s.insert(argv_s.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    const std::string marker = "listening on http://127.0.0.1:";
    for (int i = 0; i < 300; ++i) {
      std::string log = Log();
      if (auto p = log.find(marker); p != std::string::npos) {
        port_ = std::atoi(log.c_str() + p + marker.size());
        if (port_ > 0) return true;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *error = "server exited at start-up: " + log;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *error = "no listening line in 15 s: " + Log();
    return false;
  }

  // Sends `sig` and waits; returns the raw wait status (-1 when no server
  // runs: kill(-1, ...) would signal every process of the user).
  int StopWith(int sig) {
    if (pid_ <= 0) return -1;
    kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

  // Waits up to `timeout_ms` for the server to exit by itself (after a
  // signal the test sent); true with its raw wait status in *status when it
  // did. When it did not, it keeps running (Kill() ends it).
  bool WaitExit(int timeout_ms, int* status) {
    if (pid_ <= 0) return false;
    for (int waited = 0; waited <= timeout_ms; waited += 20) {
      if (waitpid(pid_, status, WNOHANG) == pid_) {
        pid_ = -1;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  std::string Log() const {
    std::ifstream f(log_path_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

}  // namespace mx::testing
