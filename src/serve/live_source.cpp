// The snapshots `sprofil serve` works on: the live transport (src/live), which only reaches
// this user's processes (per-user socket directory, peer credentials checked by each target).
#include <signal.h>

#include <cerrno>

#include "live/client.hpp"
#include "serve/serve.hpp"

namespace sprofil::serve {

namespace {

class LiveSource final : public Source {
 public:
  std::vector<Target> targets() override {
    std::string error;
    std::vector<Target> out;
    for (const live::Target& t : live::list_targets(&error)) {
      std::string comm = t.command.substr(0, t.command.find(' '));
      comm = comm.substr(comm.rfind('/') + 1).substr(0, 15);
      out.push_back(Target{t.pid, comm});
    }
    return out;
  }

  bool snapshot(int32_t pid, profile::Profile* out, bool* exited, std::string* error) override {
    *exited = false;
    std::string socket;
    if (!live::socket_of(std::to_string(pid), &socket, error)) return false;
    if (live::fetch_profile(socket, out, error, 10000)) return true;
    if (::kill(pid, 0) != 0 && errno == ESRCH) *error = "the process has exited";
    return false;
  }
};

}  // namespace

std::unique_ptr<Source> live_source() {
  return std::make_unique<LiveSource>();
}

}  // namespace sprofil::serve
