// What `sprofil record` says when its run ends (summary.hpp).
#include "record/summary.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "profile/profile.hpp"
#include "util/count_of.hpp"

namespace sprofil::record {

namespace {
// The agent's start-up before its first sample, a process (the loader, the agent: about 1 ms on
// the VM of docs/benchmarks.md), with room for a slow machine.
constexpr uint64_t kStartUpBoundNs = 5000000;
}  // namespace

void say_summary(const profile::Profile& run, const Summary& s, bool quiet, FILE* log) {
  // "1 process (without samples)", "3 processes (1 without samples)": the root is stored even
  // when it took no sample, and a bare "1 process, 0 samples" read as if it had.
  std::string processes = util::count_of(run.processes.size(), "process", "processes");
  if (s.kept_empty != 0)
    processes += s.kept_empty == run.processes.size()
                     ? (run.processes.size() == 1 ? " (without samples)" : " (all without samples)")
                     : " (" + std::to_string(s.kept_empty) + " without samples)";
  std::string summary = "sprofil record: wrote " + s.out + ": " + processes + ", " +
                        util::count_of(run.total_samples(), "sample", "samples") + " (" +
                        profile::clock_name(run.clock) + " clock, " +
                        std::to_string(run.requested_hz) + " Hz requested)";
  if (run.dropped_processes != 0)
    summary += "; " + util::count_of(run.dropped_processes, "process", "processes") +
               " without samples not stored";
  if (run.run_cpu_ns != 0) {
    char b[512];
    const uint64_t unsampled = profile::unsampled_cpu_ns(run);
    if (run.clock == profile::Clock::kWall) {
      snprintf(b, sizeof b, "; %.3f s of the run's %.3f s CPU is in no process's profile",
               double(unsampled) / 1e9, double(run.run_cpu_ns) / 1e9);
    } else {
      // Sampled from outside, a thread is counted from its clone on and its time after its last
      // sample is credited at the run's end: what has no sample is the CPU the task clock does
      // not count (the command's start before its exec, each thread's exit after its events
      // end: 50-80 us a thread on the VM of docs/benchmarks.md), the last partial periods, and the
      // processes without samples; where kernel time is not sampled (perf_event_paranoid 2,
      // unprivileged) that and the threads' time after their last samples too.
      // The time the task clock counted where its timer took no sample (it fired late, as when
      // the VM did not run: the periods it missed are skipped; or a thread's copy of the set
      // that was off at its end held part of a period) is named on its own.
      char late[192] = "";
      const double late_s =
          run.requested_hz > 0 ? double(s.unplaced) / double(run.requested_hz) : 0;
      if (s.outside && run.throttled == 0 && late_s * 1e9 >= 0.01 * double(run.run_cpu_ns))
        snprintf(late, sizeof late,
                 "; %.3f s the task clock counted with no sample (a timer that fired late, or "
                 "a thread's partial periods at its end)",
                 late_s);
      // Lost samples (a full ring; sampled from outside, the time the kernel throttled the
      // sampling too) are CPU with no sample: named where they are.
      char lost[160] = "";
      const uint64_t lost_ns = run.lost * run.tick_ns;
      if (lost_ns != 0)
        snprintf(lost, sizeof lost, "%.3f s of it lost samples (%s), ",
                 double(std::min(lost_ns, unsampled)) / 1e9,
                 run.throttled ? "the kernel throttled the sampling" : "full rings");
      snprintf(b, sizeof b,
               "; %.3f s of the run's %.3f s CPU has no sample (%s%.3f s of it in the processes "
               "without samples; the rest is %s%s)",
               double(unsampled) / 1e9, double(run.run_cpu_ns) / 1e9, lost,
               double(std::min(s.dropped_cpu_ns, unsampled)) / 1e9,
               !s.outside ? "start-up before sampling: the loader, the agent"
               : s.kernel
                   ? "the time the task clock does not count: the start before the exec, the "
                     "threads' exits"
                   : "kernel time, not sampled at this perf_event_paranoid (the agent's "
                     "`--agent` counts it), and each thread's time after its last sample",
               late);
    }
    summary += b;
  }
  // Threads that ran less than a period made record shorten the clones' periods
  // (Agentless::State::note_thread_cpu): the rate, and the overhead, rose for those threads.
  if (s.shortened_ns != 0) {
    char b[224];
    snprintf(b, sizeof b,
             "; most threads ran less than a period, so those cloned after them were sampled "
             "every %.0f us (each sample counts its own period)",
             double(s.shortened_ns) / 1e3);
    summary += b;
  }
  // -q: nothing of record's own, the warnings neither (as perf record -q): the command's stderr
  // is its own. What they say is in the profile's report (unsampled CPU, throttling).
  if (quiet) return;
  fprintf(log, "%s\n", summary.c_str());
  // Sampled from outside, a thread's inherited event starts with a whole period: a thread that
  // ends before its first sample has none of its own, and its time is credited at its
  // creator's last pc, as kernel time (agentless.hpp). Where that is a tenth of the samples or
  // more (a thread per small task), say so, and what samples such threads where they run.
  if (const std::string note = profile::unsampled_threads_note(run); !note.empty())
    fprintf(log, "sprofil record: warning: %s\n", note.c_str());
  // So does a process whose program ends before its first sample (a shell loop of short
  // commands): its time is at its program's entry point.
  if (const std::string note = profile::unsampled_processes_note(run); !note.empty())
    fprintf(log, "sprofil record: warning: %s\n", note.c_str());
  // With the agent, a process it could not enter or report from has no file at all: a
  // statically linked or setuid program the command exec'd, a process that changed its user
  // ID (the run directory and the drain socket are this user's, mode 0700). A thread that its
  // signal does not reach (a runtime that handles signals itself with raw system calls, as
  // Go's) has no sample; nor, mostly, has one that runs less than a period or two under the cpu
  // clock (a thread per small task: its CPU-time timers fire at the tick). That CPU is in the
  // run's and in no sample; where it
  // is far more than the agent's start-up in the processes it saw (about 1 ms each), say what
  // it may be.
  if (!s.outside && run.clock != profile::Clock::kWall && run.run_cpu_ns != 0) {
    const uint64_t unsampled = profile::unsampled_cpu_ns(run);
    const uint64_t seen = run.processes.size() + run.dropped_processes;
    const uint64_t rest = unsampled - std::min(unsampled, s.dropped_cpu_ns);
    if (rest > run.run_cpu_ns / 10 && rest > seen * kStartUpBoundNs)
      fprintf(log,
              "sprofil record: warning: %.3f s of the run's %.3f s CPU has no sample, far more "
              "than the agent's start-up in the %s it saw. The cpu clock misses threads that "
              "each run less than a period or two (a thread per small task: `--clock sampler` "
              "samples them), the agent's clocks miss threads their signal does not reach (a "
              "runtime that handles signals itself, as Go's), and the agent cannot enter a "
              "statically linked or setuid program the command runs, nor report from a process "
              "that changed its user ID. record's default, sampling from outside, samples them "
              "all where perf events are allowed\n",
              double(rest) / 1e9, double(run.run_cpu_ns) / 1e9,
              util::count_of(seen, "process", "processes").c_str());
  }
  // And processes that outlived the command (or were left to init): their samples are not in
  // the run's CPU, which the summary above compares with.
  if (const std::string note = profile::unwaited_note(run); !note.empty())
    fprintf(log, "sprofil record: warning: %s\n", note.c_str());
  if (const uint64_t throttled = run.throttled) {
    // Each throttled event took no samples till the next tick while its counter ran on: the
    // profile misses them (the agent's drain counts them as lost; perf report warns too).
    char rate[32] = "unknown";
    if (FILE* f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "re")) {
      unsigned long r = 0;
      if (fscanf(f, "%lu", &r) == 1) snprintf(rate, sizeof rate, "%lu", r);
      fclose(f);
    }
    fprintf(log,
            "sprofil record: warning: the kernel throttled the sampling %llu times "
            "(kernel.perf_event_max_sample_rate is %s; the kernel lowers it when its perf "
            "interrupts take long): the profile misses those samples (counted as lost); record "
            "with a lower -F, or "
            "raise the limit\n",
            static_cast<unsigned long long>(throttled), rate);
  }
}

