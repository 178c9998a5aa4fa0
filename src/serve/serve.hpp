// `sprofil serve`: an HTTP server, compatible with Go's net/http/pprof as Parca, Grafana Alloy
// (pyroscope.scrape) and `go tool pprof` use it, over this user's profiled processes. A CPU
// profile is the delta of two live snapshots taken `seconds` apart, as profile.proto.
// docs/fleet.md describes the endpoints, the labels and the security rules.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "profile/profile.hpp"

namespace sprofil::serve {

// A process the server can look at.
struct Target {
  int32_t pid = 0;
  std::string comm;
};

// Where snapshots come from (the live transport; tests may supply their own).
class Source {
 public:
  virtual ~Source() = default;
  // This user's profiled processes that can be looked at now.
  virtual std::vector<Target> targets() = 0;
  // A snapshot of process pid; false with *error when it cannot be had (gone, refused).
  // *exited is set when the process has ended and the snapshot is its final profile.
  virtual bool snapshot(int32_t pid, profile::Profile* out, bool* exited, std::string* error) = 0;
};

// The live transport's processes (live_source.cpp).
std::unique_ptr<Source> live_source();

struct Options {
  std::string host = "127.0.0.1";
  int port = 6060;            // 0 = any free port (Server::port() tells which)
  std::string token;          // when set, every request must carry "Authorization: Bearer TOKEN"
  std::vector<int32_t> pids;  // serve only these; empty = every target of the source
  int default_seconds = 30;   // as Go's handler
  int max_seconds = 3600;     // longer requests get 400
  int threads = 16;           // concurrent requests (scrapes wait in their own thread)
  // Called for each request served: method, path, status (for the server's log).
  std::function<void(const std::string&, const std::string&, int)> log;
};

// Whether host names a loopback address (127.0.0.0/8, ::1, localhost).
bool is_loopback(const std::string& host);

class Server {
 public:
  Server(Options options, Source& source);
  ~Server();
  // Binds; false with *error (address in use, non-loopback without a token, ...).
  bool bind(std::string* error);
  int port() const;
  // Serves until stop() (from another thread or a signal-handling thread).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sprofil::serve
