// `sprofil record --agentless`: the command's processes sampled from outside, nothing loaded
// into them (docs/agent.md "Agentless"; the design measured in docs/benchmarks.md, "At
// 56d8d4c"). Record itself holds every perf event and ring:
// - trackers, one pair per CPU, on the command (a dummy software event, inherited, enabled at
//   the exec): one with the task and comm records, which wakes record at each (a thread or
//   process started or ended, an exec), and one with the executable mappings (MMAP2), read at
//   each pass, which wakes nobody;
// - a task-clock sampling event per thread, user space only, not inherited, opened by record at
//   the thread's PERF_RECORD_FORK (the command's first thread before its exec, enabled by the
//   exec), its period re-drawn in blocks against aliasing as drain mode's (clock/perf.hpp),
//   its weights from the counter (perf::credit), drained and closed at the thread's exit.
// Each pass takes the records of every ring and handles them in time order, so that a sample
// counts into the process image and the mappings of its moment: an exec (the comm record's
// COMM_EXEC) ends an image and starts the next, a fork's child starts with its parent's
// mappings. The images are kept in memory and become the run profile's processes (no file
// is made while the command runs). A SIGKILL of the program loses nothing: the rings are
// record's.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "profile/profile.hpp"

namespace sprofil::record {

class Agentless {
 public:
  struct Stats {
    uint64_t threads = 0;        // sampling events opened
    uint64_t not_opened = 0;     // threads whose event could not be opened or mapped
    uint64_t samples = 0;        // sample records read
    uint64_t lost = 0;           // samples the kernel dropped (full rings)
    uint64_t tracker_lost = 0;   // tracker records the kernel dropped
    uint64_t redraws = 0;        // periods re-drawn
    uint64_t exit_credited = 0;  // periods credited at a thread's end
    uint64_t images = 0;         // process images seen
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

  // Before the command's exec: opens the trackers and the first thread's sampling event on
  // `pid`, a child of record that waits to exec `argv`, all enabled by its exec. False, with
  // *why, where perf events are refused (nothing is left open).
  bool attach(pid_t pid, unsigned hz, const std::vector<std::string>& argv, std::string* why);
  // Starts the thread that reads the rings.
  void start();
  // After the command's end: its last records read, every event closed.
  void finish();
  // The process images seen, the command's first image first, then by start time.
  std::vector<Image> take_images();
  Stats stats() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace sprofil::record
