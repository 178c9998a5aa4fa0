// The in-memory form of a .sprof profile (src/format/sprof_format.h), used by every host-side
// tool: reader, writer, merge, symbolization and reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "format/sprof_format.h"

namespace sprofil::profile {

// a + b, or UINT64_MAX when the sum does not fit: every total of counts is summed with this.
inline uint64_t sat_add(uint64_t a, uint64_t b) {
  uint64_t r;
  return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

// The sampling clock a profile was taken with: one enumerator per row of SPROF_CLOCKS
// (format/sprof_format.h), numbered by the row's on-disk id; profile.cpp checks, row by row,
// that every row has its enumerator. Names and descriptions come from the table.
enum class Clock : uint32_t {
  kCpu = SPROF_CLOCK_CPU,
  kItimer = SPROF_CLOCK_ITIMER,
  kPerf = SPROF_CLOCK_PERF,
  kWall = SPROF_CLOCK_WALL,
  kSampler = SPROF_CLOCK_SAMPLER,
};
const char* clock_name(Clock c);         // "cpu"
const char* clock_description(Clock c);  // "per-thread CPU-time timers"
// Whether the clock also ticks while a thread waits (the table's off_cpu: wall): its samples
// are thread time on and off the CPU, not CPU time.
bool counts_off_cpu(Clock c);
// What the clock's samples measure, by the table's off_cpu: "CPU time" (cpu, itimer, perf,
// sampler), or "thread time on and off the CPU" (wall). Two clocks of one measure count the
// same quantity: their shares compare (diff), where two of different measures do not.
const char* clock_measure(Clock c);
inline bool same_measure(Clock a, Clock b) {
  return counts_off_cpu(a) == counts_off_cpu(b);
}

struct Region {
  std::string path;               // object path; "[vdso]" for the vDSO
  std::vector<uint8_t> build_id;  // may be empty
  uint32_t flags = 0;             // SPROF_R_*
  uint64_t start = 0, end = 0;    // runtime addresses [start, end)
  uint64_t load_bias = 0;         // runtime address - ELF virtual address
  uint64_t file_offset = 0;       // offset in the object file that maps to `start`
  uint32_t bin_size = 4;          // bytes of text per counter
  uint32_t counter_width = 4;     // 2, 4 or 8
  uint64_t load_ns = 0, unload_ns = 0;
  uint32_t process = 0;  // index in Profile::processes (0 when it has none)

  // One bin with a non-zero count: system is the part of count the thread spent in the kernel
  // (0 where the profile does not tell; always <= count).
  struct Bin {
    uint64_t index = 0, count = 0, system = 0;
    bool operator==(const Bin&) const = default;
  };
  // The non-zero bins only, sorted by index (memory follows the samples, not the region's
  // size). Inside src/profile only; other code reads them with for_each_bin and builds
  // regions with add.
  std::vector<Bin> bins;

  // Bins the address range needs: ceil((end - start) / bin_size) (0 if start >= end or
  // bin_size is 0). Bin i covers [start + i*bin_size, ...).
  uint64_t nbins() const;
  // Adds count (and its system part) to bin `index`, saturating at UINT64_MAX; system is
  // clamped to the bin's count. Appending in index order is O(1); otherwise O(bins).
  void add(uint64_t index, uint64_t count, uint64_t system = 0);
  // Subtracts o's counts and system parts from this region's, bin by bin, flooring at 0 (the
  // samples of a later snapshot not already in an earlier one); bins that reach 0 go.
  void subtract(const Region& o);
  uint64_t count_at(uint64_t index) const;   // 0 for a bin without samples
  uint64_t system_at(uint64_t index) const;  // 0 for a bin without samples
  uint64_t max_count() const;                // the largest bin's count (0 when none)
  bool empty() const { return bins.empty(); }
  // Sums of every bin's count and system part (saturating).
  uint64_t total() const;
  uint64_t system_total() const;
  bool has_system() const;  // SPROF_R_SYSTEM: the profile tells the system part of each bin
  // Calls f(index, count, system) for every bin with a non-zero count, in index order; system
  // is the part of count spent in the kernel (0 where the profile does not tell). Code outside
  // src/profile reads the counts through this, whatever their representation.
  template <class F>
  void for_each_bin(F&& f) const {
    for (const Bin& b : bins) f(b.index, b.count, b.system);
  }
  // The runtime address of bin i's first byte.
  uint64_t bin_address(uint64_t i) const { return start + i * bin_size; }
};

// One process of a run profile: its v1 header's fields, plus the command name and the file-name
// suffix the runtime gave its file ("", ".PID" or ".PID.N").
struct Process {
  int32_t pid = 0, ppid = 0;
  std::string comm;  // basename of argv[0], at most 15 bytes
  std::string name;  // the runtime's file-name suffix
  std::vector<std::string> argv;
  uint32_t flags = 0;  // SPROF_F_*
  Clock clock = Clock::kCpu;
  uint32_t requested_hz = 0;
  uint64_t tick_ns = 0;
  double effective_hz = 0;
  uint64_t start_ns = 0, end_ns = 0, cpu_ns = 0;
  uint64_t overflow = 0, delivered = 0, lost = 0;
};

// The narrowest counter width (2, 4 or 8 bytes) that holds max_count.
uint32_t counter_width_for(uint64_t max_count);

// The command name perf and ps show: the basename of argv[0], cut to 15 bytes.
std::string comm_of(const std::vector<std::string>& argv);

struct Profile {
  uint32_t version = 1;
  // A single process's command name as its file tells it (the kernel's); empty: not told, the
  // basename of argv[0] (comm_of) stands in. A run profile's are in processes.
  std::string comm;
  uint32_t flags = 0;  // SPROF_F_*
  Clock clock = Clock::kCpu;
  uint32_t requested_hz = 0;
  uint64_t tick_ns = 0;     // time one count stands for
  double effective_hz = 0;  // delivered samples per CPU-second; 0 = unknown
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t cpu_ns = 0;
  // A file of the runtime's: the process's CPU time when this image started, where cpu_ns is
  // the process's (an exec'd image's counts the images before it; record's collect makes it
  // the image's own). Not written: the tools' files hold each image's own cpu_ns.
  uint64_t start_cpu_ns = 0;
  int32_t pid = 0, ppid = 0;
  std::vector<std::string> argv;
  std::vector<Region> regions;
  uint64_t overflow = 0;   // samples in no region
  uint64_t delivered = 0;  // samples delivered to the handler
  uint64_t lost = 0;       // delivered but not counted (saturated, stopped, dropped by the kernel)

  // Every process (a v1 file has one, from its header). The fields above describe the whole
  // profile: sums of the processes' tallies and CPU, the root's (first) argv, clock and rate.
  std::vector<Process> processes;
  bool run = false;                // read from (or to be written as) a run profile
  uint64_t run_cpu_ns = 0;         // CPU of the whole run (every process); 0 = unknown
  uint64_t dropped_processes = 0;  // processes of the run that took no sample
  uint64_t run_start_ns = 0, run_end_ns = 0;
  int32_t exit_status = 0;  // the recorded command's exit status (run profiles)
  uint64_t throttled = 0;   // times the kernel throttled the run's sampling (run profiles)
  // Threads that ended before their first sample, and their time credited at their creators'
  // last pc, in samples (run profiles sampled from outside).
  uint64_t unsampled_threads = 0, unsampled_thread_ticks = 0;
  // Processes whose program (after its exec) ended before its first sample, and their time
  // credited at its entry point, in samples (run profiles sampled from outside).
  uint64_t unsampled_processes = 0, unsampled_process_ticks = 0;

  bool finished() const;  // SPROF_F_FINISHED
  uint64_t counted() const { return delivered > lost ? delivered - lost : 0; }
  // Sum of all counts, overflow included: what percentages are relative to (saturating).
  uint64_t total_samples() const;
  // True if any region tells the system part of its counts (SPROF_R_SYSTEM).
  bool has_system() const;
  // Sum of the regions' system parts (saturating); the overflow has none.
  uint64_t system_samples() const;
};

// A single-process profile's header fields as a process (comm from argv, no name), and the
// reverse: a profile's header fields (version, flags, clock, rates, times, ids, argv,
// tallies) from a process. Every copy between the two goes through these.
Process process_of(const Profile& p);
void set_header(Profile* p, const Process& pr);
// Every process's single-process profile in a run (its header fields and its regions), in one
// pass over the regions (a pass a process took a run of 3,000 processes 13 million steps); and
// one process's (the same, for a run of one process: the live client's answer).
std::vector<Profile> process_images(const Profile& p);
Profile process_image(const Profile& p, size_t process);
// Combines single-process profiles into a run profile: processes in the given order (the first
// is the root), regions tagged with their process, top-level fields as described above.
Profile combine_processes(std::vector<Profile> parts, const std::vector<std::string>& names);
// Each region's absolute path with its symbolic links resolved (realpath), where the file is
// still there: the path the kernel gives a mapping. The agent names a library as the loader
// found it (/lib/x86_64-linux-gnu/libgmp.so.10, a link), record's default as the kernel maps it
// (/usr/lib/x86_64-linux-gnu/libgmp.so.10.4.1), and one object should read the same in both
// (diff, --object). For the host, right after the run (record) or on a live snapshot.
void resolve_paths(Profile* p);
// The samples of `after` not already in `before`, two snapshots of one running program: bins,
// tallies and CPU time subtracted (never below zero); regions are matched by range, path and
// bin size, and a region new in `after` counts whole. Used for live windows (serve, top).
Profile delta(const Profile& before, const Profile& after);

// The run's CPU time (run_cpu_ns; 0 if unknown) that no sample stands for. CPU clocks:
// run_cpu_ns minus samples x tick_ns -- each process's start-up before its sampling began (the
// loader, the agent: about 1 ms a process), the processes without samples, the time after the
// agent's flush at exit -- so that samples x tick + this = the run's CPU (the perf clock's
// weights keep samples x tick each sampled thread's task clock, unbiased even for a thread
// shorter than a period). The wall clock, whose samples are not CPU time: run_cpu_ns minus the
// stored processes' cpu_ns, the CPU in no process's profile.
uint64_t unsampled_cpu_ns(const Profile& p);

// The CPU time the samples stand for: samples x tick_ns (saturating).
uint64_t sampled_ns(const Profile& p);

// "" unless threads of the run that ended before their first sample (`unsampled_threads`,
// sampled from outside) carry a tenth of its samples or more: how many, that their time is at
// their creators' last pc as system time, and what samples them instead. Record's warning and
// report's note (report/labels.hpp).
std::string unsampled_threads_note(const Profile& p);

// The same for processes (`unsampled_processes`): programs that ended before their first sample
// (as in a shell loop of short commands), whose time is at their entry points as system time.
std::string unsampled_processes_note(const Profile& p);

// "" unless the samples stand for more CPU than the run's (run_cpu_ns: the command's tree as
// wait4 counts it, a process once its parent waited for it) by over a twentieth and two ticks
// (CPU clocks): then by how much, and why. A process that no parent waited for before the
// command ended (still running then, as a browser's helpers, or left to init, a daemon) is in
// the samples and not in the run's CPU, which then read as if nothing were unsampled.
std::string unwaited_note(const Profile& p);

// The whole of several profiles' tallies and times (a run's processes, merged runs): counts
// saturate; start is the earliest, end the latest (0 unless every part finished); CPU time 0
// unless every part's is known; the rate is the CPU-weighted mean of the parts' rates. A part
// with neither samples nor CPU time (an image that record sampled from outside and that took no
// sample: its sampled CPU is 0) adds nothing to either, and leaves them known.
class TallySum {
 public:
  void add(const Profile& p);
  // Sets out's overflow, delivered, lost, start/end, cpu_ns, effective_hz and FINISHED flag.
  void store(Profile* out) const;

 private:
  uint64_t start_ns_ = 0, end_ns_ = 0, cpu_ns_ = 0, overflow_ = 0, delivered_ = 0, lost_ = 0;
  bool any_ = false, finished_ = true, cpu_known_ = true, hz_known_ = true;
  double weighted_hz_ = 0, hz_weight_ = 0;
};

}  // namespace sprofil::profile
