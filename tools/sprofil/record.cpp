// sprofil record: option parsing; the workflow is src/record (record::record).
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "format/sprof_format.h"
#include "record/record.hpp"
#include "subcommands.hpp"
#include "util/self_exe.hpp"

namespace sprofil::tool {
namespace {

// libsprofil.so next to this tool (build tree or install prefix), unless SPROFIL_LIBRARY says.
std::string find_runtime() {
  if (const char* env = getenv("SPROFIL_LIBRARY")) return env;
  char self[PATH_MAX];
  if (util::self_exe(self, sizeof self) > 0) {
    std::string dir(self);
    dir.erase(dir.rfind('/'));
    for (const char* rel : {"/../lib/libsprofil.so", "/../lib64/libsprofil.so"}) {
      std::string p = dir + rel;
      if (access(p.c_str(), R_OK) == 0) {
        char real[PATH_MAX];
        return realpath(p.c_str(), real) ? std::string(real) : p;
      }
    }
  }
  return SPROFIL_INSTALL_LIBDIR "/libsprofil.so";
}

// Ends this process by `sig`, the signal that killed the command, as `timeout` does: a caller
// sees the command's end as it would natively (a shell's "Segmentation fault", a script's
// stop at a ^C'd command, Python's returncode -11), not an exit status of 128 + sig. No core
// of sprofil is dumped (RLIMIT_CORE 0 and not dumpable, which also stops a core_pattern
// pipe): the command dumped its own, if it did, and the status then lacks the core bit. If
// the signal does not end the process, the caller returns the exit status.
void end_by_signal(int sig) {
  fflush(nullptr);
  rlimit none{};
  if (getrlimit(RLIMIT_CORE, &none) == 0) {
    none.rlim_cur = 0;
    setrlimit(RLIMIT_CORE, &none);
  }
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  sigprocmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);
}

}  // namespace

Run setup_record(CLI::App& sub) {
  auto opts = std::make_shared<record::Options>();
  sub.add_option("-F,--frequency", opts->hz, "Samples per second and thread")
      ->transform(whole_number(1, 1000000));
  // auto, then every row of the one table of clocks (SPROF_CLOCKS) with its description.
  std::vector<std::string> clocks{"auto"};
  std::string clock_help = "Sampling clock: auto (perf where allowed, else sampler)";
  for (uint32_t i = 0; i < SPROF_CLOCK_COUNT; ++i) {
    const auto c = static_cast<profile::Clock>(i);
    clocks.push_back(profile::clock_name(c));
    clock_help +=
        std::string(", ") + profile::clock_name(c) + " (" + profile::clock_description(c) + ")";
  }
  sub.add_option("--clock", opts->clock, clock_help)
      ->check(CLI::IsMember(clocks))
      ->capture_default_str();
  sub.add_option("-o,--output", opts->output,
                 "The run profile to write (one file holding every process of the run)")
      ->capture_default_str();
  sub.add_option("--scratch", opts->scratch,
                 "The directory to keep the processes' files in while the command runs "
                 "(default: the output's directory; a tmpfs such as /dev/shm saves the file "
                 "system's work for each process)");
  sub.add_option("--checkpoint", opts->checkpoint_s,
                 "Sampling from outside (the default), write the profile every SECONDS while the "
                 "command runs, so that record killed by SIGKILL leaves it as of then; 0: at the "
                 "end only")
      ->type_name("SECONDS")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  sub.add_flag("-q,--quiet", opts->quiet,
               "No closing line and no notes, from record or the agents: the command's stderr "
               "is its own (no warnings either; errors, where no profile is written, still show)");
  auto* outside = sub.add_flag(
      "--agentless", opts->agentless,
      "Sample from outside or fail: nothing is loaded into the program, its environment is "
      "untouched (statically linked programs too). The default where perf events are allowed "
      "(docs/agent.md)");
  sub.add_flag("--agent", opts->agent,
               "Sample with the agent preloaded into every process (drain mode with the perf "
               "clock), as where perf events are denied or with another clock")
      ->excludes(outside);
  sub.add_flag("--live", opts->live,
               "Serve live snapshots while it runs (sprofil fetch/gperf/list; docs/live.md)");
  add_no_buildid_cache(sub, opts->buildid_cache);
  // Options end at the command's first word, as with perf and env; `--` is optional.
  sub.add_option("command", opts->command,
                 "The command and its arguments (its options are its own)");
  sub.positionals_at_end();
  return [opts] {
    if (opts->command.empty()) return usage_error("record", "no command to run");
    if (opts->agentless && opts->clock != "auto" && opts->clock != "perf")
      return usage_error("record", "--agentless samples with the perf clock only");
    opts->runtime = find_runtime();
    int killed_by = 0;
    const int code = record::record(*opts, stderr, &killed_by);
    if (killed_by != 0) end_by_signal(killed_by);
    return code;
  };
}

}  // namespace sprofil::tool
