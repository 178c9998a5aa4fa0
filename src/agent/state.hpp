// The preloaded agent's shared state and the functions its files offer each other. The files:
//   agent.cpp        start-up and exit: the state below, the constructor, atexit
//   env.cpp          the SPROFIL_* environment
//   output_file.cpp  the profile file: creation, re-opening, reservation of disk space
//   objects.cpp      the loaded objects (dl_iterate_phdr) and their build-ids
//   layout.hpp       the record layout (format/layout.hpp, filled in the machine's order)
//   regions.cpp      region records with their counters, the engine table, merging a rescan
//   finish.cpp       completing a file: spilled records, end fields, untouched space
//   exit.cpp         the ends of a process: exit, quick_exit and the interposed _exit
//   fork.cpp         fork (a new file for the child, same addresses) and exec hooks
//   dlopen.cpp       the dlopen/dlmopen/dlclose interposers
//   mlock.cpp        the mlockall/munlockall interposers: the agent's mappings stay unlocked
// The signal handler never runs agent code: it only sees the engine table that publish()
// builds (engine/engine.cpp has the audit). Everything below is guarded by g_mu unless said.
#pragma once

#include <limits.h>
#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "clock/perf.hpp"
#include "clock/runtime.hpp"
#include "format/sprof_format.h"
#include "util/mutex.hpp"

struct link_map;  // <link.h>: an object in the loader's list

