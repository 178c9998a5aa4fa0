// The preloaded agent: profiles an unmodified program when libsprofil.so is loaded with
// SPROFIL_OUTPUT set (sprofil record does this through LD_PRELOAD). It builds one region per
// executable segment of every loaded object (the main program, shared libraries, the vDSO,
// and objects dlopen'd later) and keeps the counters in the output file itself, through a
// shared mapping: whatever happens to the process (exit, _exit, abort, SIGKILL) the file holds
// every sample taken. The counter space is reserved on disk when a region is added
// (fallocate), so a full disk cannot fault a sample later (in drain mode the record parent
// counts, and reserves each counter page as it first counts into it); memory grows only with the
// pages of counters actually hit. Counters that cannot go into the file (RLIMIT_FSIZE, no space,
// the file is gone) live in anonymous memory and are written at a clean exit if they fit.
//
// This file: the agent's state and start-up (the constructor). state.hpp lists the
// other files, one job each; docs/agent.md describes the whole.
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "agent/state.hpp"
#include "clock/perf.hpp"
#include "engine/engine.hpp"
#include "util/clock_ns.hpp"
#include "util/prefault.hpp"
#include "util/self_exe.hpp"

namespace sprofil::agent {

static_assert(offsetof(sprof_header, overflow) + 8 == offsetof(sprof_header, delivered) &&
                  offsetof(sprof_header, delivered) + 8 == offsetof(sprof_header, lost) &&
                  sizeof(engine::Tallies) == 24,
              "engine::Tallies must match the header's overflow, delivered, lost");

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> g_on{false};
sprof_header* g_hdr = nullptr;
AgentRegion* g_regs = nullptr;
size_t g_nregs = 0, g_capregs = 0;
size_t g_nfile = 0;
uint64_t g_file_end = 0;
uint64_t g_next_off = 0;
bool g_spilled = false;
bool g_lazy_arrays = false;
bool g_records_only = false;
bool g_with_system = false;
uint64_t g_stamp = 0;
uint32_t* g_unloaded = nullptr;
size_t g_nunloaded = 0, g_capunloaded = 0;
Snapshot* g_snap = nullptr;
rt::ClockRequest g_clock;
uint32_t g_bin_bytes = 4;
char g_exe[SPROF_PATH_MAX];
std::atomic<bool> g_pending{false};
uint64_t g_fork_ns = 0;
int g_fork_ppid = 0;
uint32_t g_fork_nfile = 0;
uint64_t g_fork_end = 0;
ScratchPage g_scratch;

uint64_t now_ns() {
  return util::clock_ns(CLOCK_REALTIME);
}

namespace {

Settings g_settings;  // large (a path): not on the constructor's stack

// The end of this library's data (the linker's; hidden: this object's own, not the program's).
extern "C" char _end[] __attribute__((visibility("hidden")));

// The pages a profiled process's start writes first, made present at once (util::prefault):
// the settings, the library's data after signal mode's tables by fd (the agent's buffers and
// state, the runtime's: 7 pages), and the heap that the start's lists and tables take (the
// block allocated and freed here is where the next allocations of glibc's malloc come from).
// Each was a page fault, 11 us on the AMD EPYC VM of docs/benchmarks.md; now the lot is two
// system calls and 1.4 us a page. Memory that the start would not write is left out: the
// tables (1 MiB), and the data when something else large lies after them (kMaxTail).
void prefault_start() {
  constexpr size_t kMaxTail = 64 * 1024;
  constexpr size_t kHeap = 5 * 4096;
  util::prefault(&g_settings, &g_settings + 1);
  const void *tables, *tables_end;
  rt::perf::fd_tables(&tables, &tables_end);
  const auto* tail = static_cast<const char*>(tables_end);
  if (tail <= _end && static_cast<size_t>(_end - tail) <= kMaxTail) util::prefault(tail, _end);
  if (void* p = malloc(kHeap)) {
    util::prefault(p, static_cast<char*>(p) + kHeap);
    free(p);
  }
}

// glibc calls an object's initializers with the program's argc, argv and envp.
__attribute__((constructor(200))) void agent_start(int argc, char** argv, char**) {
  // A setuid or setgid program: the caller's environment must not steer it. Not even read.
  if (getauxval(AT_SECURE)) return;
  const char* out = env("SPROFIL_OUTPUT");
  if (!out || !*out) return;
  prefault_start();
  set_quiet(env("SPROFIL_QUIET") != nullptr);
  Lock lock;
  const char* why = nullptr;
  errno = 0;
  if (!read_settings(out, &g_settings, &why)) {
    if (why)
      say("sprofil: not profiling: %s%s\n", why, "");
    else
      say("sprofil: not profiling: %s: %s\n", out, strerror(errno));
    return;
  }
  g_clock = g_settings.clock;
  g_bin_bytes = g_settings.bin_bytes;
  g_with_system = g_settings.system && clock_splits_system(g_clock);
  set_output_base(g_settings.base);
  const bool first = env("SPROFIL_STARTED") == nullptr;
  const int fd = create_output(first, true);
  // The header is written at once (fill_header): mapped present (a write fault of a shared
  // file page costs as much as an anonymous one).
  void* h =
      fd < 0 ? MAP_FAILED
             : mmap(nullptr, SPROF_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (h == MAP_FAILED) {
    const int e = errno;
    if (fd >= 0) {
      remove_output();
      close(fd);
    }
    say("sprofil: not profiling: cannot create %s: %s\n", out, strerror(e));
    return;
  }
  g_hdr = static_cast<sprof_header*>(h);
  // The record parent took the main thread's event with the file: drain mode runs, and the
  // parent reserves the arrays' pages as it counts into them.
  g_lazy_arrays = rt::perf::early_handed(g_clock.interval_ns);
  rt::perf::set_drain_only(g_lazy_arrays);  // nothing in the process may count into them
  rlimit as;
  const bool as_limited = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
  g_records_only = g_lazy_arrays && as_limited;
  // A signal per sample counts into the arrays, mapped into the program's address space: under
  // a limit, 16-byte bins (a sixteenth of 1-byte bins' space, a quarter of the text's size)
  // unless SPROFIL_BIN_BYTES says.
  constexpr uint32_t kLimitedBins = 16;
  if (!g_lazy_arrays && as_limited && g_bin_bytes < kLimitedBins && !g_settings.bins_asked) {
    g_bin_bytes = kLimitedBins;
    if (first)
      say("sprofil: an address-space limit (ulimit -v) is set: %s%s\n",
          "16-byte bins, so that the counters take a sixteenth of the program's address space "
          "that 1-byte bins would",
          " (the default perf clock maps none of it)");
  }
  g_file_end = g_next_off = SPROF_PAGE;
  setenv("SPROFIL_STARTED", "1", 1);  // later images of this run write files of their own
  fill_header(g_hdr, 0, argc, argv);
  util::self_exe(g_exe, sizeof g_exe);
  FoundList list = scan(nullptr);
  if (!list.partial && merge(list, false, fd) >= 0) g_stamp = list.stamp;
  free_list(&list);
  close(fd);  // from now on the agent holds no descriptor
  install_process_hooks();
  // Under `sprofil record` the perf clock hands each thread's event, with a new fd of this
  // file, to the record parent (drain mode, clock/drain_client.cpp).
  rt::perf::set_drain_file([] { return reopen_output(); });
  rt::perf::set_drain_child(pending_child);
  if (int e = publish()) {
    say("sprofil: not profiling: cannot start the clock: %s%s\n", strerror(e),
        e == EBUSY ? " (the program has its own handler on the profiling signal; "
                     "set SPROFIL_SIGNAL)"
                   : "");
    return;
  }
  // From now on the clock is the one "auto" resolved to: forked children and later
  // publishes use (and write) that one.
  rt::ClockRequest running;
  if (rt::running_clock(&running)) g_clock = running;
  g_hdr->clock = static_cast<uint32_t>(g_clock.kind);
  if (const char* reason = rt::auto_fallback_reason(); *reason) say("sprofil: %s%s\n", reason, "");
  g_on = true;
  install_exit_hooks();
}

}  // namespace
}  // namespace sprofil::agent
