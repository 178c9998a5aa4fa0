// Completing a profile file at the end of a process image (a clean exit, or an exec): the
// records kept in anonymous memory (the file could not grow) are written after the others,
// the header's end fields are set, and at an exit the disk space reserved for pages no sample
// touched is given back. A forked child's file that never got a sample is removed instead.
#include <fcntl.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>

#include "agent/layout.hpp"
#include "agent/state.hpp"
#include "clock/perf.hpp"
#include "engine/engine.hpp"
#include "util/loaded_object.hpp"
#include "util/release_space.hpp"

namespace sprofil::agent {
namespace {

bool all_zero(const void* p, size_t n) {
  static const uint64_t zero[SPROF_PAGE / 8] = {};
  for (size_t off = 0; off < n; off += SPROF_PAGE)
    if (memcmp(static_cast<const char*>(p) + off, zero, SPROF_PAGE) != 0) return false;
  return true;
}

// Writes one record kept in memory at file offset `at` (its offsets set to match): the record
// page and the array pages that are not zero (the rest stays a hole).
bool write_record(int fd, const AgentRegion& a, uint64_t at) {
  sprof_region rec = *a.rec;
  layout::place_region(&rec, at);
  bool ok = fits_fsize(at + a.record_bytes) &&
            ftruncate(fd, static_cast<off_t>(at + a.record_bytes)) == 0 &&
            pwrite(fd, &rec, SPROF_PAGE, static_cast<off_t>(at)) == SPROF_PAGE;
  for (uint64_t p = SPROF_PAGE; p < mapped_bytes(a) && ok; p += SPROF_PAGE) {
    const char* page = reinterpret_cast<const char*>(a.rec) + p;
    if (!all_zero(page, SPROF_PAGE))
      ok = pwrite(fd, page, SPROF_PAGE, static_cast<off_t>(at + p)) == SPROF_PAGE;
  }
  return ok;
}

// Writes the records kept in anonymous memory into the file (fd) after the committed ones, as
// far as they fit (RLIMIT_FSIZE, disk space): first those with counts, then the others, each
// placed at the end of the file if it fits there (a small object is kept even when a large one
// before it is not). A record written once (before an exec that failed) is rewritten in place.
// Used at a clean exit and before an exec.
void write_spilled(int fd) {
  uint32_t committed = std::atomic_ref<uint32_t>(g_hdr->region_count).load();
  uint64_t end = std::atomic_ref<uint64_t>(g_hdr->regions_end).load();
  size_t lost = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = g_nfile; k < g_nregs; ++k) {
      AgentRegion& a = g_regs[k];
      const bool counted = a.counters != kNoCounters &&
                           !all_zero(a.counters, layout::array_bytes(a.rec->nbins, kCounterWidth));
      if (counted != (pass == 0)) continue;
      if (a.written_at != 0) {
        if (!write_record(fd, a, a.written_at)) lost += counted;
        continue;
      }
      if (!write_record(fd, a, end)) {
        (void)!ftruncate(fd, static_cast<off_t>(end));  // keep no partial record behind
        lost += counted;
        continue;
      }
      a.written_at = end;
      end += a.record_bytes;
      ++committed;
      std::atomic_ref<uint64_t>(g_hdr->regions_end).store(end, std::memory_order_release);
      std::atomic_ref<uint32_t>(g_hdr->region_count).store(committed, std::memory_order_release);
    }
  }
  if (lost > 0) {
    char n[32];
    snprintf(n, sizeof n, "%zu", lost);
    say("sprofil: %s: the counts of %s objects kept in memory did not fit and are lost\n",
        output_path(), n);
  }
}

// A forked child's file that never got a sample (the usual fork-then-exec) holds nothing:
// remove it rather than leave empty files behind.
bool drop_empty_child_file() {
  if (!empty_child_file()) return false;
  remove_output();
  return true;
}

// At a clean exit, with sampling stopped for good: gives back the disk space reserved for
// array pages that no sample touched (to the filesystem they are holes again, as untouched
// reserved space reads: SEEK_HOLE reports reserved space with no data as a hole).
void release_untouched(int fd) {
  for (size_t k = 0; k < g_nfile; ++k)
    util::release_unwritten(fd, g_regs[k].record_offset + SPROF_PAGE,
                            g_regs[k].record_offset + g_regs[k].record_bytes);
}

