// How a process of the run ended, read from outside (drain mode's watched processes,
// drain_ends.cpp; --agentless's, agentless.cpp): the one way for both.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace sprofil::record {

// How a watched process ended (its pidfd readable: every thread of it has exited).
struct End {
  bool exited = false;  // known to have exited (exit, _exit, a raw exit_group), not by a signal
  bool known = false;   // its exit code was read (else: reaped before Linux 6.15's pidfd info)
  uint64_t cpu_ns = 0;  // its CPU time, where it could be read (not yet reaped); else 0
};

// How pid ended. While its parent has not reaped it (a zombie: the pidfd can still signal it,
// checked after the reads, so they were of this process and not of a new one with its pid),
// /proc/PID/stat has its exit code and its CPU clock its whole CPU time. Once reaped, only the
// exit code, from the pidfd (Linux 6.15; before 6.15 nothing: `known` false).
End how_it_ended(pid_t pid, int pidfd);

// A process's CPU clock (clock_getcpuclockid: any process's may be read), which keeps the
// time of its threads that are gone; 0 if the process is gone.
uint64_t process_cpu_ns(pid_t pid);

}  // namespace sprofil::record
