// The record parent's side of drain mode (src/format/drain_proto.hpp has the protocol): a
// thread of `sprofil record` that receives each profiled thread's perf event from the agent,
// maps its ring, and adds every sample into that process's profile file (FILE.PID, mapped
// shared, records laid out as the agent wrote them), weighted by the task clock elapsed
// since the event's previous sample, in passes a quarter of the smallest ring's time apart
// (4-200 ms) and when the agent asks (a new thread, a dlclose, the end of a process image). It
// re-draws each event's period in blocks of records (PERF_EVENT_IOC_PERIOD) against aliasing
// with periodic code. Because the parent holds the
// events, a program killed with SIGKILL loses nothing: its rings are drained after it died.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "util/nocopy.hpp"

namespace sprofil::record {

class Drainer : util::NoCopy {
 public:
  Drainer();
  ~Drainer();

  // Listens on a Unix socket (in `dir` if its path fits, else in a private directory under
  // TMPDIR) and starts the draining thread. `dir` is the run's directory, where the agent's
  // files are named after `base` (profile_name.hpp). False, with *why, if it cannot.
  bool start(const std::string& dir, const std::string& base, std::string* why);
  // The socket's path: the agent's SPROFIL_DRAIN.
  const std::string& path() const;
  // In the forked child, before the exec: the RLIMIT_NOFILE that start() raised for the
  // drainer's fds goes back to what the program would have had.
  void restore_limits_in_child() const;
  // Drains every ring to the end, closes every event, stops the thread and removes the
  // socket. Idempotent.
  void finish();

  struct Stats {
    uint64_t events = 0;               // events received
    uint64_t samples = 0;              // sample records read
    uint64_t lost_records = 0;         // records the kernel dropped (ring full): counted as lost
                                       // samples in the file's header (perf::drop_lost)
    uint64_t unplaced = 0;             // samples of a process whose file could not be mapped
    int unplaced_errno = 0;            // why the last such file could not be mapped (0: unknown)
    uint64_t no_space = 0;             // samples whose counter's page could not be reserved
                                       // (a full disk): counted as lost in the file's header
    uint64_t exit_credited = 0;        // whole periods credited when their event ended
    uint64_t exit_unplaced = 0;        // the same for events that never had a record (no pc)
    uint64_t redraws = 0;              // periods re-drawn (PERF_EVENT_IOC_PERIOD, an IPI each)
    uint64_t throttled = 0;            // times the kernel resumed a throttled event: the
                                       // periods it counted meanwhile are lost samples
    uint64_t new_files = 0;            // process images' files made for them (kDrainNewFile)
    uint64_t new_files_refused = 0;    // asked for and not made (the agent made its own)
    uint64_t main_events = 0;          // their main threads' events opened here (kNewOpenEvent)
    uint64_t main_events_refused = 0;  // asked for and not opened (the agent opened its own)
    uint64_t child_files = 0;          // forked children's files made for them (kDrainChildFile)
    uint64_t child_files_refused = 0;  // asked for and not made (the child made its own)
    uint64_t pending_alone = 0;        // forked children's events that came without the files
                                       // (the file they were forked with, held here)
    uint64_t exits_seen = 0;           // processes whose exit completed their file without a
                                       // flush, seen ending here (a pidfd): then finished here
    uint64_t exits_completed = 0;      // processes seen ending here that exited without their
                                       // agent completing the file (a raw exit_group): completed
    uint64_t flushes = 0;              // kDrainFlush requests (an exit or exec that stops sampling)
    uint64_t finished_at_end = 0;      // forked children's files completed at their last event's
                                       // end (no flush: an exec removed it, or an _exit)
    uint64_t dropped = 0;              // processes that exited without a sample: file removed then
    uint64_t dropped_cpu_ns = 0;       // their CPU time
  };
  Stats stats() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace sprofil::record
