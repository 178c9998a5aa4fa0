// `sprofil list`: the processes of this user that serve live profiles.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "live/client.hpp"
#include "report/labels.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

// The longest wait for one process's snapshot (a large program's packed image is a few MB).
constexpr int kSnapshotMs = 2000;

}  // namespace

Run setup_list(CLI::App&) {
  return [] {
    std::string err;
    const std::vector<live::Target> targets = live::list_targets(&err);
    if (!err.empty()) {
      return fail("list", err);
    }
    // Each process's samples so far and the CPU they stand for (its snapshot's, as `fetch`
    // takes it: a wrapper such as `timeout` or a shell has next to none), so that the busy one
    // is plain to pick; "-" where the snapshot did not come (the process ended meanwhile).
    std::printf("%8s  %10s  %9s  %s\n", "PID", "SAMPLES", "CPU s", "COMMAND");
    for (const live::Target& t : targets) {
      profile::Profile p;
      std::string why;
      char samples[24] = "-", cpu[24] = "-";
      if (live::fetch_profile(t.socket, &p, &why, kSnapshotMs)) {
        std::snprintf(samples, sizeof samples, "%" PRIu64, p.total_samples());
        std::snprintf(cpu, sizeof cpu, "%.3f", double(profile::sampled_ns(p)) / 1e9);
      }
      // A command line as the text report shows one: it cannot move the cursor (printable).
      std::printf("%8d  %10s  %9s  %s\n", t.pid, samples, cpu,
                  report::printable(t.command).c_str());
    }
    return 0;
  };
}

}  // namespace sprofil::tool
