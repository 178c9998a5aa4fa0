// The agent's environment (docs/agent.md), read with secure_getenv and not at all under
// AT_SECURE (a setuid or setgid program: the agent does not start):
//   SPROFIL_OUTPUT       output file (the agent runs only when this is set)
//   SPROFIL_HZ           samples per second and thread (default 1000)
//   SPROFIL_CLOCK        auto (default: perf where allowed, else cpu), cpu, perf, itimer, wall
//   SPROFIL_PERF_MODE    signal (default) or ring, for the perf clock (read by the clock)
//   SPROFIL_BIN_BYTES    bytes of text per counter, a power of two (default 4)
//   SPROFIL_SYSTEM       1: a system-time array per region where the clock splits system time;
//                        0: none (default 1)
//   SPROFIL_SIGNAL       the signal to use (default SIGPROF, else a free real-time signal)
//   SPROFIL_QUIET        no message on stderr
// Set by the agent for its descendants: SPROFIL_STARTED (a later image of the same run).
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/state.hpp"
#include "util/env.hpp"

namespace sprofil::agent {
namespace {

// Whether regions get a system-time array unless SPROFIL_SYSTEM says (where the clock splits).
constexpr bool kSystemDefault = true;

// SPROFIL_OUTPUT made absolute (the program may chdir; the file is re-opened by path).
bool make_absolute(const char* out, char* base, size_t n) {
  if (out[0] == '/') return snprintf(base, n, "%s", out) < static_cast<int>(n);
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return false;
  return snprintf(base, n, "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, out) < static_cast<int>(n);
}

}  // namespace

const char* env(const char* name) {
  return secure_getenv(name);
}

bool read_settings(const char* output, Settings* s, const char** why) {
  s->clock = rt::ClockRequest{};
  s->clock.kind = rt::ClockKind::kAuto;
  if (const char* c = env("SPROFIL_CLOCK"); c && *c) {
    if (!rt::parse_clock(c, &s->clock.kind))
      return *why = "SPROFIL_CLOCK is not auto, cpu, perf, itimer or wall", false;
  }
  if (!util::hz_from_env(&s->clock.interval_ns, why)) return false;
  if (const char* b = env("SPROFIL_BIN_BYTES"); b && *b) {
    const long v = atol(b);
    if (v <= 0 || v > 65536 || (v & (v - 1)))
      return *why = "SPROFIL_BIN_BYTES must be a power of two", false;
    s->bin_bytes = static_cast<uint32_t>(v);
  }
  s->system = kSystemDefault;
  if (const char* v = env("SPROFIL_SYSTEM"); v && *v) {
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
      return *why = "SPROFIL_SYSTEM must be 0 or 1", false;
    s->system = v[0] == '1';
  }
  if (!make_absolute(output, s->base, sizeof s->base)) {
    if (errno == 0) errno = ENAMETOOLONG;
    return *why = nullptr, false;
  }
  return true;
}

// Asked before the clock starts, so kAuto is predicted: it resolves to the perf clock or, where
// perf events are denied, to the sampler clock; it splits if both do.
bool clock_splits_system(const rt::ClockRequest& c) {
  if (c.kind != rt::ClockKind::kAuto) return rt::clock_splits_system(c.kind);
  return rt::clock_splits_system(rt::ClockKind::kPerf) &&
         rt::clock_splits_system(rt::ClockKind::kSampler);
}

}  // namespace sprofil::agent
