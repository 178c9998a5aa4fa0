// The termination signals that reach `sprofil record` (SIGINT, SIGQUIT, SIGTERM, SIGHUP) while
// its command runs. Record does not die of them: that left the command running unprofiled and
// wrote no profile (a `timeout 60 sprofil record -- server`, a `docker stop` of a container
// whose first process is record). Each goes to the command instead, unless the command got it
// itself, and record goes on waiting for the command's end, then writes the profile:
// - the terminal's (^C, ^\, a hangup: si_code SI_KERNEL) went to the whole foreground process
//   group, the command with it: not relayed;
// - any other may have been sent to the whole process group (timeout(1), which signals its
//   child and then its group; `kill 0`; a CI runner's or systemd's kill of a job's processes)
//   or to record alone (`kill PID`, a script's `kill $!`, a container runtime's stop of its
//   first process). Nothing tells the two apart (a group's member or an outsider may send
//   either), so it is relayed if the command still runs a second (kGraceMs) later: a command
//   that got it ends meanwhile without getting it twice, and one that did not gets it late.
// A signal the caller had ignored (nohup's SIGHUP) stays ignored, in record and in the command.
// Limit: a command that got the signal and takes more than the grace to end gets it again.
//
// A stop of the command is record's too (as sudo does): natively the caller (a shell) sees its
// child stopped and takes the terminal back ("Stopped", then `fg` or `bg`). A stop the terminal
// sent (^Z) reaches record with the whole foreground group; one sent to the command alone
// (`kill -STOP PID`, a program that stops itself with raise(SIGSTOP) to wait for a debugger,
// less's own SIGTSTP after it restored the terminal) left the caller waiting on a record that
// still ran: the prompt did not come back. Record now stops itself with the same signal, so the
// caller's waitpid sees the stop it would see natively; when record is continued, the command
// is too, unless the same SIGCONT already continued it (the shell's `fg` signals the group).
// The terminal's stops (^Z: SIGTSTP to the foreground group) record ignores itself: it stops
// when the command does, and a command that ignores ^Z keeps running, as natively.
//
// SIGUSR1 and SIGUSR2 (a daemon's reload or dump, dd's progress) record ignores too: they
// killed record (their default action), which left the command running, orphaned, and wrote
// no profile. Sent to the job's group (`kill -USR1 %1`, `kill 0`, `systemctl kill`) they reach
// the command once, as natively. Limit: sent to record's pid alone they do not reach the
// command; relaying them would deliver a group's twice, and nothing tells the two apart.
// While record is stopped its drainer is too: processes of the tree that still run fill their
// rings, and what a full ring drops is counted as lost.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "util/nocopy.hpp"

namespace sprofil::record {

class SignalRelay : util::NoCopy {
 public:
  static constexpr int kGraceMs = 1000;

  // Installs the relay; the four signals are blocked until started() (a signal before the
  // fork is relayed then, after the grace), SIGCHLD (the command's stops) until the wait.
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
  // The command stopped (a report of waitid's WSTOPPED) by sig: record stops the same way,
  // then continues the command if it is still stopped.
  void stop_with_command(int sig) const;
  pid_t start_waker() const;
  // Record as the first process of a pid namespace (a container's entrypoint) adopts the
  // orphans of the command's tree, which natively the command, the first process then, would
  // have adopted and could reap: record reaps those that ended (else they stayed zombies for the
  // run's length). Never the command.
  void reap_adopted() const;
  struct sigaction old_[4] = {};
  // What record ignores for itself, the command getting the caller's dispositions back: the
  // terminal's stops, SIGUSR1 and SIGUSR2 (above), SIGPIPE and SIGXFSZ (its writes of the
  // profile and its closing line, record.cpp).
  static constexpr int kIgnored[] = {SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGPIPE, SIGXFSZ};
  static constexpr int kIgnoredCount = sizeof kIgnored / sizeof kIgnored[0];
  struct sigaction old_ignored_[kIgnoredCount] = {};
  struct sigaction old_chld_ = {};
  sigset_t old_mask_{};
  pid_t pid_ = 0;
};

}  // namespace sprofil::record
