// The record workflow (`sprofil record`, docs/file-format.md "Run profiles"):
//  1. check the command (found? executable? an ELF the preloaded agent can enter?) and the
//     output (a private run directory next to it, or in --scratch DIR, created with mkdtemp)
//     before anything runs;
//  2. run the command sampled from outside (agentless.hpp), or with the agent preloaded,
//     SPROFIL_OUTPUT=<rundir>/p.sprof (and SPROFIL_LIVE=1 with `--live`: the agent serves live
//     snapshots), and measure the whole run's CPU with wait4's rusage;
//  3. read every process's file from the run directory (or take the images record kept from
//     outside), drop the processes without samples
//     (counted), write ONE run profile to the output (temporary file + rename), remove the run
//     directory and print one summary line.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "format/profile_name.hpp"
#include "profile/profile.hpp"

namespace sprofil::record {

struct Options {
  unsigned hz = 1000;
  std::string clock = "auto";
  std::string output = naming::kDefaultProfile;
  std::vector<std::string> command;  // the command and its arguments, as given
  std::string runtime;               // path of libsprofil.so
  bool live = false;  // SPROFIL_LIVE=1 in the command's environment: the agent serves live
                      // snapshots while it runs (sprofil fetch/gperf/list/top; docs/live.md)
  bool quiet =
      false;  // no closing line, no notes; the agents quiet too (SPROFIL_QUIET):
              // the command's stderr is its own; no warning either. Errors (no profile) still show.
  // The directory to keep the processes' files in while the command runs (the private run
  // directory is made in it); empty: the output's directory. A local tmpfs saves the file
  // system's work of making a file for each process (docs/benchmarks.md, "At 82e2841").
  std::string scratch;
  // Sampled from outside: the run profile is written to the output every this many seconds
  // while the command runs (a record killed by SIGKILL keeps it); 0: at the end only.
  double checkpoint_s = 10;
  // How the program is sampled. By default from outside (agentless.hpp: nothing loaded into
  // the program, its environment untouched, record holds every perf event) where perf events
  // are allowed, the clock is perf's (or auto) and no live snapshots are asked for; else by
  // the agent preloaded into every process. `agentless`: from outside or not at all (exit 2);
  // `agent`: by the agent (drain mode with the perf clock).
  bool agentless = false;
  bool agent = false;
  // Keep a copy of the sampled objects of the user's own in the build-id cache
  // (profile/buildid_cache.hpp) once the profile is written: `report` names a program rebuilt
  // since from the build that ran.
  bool buildid_cache = true;
};

// What stands in the way of profiling a command, found before it runs.
enum class Launch {
  kOk,
  kNotFound,       // exit status 127, as shells do
  kNotExecutable,  // found but not executable: 126
  kStatic,         // an ELF without PT_INTERP: the preloaded agent cannot enter it
  kSecure,         // setuid/setgid for us: the loader ignores LD_PRELOAD
};
struct CommandCheck {
  Launch launch = Launch::kOk;
  std::string path;    // the file that would be executed (after the PATH search)
  std::string reason;  // for the user, when launch != kOk
};
// Resolves `command` like execvp (PATH search) and inspects the file.
CommandCheck check_command(const std::string& command);

// True if the file is an ELF executable without a PT_INTERP program header (statically
// linked). False for anything else (dynamic ELF, scripts, unreadable files).
bool is_static_elf(const std::string& path);

// Runs the whole workflow and returns the exit status for `sprofil record`: the command's
// (128 + signal if it was killed); 2 when it could not start for a reason of ours (bad output,
// no runtime, a static or setuid program); 126/127 when the command cannot be executed or
// found; non-zero (the command's status, or 1) when no profile could be written.
// *killed_by (if given): the signal that killed the command, else 0; the tool then ends by
// the same signal (tools/sprofil/record.cpp), so that its caller sees what it would natively.
// Its messages and the summary line go to `log`, where the caller says (the tool: stderr).
int record(const Options& o, FILE* log, int* killed_by = nullptr);

// The processes' files in a run directory as one run profile, gathered as record gathers them
// at the end of a run (step 3: each image's own CPU time, the processes without samples dropped
// but the root): for a run directory that a record killed before its end left behind. The run's
// own figures (its CPU time, exit status) are unknown. False, with *error, if it holds no
// profile of a run; *skipped: the files that could not be read ("name: why").
bool gather_run_dir(const std::string& dir, profile::Profile* run,
                    std::vector<std::string>* skipped, std::string* error);

}  // namespace sprofil::record
