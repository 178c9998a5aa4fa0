// The agent's environment (docs/agent.md), read with secure_getenv and not at all under
// AT_SECURE (a setuid or setgid program: the agent does not start):
//   SPROFIL_OUTPUT       output file (the agent runs only when this is set)
//   SPROFIL_HZ           samples per second and thread (default 1000)
//   SPROFIL_CLOCK        auto (default: perf where allowed, else sampler) or a clock of the
//                        table (SPROF_CLOCKS: cpu, itimer, perf, wall, sampler)
//   SPROFIL_PERF_MODE    drain (the default under sprofil record), signal (the default
//                        otherwise) or ring, for the perf clock (read by the clock)
//   SPROFIL_BIN_BYTES    bytes of text per counter, a power of two (default 1: exact; 4 when
//                        the profile is on a tmpfs or ramfs)
//   SPROFIL_SYSTEM       1: a system-time array per region where the clock splits system time;
//                        0: none (default 1)
//   SPROFIL_SIGNAL       the signal to use (default SIGPROF, else a free real-time signal)
//   SPROFIL_QUIET        no message on stderr
//   SPROFIL_RECORD       set by `sprofil record`: once the run's directory (the output's) is
//                        gone, the run is over, and a process that outlived it says nothing
// Set by the agent for its descendants: SPROFIL_STARTED (a later image of the same run).
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "agent/state.hpp"
#include "format/profile_name.hpp"
#include "util/env.hpp"
#include "util/join.hpp"

namespace sprofil::agent {
namespace {

// Whether regions get a system-time array unless SPROFIL_SYSTEM says (where the clock splits).
constexpr bool kSystemDefault = true;

// Exact bins (1 byte: every sample at its instruction) unless the profile is written to a
// filesystem in memory (tmpfs, ramfs), where the disk space reserved for the counters of all
// the text (docs/agent.md, "Memory and disk") is memory, 4x as much at 1-byte bins, and a
// forked child's reservation is memory to zero: there 4-byte bins, as before.
uint32_t default_bin_bytes(const char* absolute_base) {
  char dir[PATH_MAX];
  util::Join(dir, sizeof dir).add(absolute_base);
  char* slash = strrchr(dir, '/');
  if (slash == dir)
    slash[1] = '\0';
  else if (slash)
    *slash = '\0';
  struct statfs fs;
  if (statfs(dir, &fs) != 0) return 1;
  const bool in_memory = fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
  return in_memory ? 4 : 1;
}

}  // namespace

const char* env(const char* name) {
  return secure_getenv(name);
}

// ", name" for each row of the table of clocks: the choices SPROFIL_CLOCK's error lists.
#define SPROFIL_CLOCK_CHOICE_(NAME, id, name, description, off_cpu) ", " name

bool read_settings(const char* output, Settings* s, const char** why) {
  s->clock = rt::ClockRequest{};
  s->clock.kind = rt::ClockKind::kAuto;
  if (const char* c = env("SPROFIL_CLOCK"); c && *c) {
    if (!rt::parse_clock(c, &s->clock.kind))
      return *why = "SPROFIL_CLOCK is not one of auto" SPROF_CLOCKS(SPROFIL_CLOCK_CHOICE_), false;
  }
  if (!util::hz_from_env(&s->clock.interval_ns, why)) return false;
  const char* bins = env("SPROFIL_BIN_BYTES");
  s->bins_asked = false;
  if (bins && *bins) {
    if (!util::parse_bin_bytes(bins, &s->bin_bytes))
      return *why = "SPROFIL_BIN_BYTES must be a power of two", false;
    s->bins_asked = true;
  }
  s->system = kSystemDefault;
  if (const char* v = env("SPROFIL_SYSTEM"); v && *v) {
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
      return *why = "SPROFIL_SYSTEM must be 0 or 1", false;
    s->system = v[0] == '1';
  }
  if (!naming::absolute_base(output, s->base, sizeof s->base)) {
    if (errno == 0) errno = ENAMETOOLONG;
    return *why = nullptr, false;
  }
  if (!bins || !*bins) s->bin_bytes = default_bin_bytes(s->base);
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