void say_not_counted(const Drainer::Stats& ds, FILE* log) {
  if (ds.unplaced == 0) return;
  rlimit as;
  const bool as_limited = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
  fprintf(log,
          "sprofil record: %llu samples were taken but not counted: the profile file of their "
          "process could not be mapped%s%s%s\n",
          static_cast<unsigned long long>(ds.unplaced), ds.unplaced_errno ? " (" : "",
          ds.unplaced_errno ? strerror(ds.unplaced_errno) : "",
          ds.unplaced_errno == ENOMEM && as_limited
              ? "): sprofil record runs under the same address-space limit (ulimit -v) as "
                "the program; raise it, or set it inside the recorded command"
          : ds.unplaced_errno ? ")"
                              : "");
}

void say_drain_stats(const Drainer::Stats& ds, FILE* log) {
  fprintf(
      log,
      "sprofil record: drain: %llu events, %llu sample records, %llu records dropped by "
      "the kernel, %llu samples unplaced, %llu lost for want of disk space, %llu periods "
      "credited at an event's end, %llu "
      "not (no pc), %llu periods re-drawn, %llu process images' files made, %llu refused, "
      "%llu main threads' events opened for them, %llu could not be (opened by the agent), "
      "%llu forked children's files made, %llu refused, %llu forked children's events taken "
      "without their files, %llu processes' exits seen without a flush, %llu exits the "
      "agent did not see (files completed here), %llu flushes, %llu "
      "forked children's files completed at their events' end, %llu empty files removed at "
      "their process's exit (%.3f s of CPU)\n",
      static_cast<unsigned long long>(ds.events), static_cast<unsigned long long>(ds.samples),
      static_cast<unsigned long long>(ds.lost_records),
      static_cast<unsigned long long>(ds.unplaced), static_cast<unsigned long long>(ds.no_space),
      static_cast<unsigned long long>(ds.exit_credited),
      static_cast<unsigned long long>(ds.exit_unplaced),
      static_cast<unsigned long long>(ds.redraws), static_cast<unsigned long long>(ds.new_files),
      static_cast<unsigned long long>(ds.new_files_refused),
      static_cast<unsigned long long>(ds.main_events),
      static_cast<unsigned long long>(ds.main_events_refused),
      static_cast<unsigned long long>(ds.child_files),
      static_cast<unsigned long long>(ds.child_files_refused),
      static_cast<unsigned long long>(ds.pending_alone),
      static_cast<unsigned long long>(ds.exits_seen),
      static_cast<unsigned long long>(ds.exits_completed),
      static_cast<unsigned long long>(ds.flushes),
      static_cast<unsigned long long>(ds.finished_at_end),
      static_cast<unsigned long long>(ds.dropped), double(ds.dropped_cpu_ns) / 1e9);
}