namespace sprofil::agent {

// The agent's counters: 4 bytes each, saturating (a region record's counter_width).
constexpr uint32_t kCounterWidth = 4;

struct AgentRegion {
  sprof_region* rec;       // the record's page: in the file mapping, or anonymous (!in_file)
  void* counters;          // its counters, just after it
  void* system;            // its system-time array after them (SPROF_R_SYSTEM), or null
  uint64_t record_bytes;   // the whole record: page and arrays (rec->record_size)
  uint64_t record_offset;  // where the record is (or goes) in the file
  bool live;
  bool in_file;         // a shared mapping of reserved file space; else anonymous memory
  uint64_t written_at;  // !in_file: where the record was written into the file (0: not yet)
  // The record's start, end and bin count, as in its page: what the engine's view of the live
  // regions is built from (live_insert), so that building it does not touch the page (in
  // drain mode the page is written by pwrite, and a program that loads nothing later never
  // maps it in: a page fault less per object at every start).
  uint64_t start = 0, end = 0, nbins = 0;
};

// A page of scratch memory for filling a header or a record before it is copied or written
// into the file (finish.cpp fill_header, regions.cpp add_region): one page of the agent's
// memory touched at start, not two. Guarded by g_mu.
union ScratchPage {
  sprof_header header;
  sprof_region region;
};
extern ScratchPage g_scratch;

// What the environment asked for (env.cpp).
struct Settings {
  rt::ClockRequest clock;
  uint32_t bin_bytes = 1;
  bool bins_asked = false;   // SPROFIL_BIN_BYTES set bin_bytes (else the default for the place)
  bool system = false;       // lay out system-time arrays where the clock splits
  char base[PATH_MAX] = {};  // SPROFIL_OUTPUT, made absolute
};

extern pthread_mutex_t g_mu;
extern std::atomic<bool> g_on;  // read without the lock by the dlopen fast path
extern sprof_header* g_hdr;
extern AgentRegion* g_regs;
extern size_t g_nregs, g_capregs;
extern size_t g_nfile;       // regions [0, g_nfile) are in the file mapping (a prefix)
extern uint64_t g_file_end;  // end of those records in the file
extern uint64_t g_next_off;  // where the next record goes (past g_file_end once spilled)
extern bool g_spilled;       // a record did not fit in the file: it and all later are anonymous
// The file's arrays are not reserved (only its record pages are): the record parent made the
// file and counts this process's samples (drain mode), reserving each array page it writes.
// Nothing in the process counts into them: drain mode has no in-process fallback, and a second
// session asking for another clock is refused (EBUSY, clock/runtime.cpp install).
extern bool g_lazy_arrays;
// With g_lazy_arrays under an address-space limit (RLIMIT_AS, `ulimit -v`): only each record's
// page is mapped, not its arrays, which nothing in the process writes. Mapped, the arrays took
// the program's address space (4 bytes of counters per byte of text at 1-byte bins: 38 MB for
// python3), and a program that fit its limit natively failed to allocate under sprofil.
extern bool g_records_only;
// The counters of a record whose arrays are not mapped (g_records_only): an address below
// mmap_min_addr, never mapped, so that a write (which drain mode never makes) would fault
// rather than land in the program's memory.
inline void* const kNoCounters = reinterpret_cast<void*>(uintptr_t{SPROF_PAGE});
// The bytes of a's record that are mapped: the page alone with g_records_only.
inline uint64_t mapped_bytes(const AgentRegion& a) {
  return g_records_only ? SPROF_PAGE : a.record_bytes;
}
extern bool g_with_system;    // new records get a system-time array
extern uint64_t g_stamp;      // the loader's adds + subs at the last merged scan
extern uint32_t* g_unloaded;  // the regions that are not live, in no order (reload candidates)
extern size_t g_nunloaded, g_capunloaded;
extern rt::ClockRequest g_clock;
extern uint32_t g_bin_bytes;
extern char g_exe[SPROF_PATH_MAX];  // the main program's path (read once: rescans run often)
// Drain mode, a forked child: true until it takes a file of its own (fork.cpp); its records
// are still the parent process's file's mappings, into which it must write nothing. The
// fork's time and parent, and the records it had (read by the hand-over without g_mu).
extern std::atomic<bool> g_pending;
extern uint64_t g_fork_ns;
extern int g_fork_ppid;
extern uint32_t g_fork_nfile;
extern uint64_t g_fork_end;

struct Lock : util::MutexGuard {
  Lock() : MutexGuard(&g_mu) {}
};

uint64_t now_ns();

// env.cpp. Every SPROFIL_* variable is read through env(): nothing under AT_SECURE.
const char* env(const char* name);
bool read_settings(const char* output, Settings* s, const char** why);
// Whether the clock (resolved, or about to be resolved for kAuto) counts system time apart.
bool clock_splits_system(const rt::ClockRequest& c);

// output_file.cpp
void set_quiet(bool quiet);
void say(const char* fmt, const char* a, const char* b);
// Under sprofil record, whether the run has ended (its directory is gone): nothing more is said.
bool run_is_over();
void set_output_base(const char* absolute_base);  // kept, not copied: it must outlive the agent
bool fits_fsize(uint64_t end);
int reserve(int fd, uint64_t off, uint64_t len);
// A record's space at off (the file's size, or within a reservation made by reserve_span):
// all of it reserved, or with g_lazy_arrays the file extended over it and its first page, the
// record's own, written with the contents at `page` (the write reserves its space). 0 or an
// errno value (the file is then cut back to off).
int reserve_record(int fd, uint64_t off, uint64_t len, bool spanned, const sprof_region* page);
// The records' space [off, off + len) of several records at once: reserved, or with
// g_lazy_arrays the file extended over it (each record's page is reserved by reserve_record).
int reserve_span(int fd, uint64_t off, uint64_t len);
int create_output(bool first, bool with_event);  // the fd, or -1 with errno set
int drained_child_output(int from);  // drain mode, a forked child: made by the record parent
bool pending_child(rt::perf::DrainChild* c, bool dir);  // perf::set_drain_child's
void take_file_if_pending();                            // fork.cpp: before a write into the file
// -1 when the file is not ours any more (said once unless quiet: at an exit, where only the
// untouched space is given back, a program that dropped its privileges hears nothing of it).
int reopen_output(bool quiet = false);
int read_output();  // read-only, -1 (quietly) when it is not ours any more
void remove_output();
const char* output_path();
void say_spilled(int err);

// mlock.cpp: a mapping the agent has just made, unlocked where the program's mlockall
// (MCL_FUTURE) locked it; forget_lock_future in a forked child (locks are not inherited).
void unlock_new(void* at, size_t len);
void forget_lock_future();

// An object as dl_iterate_phdr lists it: its load address, program headers and name
// pointer (the loader's own string, kept for the object's life). An object closed and another
// loaded at the same address with the same headers between two scans gets a new name string
// from the loader, so it is seen as gone and new.
struct ObjKey {
  uintptr_t addr;
  const void* phdr;
  const char* name;
};
inline bool key_less(const ObjKey& a, const ObjKey& b) {
  if (a.addr != b.addr) return a.addr < b.addr;
  if (a.phdr != b.phdr) return a.phdr < b.phdr;
  return reinterpret_cast<uintptr_t>(a.name) < reinterpret_cast<uintptr_t>(b.name);
}
inline bool key_eq(const ObjKey& a, const ObjKey& b) {
  return a.addr == b.addr && a.phdr == b.phdr && a.name == b.name;
}

// The objects of the last merged scan with their regions: a scan compares each object the
// loader lists with it and builds entries only for objects it does not hold. Immutable once
// published in g_snap; a scan runs without the lock on a reference taken under it.
struct SnapObj {
  ObjKey key;
  uint32_t reg_first, reg_n;  // its regions: Snapshot::regs[reg_first, reg_first + reg_n)
};
struct Snapshot {
  int refs;  // under g_mu: g_snap's own and each scan's
  uint64_t stamp;
  bool has_stamp;
  uint64_t subs;           // the loader's subs (unloads) when the scan was taken
  const ::link_map* tail;  // the last object of the loader's list then, or null (objects.cpp)
  size_t n;
  SnapObj* obj;      // in the loader's order (dl_iterate_phdr lists new objects last)
  uint32_t* sorted;  // object indices in key order
  uint32_t* regs;    // g_regs indices
  size_t nregs;
  long find(const ObjKey& k) const;  // the object's index, or -1
};
extern Snapshot* g_snap;             // under g_mu; null before start-up
Snapshot* acquire_snapshot();        // under g_mu: a reference to g_snap (or null)
void release_snapshot(Snapshot* s);  // under g_mu

// objects.cpp: one executable segment found by dl_iterate_phdr.
struct Found {
  uintptr_t obj_base, start, end, file_offset;
  uint32_t flags;
  uint8_t build_id[SPROF_BUILD_ID_MAX];
  uint32_t build_id_len;
  uint32_t path_off, path_len;  // the object's path: FoundList::names + path_off
};
// An object the scan did not find in its snapshot, with its segments v[first, first + n).
struct NewObj {
  ObjKey key;
  uint32_t found_first, found_n;
};
// A scan: which objects of its snapshot the loader still lists, and the objects it does not
// hold, with their segments and paths in one arena (only new objects are read: a scan costs
// a few comparisons per known object, it runs at every dlopen and dlclose).
struct FoundList {
  Found* v;
  size_t n, cap;
  char* names;  // NUL-terminated paths, back to back
  size_t names_len, names_cap;
  NewObj* objs;  // in the loader's order
  size_t nobjs, objs_cap;
  const Snapshot* known;   // what the scan compared with (the caller holds a reference), or null
  uint8_t* seen;           // per known object: listed by this scan
  size_t nseen;            // how many
  size_t cursor;           // the known object expected next (the loader's order is stable)
  uint64_t stamp;          // the loader's adds + subs when it was taken
  bool has_stamp;          // false on a libc without dlpi_adds: every scan is merged
  uint64_t subs;           // the loader's subs when it was taken
  const ::link_map* tail;  // the last object of the loader's list then, or null
  bool unchanged;          // same stamp as known: stopped at the first object, nothing else set
  bool started;
  bool partial;  // out of memory: not everything loaded is listed (not merged)
  const char* path(const Found& f) const { return names + f.path_off; }
};
FoundList scan(const Snapshot* known);  // needs no agent lock (the loader's lock suffices)
void free_list(FoundList* list);

// regions.cpp
bool add_region(int fd, const Found& f, const char* path, bool dlopened);
int publish();
// Before the clock starts again with the channel's table (the restart after a failed exec,
// which may take a signal where drain mode ran): the table brought up to the records, if
// publish() left it behind. The clock is stopped (nothing reads the table).
void catch_up_table();
// Brings the regions and g_snap in line with a scan; fd: the open output file, or -1 to
// re-open it if a region must be added. 1: regions changed, 0: not, -1: out of memory
// (nothing changed).
int merge(const FoundList& list, bool dlopened, int fd);

// finish.cpp
// The command line from argv where the caller has the process image's own (its start), else
// from /proc/self/cmdline.
void fill_header(sprof_header* h, uint32_t flags, int argc = 0, char* const* argv = nullptr);
// A forked child's file with no sample: complete_file removes it instead of completing it.
bool empty_child_file();
void complete_file(bool at_exit);
// The header's end fields (time, CPU time, effective rate) and its FINISHED flag.
void finish_header();
void stop_sampling();

// exit.cpp
// At the agent's start: its exit handlers (atexit, at_quick_exit), and the _exit that the
// interposed _exit and _Exit end with.
void install_exit_hooks();

// fork.cpp
void install_process_hooks();

}  // namespace sprofil::agent
