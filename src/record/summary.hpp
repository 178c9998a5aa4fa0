// What `sprofil record` says when its run ends (record.cpp): the closing line ("sprofil record:
// wrote FILE: ...": processes, samples, clock and rate, and the run's CPU that no sample
// stands for, by cause), the warnings about what the profile misses (threads credited at
// their creator's pc, throttled sampling, samples drain mode could not count), and with
// SPROFIL_DRAIN_STATS set the counts of the sampling's own work.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "profile/profile.hpp"
#include "record/agentless.hpp"
#include "record/drain.hpp"

namespace sprofil::record {

// What the run profile does not tell of the run.
struct Summary {
  std::string out;              // the profile written
  uint64_t kept_empty = 0;      // processes stored without a sample (the root always is)
  uint64_t dropped_cpu_ns = 0;  // the CPU of the processes not stored (no samples)
  bool outside = false;         // sampled from outside (agentless.hpp), not by the agent
  bool kernel = false;          // outside: kernel time sampled (at the user pc)
  uint64_t unplaced = 0;        // outside: periods the task clock counted with no sample
  uint64_t shortened_ns = 0;    // outside: the shortened period of threads cloned after short
                                // ones (Agentless::Stats::shortened_ns); 0: none
};

// The closing line on `log` (unless quiet), then the warnings (always), of `run`: the run
// profile as written, its run totals (run_cpu_ns, throttled) set.
void say_summary(const profile::Profile& run, const Summary& s, bool quiet, FILE* log);

// Drain mode's samples that the kernel took and record could not count (their process's file
// could not be mapped), and why; nothing if there were none.
void say_not_counted(const Drainer::Stats& ds, FILE* log);

// SPROFIL_DRAIN_STATS: the counts of drain mode's work, and of sampling from outside.
void say_drain_stats(const Drainer::Stats& ds, FILE* log);
void say_agentless_stats(const Agentless::Stats& as, FILE* log);

}  // namespace sprofil::record
