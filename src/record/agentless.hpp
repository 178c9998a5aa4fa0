// `sprofil record`'s default where perf events are allowed (and `--agentless`): the command's
// processes sampled from outside, nothing loaded into them (docs/agent.md, "Sampling from
// outside"; measured in docs/benchmarks.md, "At c3f4e30"). perf record's model: record opens,
// on each CPU, a task-clock event on the thread that reads the rings, before that thread forks
// the command, which every thread and process of the command inherits at its clone (the
// kernel clones the event: no event to open, no gap, no wake-up of record), enabled by record
// once the command is forked (the command execs when they are: wait_to_exec), and an event
// beside it that makes the task, comm and mmap records, into one ring a CPU that record holds and
// reads at each pass (every 16 ms, or as a ring half fills). So a SIGKILL of the program loses
// nothing, and the program pays only the kernel's sampling.
// - Weights: each sample ends a period of its copy's (the period it was cloned with). Its
//   samples in the kernel too where perf_event_paranoid (at most 1) or the capabilities allow
//   it, counted as kernel time at the user pc the thread returns to (PERF_SAMPLE_REGS_USER), as
//   drain mode counts it; else user time only, as `perf record --all-user`. Not the threads'
//   own counters (PERF_SAMPLE_READ with inherit): the kernel then switches between the
//   command's threads the slow way (agentless.cpp, attach). At the run's end, the periods of
//   the events' counters that no sample credited (the copies' time since their last samples)
//   are shared among the threads' ends (agentless_ends.cpp, thread_end).
// - Against aliasing: a copy keeps the period it was cloned with, the original event's then,
//   which record re-draws for the clones to come at every pass that saw a clone: each thread and
//   process starts at a period of its own. The originals stay record's: opened on the command's
//   first thread (as perf record opens them), they did not. At a switch between that thread and
//   one of its clones on a CPU the kernel swaps the two threads' event contexts (its fast
//   switch between clones), and once the thread holding the originals ended, they were dead to
//   PERF_EVENT_IOC_PERIOD: every later thread was cloned with the same period (400 threads
//   running the same work from their start took 3 distinct periods though record re-drew 53
//   times, and their samples fell on the same points of the work: bench/thread_phase.sh, one
//   function 0.5-54% of the four where each has 25%). On record's thread that reads the rings,
//   with an event beside them that the fork does not copy (so the command's context is no
//   clone of record's, and the kernel never swaps the two), they stay where record re-draws
//   them; made by the thread whose events they are, a re-draw runs on that thread's CPU (an
//   ioctl on another thread's event interrupts the CPU that thread last ran on, a program's
//   CPU as often as not). That thread is sampled too (its samples and records are dropped).
//   And while a thread runs: a copy's period cannot be re-drawn, so there are two sets of
//   events, each thread sampled by one at a time at a period of its own, the two swapped at
//   random intervals (State::swap): each swap moves the phase at which each set's samples fall
//   on the thread's work, as drain mode's re-draws do. A swap's ioctls reach every copy, on
//   its thread's CPU: their interrupts are kept to 1% of the sampling's. The task, comm and mmap
//   records come from the third event, which stays on: no swap loses or doubles one. It counts
//   (a task clock with no period): its count is the command's time (run_end).
// - Each pass handles the records of every ring in time order, so that a sample counts into
//   the process image and the mappings of its moment (the records older than the pass's start,
//   less a millisecond, which every ring had made readable before it was read; the younger wait
//   for the next pass: State::pass): an exec (COMM_EXEC) ends an image and
//   starts the next (the time before it, where a period or more, is the image before's), a
//   fork's child starts with its parent's mappings. The images are kept in memory and become
//   the run profile's processes.
// - A thread shorter than its first period (an inherited copy's is a whole one) has no sample:
//   its time is credited at the run's end at its creator's last pc (record warns where that is
//   a tenth of the samples or more: Stats::unsampled_credited), or its program's entry
//   point (a process's only thread after an exec, whose pc before is the image before's;
//   record warns of those too: Stats::unsampled_process_credited). Where most threads to end
//   ran that short (a thread per small task), the threads cloned after them get a period a
//   quarter as long, each sample weighted by its own (State::note_thread_cpu).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "profile/profile.hpp"