// The process's CPU time (user + sys), from getrusage: the header's start_cpu_ns and cpu_ns.
// Signal-safe.
uint64_t process_cpu_now() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
         static_cast<uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

}  // namespace

// Writes the end fields. The counts are already in the file. Signal-safe: getrusage, the
// clock, plain stores into the header (the _exit path, exit.cpp).
void finish_header() {
  if (!g_hdr) return;
  const uint64_t cpu = process_cpu_now();
  // The clock may have moved (itimer to cpu when the program took ITIMER_PROF or SIGPROF).
  // (last_clock_kind, not running_clock: the exec hook runs with the runtime mutex held.)
  if (g_on) g_hdr->clock = static_cast<uint32_t>(rt::last_clock_kind());
  layout::finish_header(g_hdr, cpu, now_ns());
  std::atomic_ref<uint32_t>(g_hdr->flags).fetch_or(SPROF_F_FINISHED);
}

bool empty_child_file() {
  return (g_hdr->flags & SPROF_F_CHILD) && std::atomic_ref<uint64_t>(g_hdr->delivered).load() == 0;
}

void fill_header(sprof_header* h, uint32_t flags, int argc, char* const* argv) {
  layout::HeaderInfo i;
  i.flags = flags;
  i.clock = static_cast<uint32_t>(g_clock.kind);
  i.tick_ns = g_clock.interval_ns;
  i.start_ns = now_ns();
  i.pid = getpid();
  i.ppid = getppid();
  i.start_cpu_ns = process_cpu_now();  // an exec'd image's includes the images' before it
  char cmdline[SPROF_CMDLINE_MAX];
  i.cmdline = cmdline;
  i.cmdline_len = argv ? util::join_argv(cmdline, sizeof cmdline, argc, argv)
                       : util::read_cmdline(cmdline, sizeof cmdline);
  // The kernel's name of the image (a script's own, where argv[0] is its interpreter's), as
  // perf and ps show it: the calling thread's, the main one at the start, the forking one in a
  // child, which is the child's.
  char comm[SPROF_COMM_MAX] = {};
  if (prctl(PR_GET_NAME, comm) == 0) i.comm = comm;
  // Every field but the tallies (overflow, delivered, lost), kept as they are: in drain mode
  // the record parent may have counted the main thread's first samples already (its event
  // went with the request for the file, drain_proto.hpp's kDrainNewFile). A new file's are 0.
  sprof_header& fresh = g_scratch.header;  // a page: not on the stack (g_mu is held)
  layout::fill_header(&fresh, i);
  constexpr size_t kFrom = offsetof(sprof_header, overflow);
  constexpr size_t kTo = offsetof(sprof_header, lost) + sizeof fresh.lost;
  memcpy(h, &fresh, kFrom);
  memcpy(reinterpret_cast<char*>(h) + kTo, reinterpret_cast<const char*>(&fresh) + kTo,
         sizeof fresh - kTo);
}

void stop_sampling() {
  engine::Table* old = nullptr;
  rt::install(engine::kAgentChannel, nullptr, g_clock, &old);
  engine::Table::destroy(old);
}

// The end of this image (sampling stopped): drops an empty child's file, else writes the
// counters kept in memory and the end fields, and at an exit releases untouched space. One
// re-open of the file, only when it is needed.
void complete_file(bool at_exit) {
  if (g_pending) return;  // no file of its own: the flush finished the one made, if any
  if (drop_empty_child_file()) return;
  const bool spilled = g_nfile < g_nregs;
  // In drain mode the record parent gives the space back after its last flush of this
  // process (which said the process exits): that takes about 0.2 ms of CPU per process on
  // the 2-core VM, paid outside the program (docs/agent.md, "Drain mode").
  const bool release = at_exit && g_nfile > 0 && !rt::perf::released_by_parent();
  const int fd = spilled || release ? reopen_output(/*quiet=*/!spilled) : -1;
  if (fd >= 0 && spilled) write_spilled(fd);
  finish_header();
  if (fd >= 0 && release) release_untouched(fd);
  if (fd >= 0) close(fd);
}

}  // namespace sprofil::agent