// Record's own peak resident set (getrusage), in KB; -1 if unknown.
static long peak_rss_kb() {
  rusage ru{};
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

void say_agentless_stats(const Agentless::Stats& as, FILE* log) {
  fprintf(log,
          "sprofil record: agentless: %llu threads' copies of the events sampled, %llu sample "
          "records (%s), %llu records dropped by the kernel, %llu periods re-drawn, %llu passes "
          "over the rings and %llu wake-ups of record's thread (its voluntary switches), %llu "
          "swaps of the two sets (the longest %.1f ms), %llu samples of record's own code and "
          "%llu of the set that was off (not counted), %llu threads and processes started and "
          "%llu ended, %llu periods credited at the threads' ends, %llu counted periods "
          "unplaced, %llu process images (%llu mappings of ended ones dropped), %llu changes "
          "of the clones' period between the nominal and a shortened one (short threads), "
          "record's peak resident memory %ld KB\n",
          static_cast<unsigned long long>(as.copies), static_cast<unsigned long long>(as.samples),
          as.kernel ? "kernel time sampled at the user pc" : "user time only",
          static_cast<unsigned long long>(as.lost), static_cast<unsigned long long>(as.redraws),
          static_cast<unsigned long long>(as.passes), static_cast<unsigned long long>(as.wakeups),
          static_cast<unsigned long long>(as.swaps), static_cast<double>(as.swap_ns_max) / 1e6,
          static_cast<unsigned long long>(as.own), static_cast<unsigned long long>(as.set_off),
          static_cast<unsigned long long>(as.tasks_started),
          static_cast<unsigned long long>(as.tasks_ended),
          static_cast<unsigned long long>(as.exit_credited),
          static_cast<unsigned long long>(as.unplaced), static_cast<unsigned long long>(as.images),
          static_cast<unsigned long long>(as.regions_dropped),
          static_cast<unsigned long long>(as.shortened_changes), peak_rss_kb());
}

}  // namespace sprofil::record