namespace sprofil::record {

class Agentless {
 public:
  struct Stats {
    uint64_t copies = 0;        // threads' copies of the CPUs' events that took a sample
    uint64_t samples = 0;       // sample records read
    uint64_t lost = 0;          // records the kernel dropped (a full ring)
    uint64_t lost_periods = 0;  // the periods they stood for (lost_periods())
    uint64_t redraws = 0;       // periods re-drawn
    uint64_t passes = 0;        // passes over the rings
    uint64_t wakeups = 0;       // record's thread's wake-ups (its voluntary switches)
    uint64_t swaps = 0;         // swaps of the two sets of events (re-phasing every thread)
    uint64_t swap_ns_max = 0;   // the longest swap's passes, wall time
    uint64_t own = 0;  // samples not the command's: record's thread, the command before its exec
    uint64_t set_off = 0;        // samples of the set that was off (taken while a swap was made)
    uint64_t tasks_started = 0;  // the command's threads and processes cloned (FORK records)
    uint64_t tasks_ended = 0;    // and ended (EXIT records), its first thread's end too
    uint64_t exit_credited = 0;  // periods credited at the threads' ends (run_end)
    uint64_t unsampled_threads = 0;    // threads (not processes) that ended with no sample
    uint64_t unsampled_credited = 0;   // of exit_credited, theirs: at their creator's last pc
    uint64_t unsampled_processes = 0;  // processes whose program ended with no sample
    uint64_t unsampled_process_credited = 0;  // of exit_credited, at entry points: theirs
    uint64_t shortened_changes = 0;  // times the clones' periods were shortened or restored
    uint64_t shortened_ns = 0;       // the nominal period of the clones so shortened; 0: never
    uint64_t unplaced = 0;           // periods counted beyond the threads' ends' tails: no sample
    uint64_t throttled = 0;          // times the kernel throttled an event (PERF_RECORD_THROTTLE)
    uint64_t throttled_lost = 0;     // periods of the throttled time: lost samples
    uint64_t images = 0;             // process images seen
    uint64_t regions_dropped = 0;    // mappings of ended images that nothing needed (compact())
    bool kernel = false;             // kernel time is sampled (at the user pc it returns to)
  };
  struct Image {
    profile::Profile profile;  // a single-process profile
    bool root = false;
    uint64_t start_ns = 0;  // when it started (for the order)
  };

  // Whether perf events allow sampling from outside here (an event as attach() opens, on
  // this process); else *why.
  static bool allowed(std::string* why);

  Agentless();
  ~Agentless();
  Agentless(const Agentless&) = delete;
  Agentless& operator=(const Agentless&) = delete;

  // Before start(): every `every_ns` while the command runs, where samples came since the last
  // time, `fn` gets the images as they stand (as take_images() would give them), on the thread
  // that reads the rings: a record killed by SIGKILL keeps its profile as of then.
  void checkpoint(uint64_t every_ns, std::function<void(std::vector<Image>)> fn);
  // Before start(): live snapshots will be asked for (live_pids, live_image).
  void serve_live();
  // The command's processes running now (as of the rings' last pass), for any thread.
  std::vector<pid_t> live_pids();
  // Process pid's current image as it stands, from the rings' thread after its next pass; false
  // if pid is not one of the command's running processes, the run ended, or timeout_ms passed.
  // For any thread (one request at a time).
  bool live_image(pid_t pid, Image* out, int timeout_ms);
  // Starts the thread that reads the rings, which opens the events on itself and forks the
  // command with `fork_command` (the child's pid, or -1 with errno; in the child it does not
  // return, and calls wait_to_exec() before its exec): the command inherits them, enabled once
  // it is forked, and they stay that thread's, whose
  // re-draws of their period are then calls on its own CPU (agentless.hpp, "Against
  // aliasing"). The command's pid; -1, with *why, where perf events are refused (nothing is
  // forked and nothing left open) or the fork failed.
  pid_t start(unsigned hz, const std::vector<std::string>& argv,
              const std::function<pid_t()>& fork_command, std::string* why);
  // In the command's child, before its exec: waits till record has enabled its events (start()
  // enables them once the fork returns; they are not enabled by the exec).
  void wait_to_exec();
  // After the command's end: its last records read, every event closed.
  void finish();
  // After finish(): the periods the images stand for, sampled and lost, are at most the run's
  // CPU, every process's (wait4's rusage): the time counted as lost, the throttled time's
  // first, then the full rings', gives back what passes it (agentless_ends.cpp).
  void bound_lost(uint64_t run_cpu_ns);
  // The process images seen, the command's first image first, then by start time.
  std::vector<Image> take_images();
  Stats stats() const;

 private:
  // On the rings' thread, before its fork of the command: the events opened on it.
  bool attach(unsigned hz, std::string* why);
  // After the fork: the command's first process, `pid`, running `argv`.
  void root(pid_t pid, const std::vector<std::string>& argv);
  struct State;
  std::unique_ptr<State> s_;
  friend struct AgentlessProbe;  // tests/record/agentless_order_test.cpp: a pass's records
};

}  // namespace sprofil::record
