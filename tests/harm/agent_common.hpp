// Shared by the agent's do-no-harm tests (agent_*_test.cpp): the programs they run and small
// helpers over the harness.
#pragma once

#include <sys/mount.h>
#include <sys/stat.h>

#include "harness.hpp"

namespace sprofil::harm_test {

inline const std::string kBusy = AGENT_BUSY;
inline const std::string kFds = AGENT_FDS;
inline const std::string kChurn = AGENT_DLCHURN;
inline const std::string kSetuid = AGENT_SETUID;
inline const std::string kPlugin = AGENT_PLUGIN;

// The agent alone: LD_PRELOAD and SPROFIL_OUTPUT, no tool.
inline Env agent_env(const std::string& output, const std::string& clock = "") {
  Env e{{"LD_PRELOAD", agent_test::kRuntime},
        {"SPROFIL_OUTPUT", output},
        {"SPROFIL_STARTED", "\x01"}};
  e.emplace_back("SPROFIL_CLOCK", clock.empty() ? agent_test::precise_clock() : clock);
  return e;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Regions of a profile whose path ends with `suffix`.
inline int regions_named(const profile::Profile& p, const std::string& suffix) {
  int n = 0;
  for (const auto& r : p.regions)
    if (r.path.size() >= suffix.size() &&
        r.path.compare(r.path.size() - suffix.size(), suffix.size(), suffix) == 0)
      ++n;
  return n;
}

// A tmpfs of `size` mounted on a fresh directory for the test's lifetime; ok() false (with the
// reason in why()) where mounting is not permitted.
class SmallFs {
 public:
  explicit SmallFs(const std::string& size) {
    dir_ = tmp_ / "mnt";
    std::filesystem::create_directory(dir_);
    const std::string opts = "size=" + size + ",mode=0755";
    if (mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) == 0)
      mounted_ = true;
    else
      why_ = std::string("cannot mount a tmpfs (") + strerror(errno) + ")";
  }
  ~SmallFs() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallFs(const SmallFs&) = delete;
  SmallFs& operator=(const SmallFs&) = delete;
  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& dir() const { return dir_; }

 private:
  TempDir tmp_;
  std::string dir_, why_;
  bool mounted_ = false;
};

}  // namespace sprofil::harm_test
