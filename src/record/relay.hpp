// The termination signals that reach `sprofil record` (SIGINT, SIGQUIT, SIGTERM, SIGHUP) while
// its command runs. Record does not die of them: that left the command running unprofiled and
// wrote no profile (a `timeout 60 sprofil record -- server`, a `docker stop` of a container
// whose first process is record). Each goes to the command instead, unless the command got it
// itself, and record goes on waiting for the command's end, then writes the profile:
// - the terminal's (^C, ^\, a hangup: si_code SI_KERNEL) went to the whole foreground process
//   group, the command with it: not relayed;
// - one from outside record's process group (another terminal's `kill`, a container runtime,
//   a supervisor) is for record alone: relayed at once;
// - one from a member of the process group may have been sent to the whole group (`kill 0`,
//   timeout(1), which signals both its child and its group) or to record alone (a script's
//   `sprofil record ... & kill $!`): relayed if the command is still running a second
//   (kGraceMs) later, so that the command that got it does not get it twice while it ends.
// A signal the caller had ignored (nohup's SIGHUP) stays ignored, in record and in the command.
// Limit: one sent from outside the group to each of its processes (systemd's kill of a
// service's cgroup) reaches the command twice, as under sudo(8), whose rules these follow.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "util/nocopy.hpp"

namespace sprofil::record {

class SignalRelay : util::NoCopy {
 public:
  static constexpr int kGraceMs = 1000;

  // Installs the relay; the four signals are blocked until started() (a signal before the
  // fork is relayed then).
  SignalRelay();
  // The caller's dispositions and mask again.
  ~SignalRelay();
  // In the forked child, before its exec: the caller's dispositions and mask.
  void restore() const;
  // After the fork: relays to pid from now on (and what came before).
  void started(pid_t pid);
  // Waits until the command has ended, without reaping it (waitid WNOWAIT), relaying what
  // comes meanwhile; then relays nothing more (its pid may be another's once it is reaped):
  // the four are ignored until the destructor.
  void wait_for_end();

 private:
  static constexpr int kSignals[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP};
  struct sigaction old_[4] = {};
  sigset_t old_mask_{};
  pid_t pid_ = 0;
};

}  // namespace sprofil::record
