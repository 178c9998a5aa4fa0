// The workflow of `sprofil gperf --serve` (docs/live.md), the Nintendo 64 seed's host server:
// it listens on the gperf socket (PushServer), receives the image each osProfileFlush pushes,
// parses it with the one reader (profile::parse_profile) and keeps it as DIR/gperf.PID.N.sprof.
// Nothing here writes to the terminal but through the FILE*s it is given.
#pragma once

#include <signal.h>

#include <cstdio>
#include <string>

namespace sprofil::live {

struct GperfServeOptions {
  std::string socket;     // "": $SPROFIL_GPERF_SOCKET, else gperf.sock in the per-user directory
  std::string dir = ".";  // where the flushes are kept
  unsigned count = 0;     // stop after this many flushes (0: until *stop)
};

// Serves until *stop is non-zero (set by the caller's SIGINT/SIGTERM handler; looked at every
// 200 ms) or o.count flushes are kept, then removes its socket. One line per flush kept on
// `out`: "flush N: pid P, S samples (O overflow), K segments -> FILE". Its messages on `log`,
// each "sprofil gperf: ...": where it serves, rejected clients, bad flushes and files it could
// not write (it goes on), and why it cannot serve. Returns the exit status: 0, or 1 when it
// cannot serve (no socket place, the socket cannot be opened, the server fails).
int serve_gperf(const GperfServeOptions& o, const volatile sig_atomic_t* stop, FILE* out,
                FILE* log);

}  // namespace sprofil::live
