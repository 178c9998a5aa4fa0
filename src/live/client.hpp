// The host side of live profiles (docs/live.md): fetching snapshots from running programs,
// listing them, and the server `sprofil gperf --serve` runs to receive osProfileFlush pushes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profile/profile.hpp"

namespace sprofil::live {

// "1234" -> <per-user dir>/1234.sock; anything else is taken as a socket path.
bool socket_of(const std::string& pid_or_path, std::string* socket, std::string* error);

// One snapshot: the raw .sprof image, and parsed by the one reader (profile::parse_profile),
// a run profile of one process (`sprofil record --live`'s answer, packed) taken as that
// process's own profile. Bounded: at most timeout_ms for the whole exchange.
bool fetch_image(const std::string& socket, std::vector<uint8_t>* image, std::string* error,
                 int timeout_ms = 10000);
bool fetch_profile(const std::string& socket, profile::Profile* out, std::string* error,
                   int timeout_ms = 10000);

struct Target {
  int pid = 0;
  std::string socket;
  std::string command;  // /proc/PID/cmdline, arguments joined by spaces
};
// The processes of this user that serve live profiles (their socket accepts a connection).
std::vector<Target> list_targets(std::string* error);

// The gperf server: listens on `socket` (a stale socket there is replaced; a live server there
// is an error), receives pushed images.
class PushServer {
 public:
  ~PushServer();
  bool open(const std::string& socket, std::string* error);
  // Waits up to timeout_ms for one push. Returns 1 with the image, 0 on timeout or a rejected
  // client (why in *error, may be empty), -1 on a fatal error.
  int receive(std::vector<uint8_t>* image, int* peer_pid, std::string* error, int timeout_ms);
  void close();

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace sprofil::live
