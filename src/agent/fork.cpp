// Processes: a forked child keeps the parent's regions at the same addresses (so the
// published engine table stays valid) but backed by a file of its own, FILE.PID, whose counts
// start at zero; an exec completes the file first (a failed exec resumes sampling into it, or
// into a new one when the exec removed it as empty).
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "agent/state.hpp"
#include "clock/perf.hpp"
#include "engine/engine.hpp"

namespace sprofil::agent {
namespace {

// Gives up profiling in a forked child that cannot have a file of its own: it must not write
// into the parent's.
void child_stops(const char* why) {
  g_on = false;
  engine::Table* old = engine::global().exchange(engine::kAgentChannel, nullptr);
  (void)old;  // its memory belongs to the parent's copy; leave it
  say("sprofil: no profile file for the forked child: %s%s\n", why, "");
}

// Copies the record page at `off` of `from` into `to` (both files' offsets are the same).
bool copy_record(int from, int to, uint64_t off) {
  static sprof_region page;  // one buffer for every record: its page is touched once
  return pread(from, &page, SPROF_PAGE, static_cast<off_t>(off)) == SPROF_PAGE &&
         pwrite(to, &page, SPROF_PAGE, static_cast<off_t>(off)) == SPROF_PAGE;
}

// Gives this process a new file of its own, FILE.PID (its timers not armed): every record is
// re-mapped, at its address, onto reserved space of the new file (anonymous memory once that
// fails) and refilled; the arrays start at zero. The records in the parent's file are copied
// through the page cache (pread, pwrite: two system calls), not through the mappings: a forked
// child has the parent's shared pages unmapped until it touches them, and writing each record
// through the new mapping was a page fault per object (12-14 us each on the AMD EPYC VM of
// docs/benchmarks.md; a fork + exec of /bin/true from a small C program under `sprofil
// record`, 6 objects: 138 page faults in the child, 145 before). Records kept in memory, or all
// of them when the parent's file cannot be read, are copied from a saved copy. In drain mode
// the record parent makes the file, records copied and space reserved (drain_proto.hpp's
// kDrainChildFile): making it here was most of a fork-then-exec child's time before its exec
// (about 0.7 of 0.85 ms, by temporary timers, for a python3 child with 18 objects).
void take_own_file() {
  const int from = read_output();  // the parent's file: g_path still names it
  // In drain mode the record parent makes the file, every record in it (none kept in memory):
  // the child only maps it. A pending child asks even where it cannot read the file it was
  // forked with (gone: the record parent removes the file of a process that took no sample at
  // its end, a daemon's launcher that forks and exits): the record parent holds that file, and
  // the child's events count into the one it made from it, which the child must take, not a
  // new one beside it where their samples would never go.
  const bool pending = g_pending.load(std::memory_order_acquire);
  const bool ask = rt::perf::drain_mode() && g_nfile == g_nregs && (from >= 0 || pending);
  g_fork_nfile = static_cast<uint32_t>(g_nfile);
  g_fork_end = g_file_end;
  int fd = ask ? drained_child_output(from) : -1;
  const bool by_parent = fd >= 0;
  g_pending.store(false, std::memory_order_release);
  // Records [0, nfrom) are in the new file (the parent's) or copied into it from `from`.
  const size_t nfrom = by_parent ? g_nregs : from >= 0 ? g_nfile : 0;
  auto* saved = static_cast<sprof_region*>(malloc((g_nregs - nfrom + 1) * sizeof(sprof_region)));
  if (!saved) {
    if (fd >= 0) close(fd);
    if (from >= 0) close(from);
    return child_stops(strerror(ENOMEM));
  }
  const uint32_t clock = g_hdr->clock;
  for (size_t i = nfrom; i < g_nregs; ++i) saved[i - nfrom] = *g_regs[i].rec;
  if (fd < 0) fd = create_output(false, false);
  if (fd < 0) {
    const int e = errno;
    if (from >= 0) close(from);
    free(saved);
    return child_stops(strerror(e));
  }
  const int rw = PROT_READ | PROT_WRITE;
  if (mmap(g_hdr, SPROF_PAGE, rw, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
    const int e = errno;
    close(fd);
    if (from >= 0) close(from);
    free(saved);
    remove_output();
    return child_stops(strerror(e));
  }
  // No readahead on the header's page: it is first touched (fill_header below) when every
  // record's space is reserved, and a fault's readahead would then read the device's
  // read_ahead_kb of the new file (8 MB here) into the page cache, zeroing it page by page:
  // that was most of a fork's cost, and it grew with the reserved size (the bin width).
  madvise(g_hdr, SPROF_PAGE, MADV_RANDOM);
  g_spilled = false;
  g_nfile = 0;
  g_file_end = SPROF_PAGE;
  int err = 0;
  for (size_t i = 0; i < g_nregs; ++i) {
    AgentRegion& a = g_regs[i];
    const uint64_t len = a.record_bytes, map_len = mapped_bytes(a);
    void* at = a.rec;
    bool copied = false;
    if (!g_spilled) {
      err = by_parent ? 0 : reserve(fd, a.record_offset, len);
      if (err == 0 && i < nfrom) copied = by_parent || copy_record(from, fd, a.record_offset);
      if (err == 0 && i < nfrom && !copied) err = errno ? errno : EIO;
      if (err == 0 && mmap(at, map_len, rw, MAP_SHARED | MAP_FIXED, fd,
                           static_cast<off_t>(a.record_offset)) == MAP_FAILED) {
        err = errno;
      }
      if (err != 0) (void)!ftruncate(fd, static_cast<off_t>(a.record_offset));
      g_spilled = err != 0;
    }
    if (g_spilled) {
      copied = false;
      if (mmap(at, map_len, rw, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) ==
              MAP_FAILED ||
          (i < nfrom &&
           pread(from, at, SPROF_PAGE, static_cast<off_t>(a.record_offset)) != SPROF_PAGE)) {
        close(fd);
        if (from >= 0) close(from);
        free(saved);
        return child_stops(strerror(errno ? errno : EIO));
      }
      copied = i < nfrom;
    }
    if (!copied && i >= nfrom) *a.rec = saved[i - nfrom];
    madvise(at, map_len, MADV_RANDOM);
    a.in_file = !g_spilled;
    a.written_at = 0;
    if (a.in_file) {
      g_nfile = i + 1;
      g_file_end = a.record_offset + len;
    }
  }
  close(fd);
  if (from >= 0) close(from);
  free(saved);
  if (g_spilled) say_spilled(err);
  g_lazy_arrays = by_parent;  // the record parent's file: it reserves the arrays as it counts
  if (!by_parent) fill_header(g_hdr, SPROF_F_CHILD);  // the parent's has its tallies
  g_hdr->clock = clock;
  g_hdr->regions_end = g_file_end;
  g_hdr->region_count = static_cast<uint32_t>(g_nfile);
}

// In the forked child, before its timers are armed. In drain mode, with every record in the
// file, the child takes no file yet: the record parent makes one at its first sample (most
// fork-then-exec children get none and leave none), and the child takes it when it must write
// into it (a dlopen or dlclose, a failed exec). Making a file and removing it again at the
// exec was most of what profiling cost a fork-then-exec child, and the churn made ext4's
// inode allocation slow (recently_deleted): bench/process_loop.sh, docs/benchmarks.md.
void after_fork_child() {
  forget_lock_future();  // the parent's MCL_FUTURE is not inherited
  if (!g_on) return;
  g_fork_ns = now_ns();
  g_fork_ppid = static_cast<int>(getppid());
  if (rt::perf::drain_mode() && g_nfile == g_nregs && g_nfile > 0) {
    g_fork_nfile = static_cast<uint32_t>(g_nfile);
    g_fork_end = g_file_end;
    g_pending.store(true, std::memory_order_release);
    return;
  }
  take_own_file();
}

}  // namespace

// A pending child (drain mode) takes its own file before it writes into one.
void take_file_if_pending() {
  if (g_pending.load(std::memory_order_acquire)) take_own_file();
}

namespace {

// With the clock stopped and its samples in the file (drain mode's parent has added the
// time the process spent in the kernel since its last sample).
void before_exec() {
  if (!g_on || g_pending) return;  // a pending child's file, if any, the flush finished
  complete_file(false);            // no release: a failed exec resumes sampling into the same pages
}

// Before the clock starts again (nothing was counted since before_exec). An empty child's
// file was removed at the exec: a new one is the same file under its name again.
void after_failed_exec() {
  if (!g_on) return;
  catch_up_table();
  if (g_pending) {  // the file made for its samples (finished at the flush), or a new one
    take_own_file();
    if (g_on) std::atomic_ref<uint32_t>(g_hdr->flags).fetch_and(~SPROF_F_FINISHED);
    return;
  }
  if (empty_child_file())
    take_own_file();
  else
    std::atomic_ref<uint32_t>(g_hdr->flags).fetch_and(~SPROF_F_FINISHED);
}

}  // namespace

void install_process_hooks() {
  // g_mu is held only for a merge of a scan and a publish (never across dl_iterate_phdr), so a
  // fork does not wait behind a long rescan.
  util::ForkSafeMutex<&g_mu>::install();
  rt::set_hooks(rt::Hooks{after_fork_child, before_exec, after_failed_exec, run_is_over});
}

}  // namespace sprofil::agent
