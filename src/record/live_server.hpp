// `sprofil record --live` sampling from outside (docs/live.md): record serves each of the
// command's running processes on its own socket, <per-user dir>/<pid>.sock, with the protocol
// and checks of the agent's service (live::serve_connection), from the images record keeps
// (Agentless::live_image). The host tools (list, fetch, gperf, top, serve) cannot tell it
// from a process's own service. Nothing is added to the program.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "record/agentless.hpp"

namespace sprofil::record {

class LiveServer {
 public:
  explicit LiveServer(Agentless* source) : source_(source) {}
  ~LiveServer() { stop(); }
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  // Starts the thread that keeps a socket for each running process and answers on them.
  // False, with *why, where the per-user directory cannot be used.
  bool start(std::string* why);
  // Ends the thread and removes every socket it made.
  void stop();

  // One request's context (the source's ctx).
  struct Ask {
    Agentless* source;
    pid_t pid;
  };

 private:
  void run();
  void sync();  // a socket for each running process, none for the others
  bool open_socket(pid_t pid);
  void close_socket(pid_t pid);

  Agentless* source_;
  std::string dir_;
  std::map<pid_t, int> listening_;  // pid -> listening socket
  std::set<pid_t> refused_;         // whose socket could not be made: not tried again
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace sprofil::record
