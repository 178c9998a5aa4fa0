// The drain protocol between the agent in a profiled program and the `sprofil record` parent
// that owns and drains its perf rings (src/record/drain.cpp and its parts). Header-only, plain
// data: the runtime (libc only) and the host tool both include it.
//
// The record parent listens on a Unix SOCK_SEQPACKET socket whose path it puts in
// SPROFIL_DRAIN. The agent connects once per message, sends one DrainMsg, and waits (bounded,
// kDrainAckMs) for a one-byte answer before it closes the connection:
// - kDrainAdd, with two fds (SCM_RIGHTS): a thread's perf event, opened and enabled by the
//   agent, and the process's profile file. The parent maps the ring (its first mapping makes
//   it: the pages are the parent's, halved if the locked-memory allowance refuses
//   ring_bytes) before it answers, then the agent closes its own copies: the program holds no
//   perf fd, no ring and receives no signal. A process image whose file the parent made
//   (kDrainNewFile) sends the event alone: it counts into that file, which the parent holds
//   until the process's flush; kAckNeedFile answers one the parent holds no file for (after a
//   flush, or another pid namespace), and the agent sends it again with the file.
// - kDrainFlush: the process is about to stop sampling (exit, exec): the parent disables,
//   drains and closes every event of that pid before it answers, so the file is complete
//   when the agent writes its end fields. A forked child without its own file sends none at
//   its exec where its events go with it (perf.hpp's remove_on_exec): the parent drains each
//   to its end when it sees it end (POLLHUP), and the last completes the file it made for the
//   child's samples, if any (the end fields of kFlushFinish, from the child's counter). A
//   kDrainNewFile first ends the events of its pid that ended (the image before's, removed at its
//   exec) where the parent has not seen that yet. With kFlushRelease in
//   flags (the process exits), the parent then, after its answer, gives back the file's reserved
//   space that no sample wrote (the region records' arrays), the agent's last job at an exit
//   outside drain mode. A process whose file the parent made and whose end it watches
//   (FileAnswer::watched: a pidfd) sends no flush at its exit: the agent writes the end fields, and
//   the parent, once the process has ended (the pidfd readable; every event of it ended before),
//   drains its events to their end, recomputes the file's effective rate from every sample counted
//   and gives back the space (or removes the file, empty) as after kFlushRelease. A file the
//   agent did not complete (a raw exit_group) the parent completes if the process exited and
//   was not killed (record/drain_ends.cpp, how_it_ended).
// - kDrainSync: objects of the process are about to be marked unloaded (a dlclose): the
//   parent drains every event of that pid, by the regions as they still are, before it
//   answers. Their samples were taken before the unmapping; drained after the change, those
//   in an object unloaded where another is then loaded would count into the new one.
// - kDrainChildFile, with two fds: the profile file of the process a forked child was forked
//   from (read-only) and the directory of the run's files (O_PATH). The child takes its own
//   file (it must write into it: a dlopen, a failed exec). The answer is a FileAnswer
//   and, when err is 0, the file's fd (SCM_RIGHTS), which the child maps its records onto:
//   the file the parent made for the child's samples already (kAddPending), else a new one
//   (format/profile_file.hpp: a private temporary, renamed to `name`.PID or .PID.k; its size
//   regions_end, the pages of the first region_count records copied, the arrays holes that the
//   parent reserves page by page as it counts into them (drain_rings.cpp, reserve_counter), the
//   header filled from the parent process's: CHILD, pid, ppid, start_ns). Any error: the
//   child makes the file itself. A pending child (kAddPending below) that cannot read the
//   parent process's file (removed: the record parent removes the file of a process that took
//   no sample at its end) sends the directory alone: the parent gives it the file made for its
//   samples, made now if there is none, from the file it holds.
// - kDrainNewFile, with one fd: the directory of the run's files (O_PATH). A process image's
//   own profile file (the agent's first job at start-up), made by the parent as
//   format/profile_file.hpp defines (a private temporary, its first page written, renamed to
//   `name` with kNewFirst in flags, else `name`.PID or .PID.k), so that the file system's
//   work of making a file (the inode, the rename: with the lone events below, 0.3-0.5 ms of a
//   short process's CPU on the ext4 of docs/benchmarks.md, "After 6cf1dab") is the parent's,
//   as perf record's own file is. Only for the peer's own pid. The
//   answer is a FileAnswer and, when err is 0, the file's fd. Any error: the agent makes the
//   file itself. The file is the parent's (its umask applies, not the program's): it lives in
//   the run's private directory until `sprofil record` collects it. With kNewOpenEvent in
//   flags and the kDrainAdd fields, the parent opens the asking (main) thread's event itself
//   (perf_event_open on that tid, the peer's own pid, while the thread waits for the answer)
//   and takes it as a kDrainAdd into the file just made (FileAnswer::added), so that a process
//   image's start is one exchange, and the event's opening (a system call of 86 us on the AMD
//   EPYC VM of docs/benchmarks.md) the parent's work, as perf record's events are perf's.
//   Not added (the parent could not open it): the agent opens the thread's event itself
//   later, with kDrainAdd. A second fd instead (an agent that opened it) is that event.
// A forked child under drain mode has no file of its own until it needs one: its events come
// with kAddPending and three fds (the event, the parent process's file, the run's directory;
// the kDrainChildFile fields), and the parent makes the child's file at the first sample it
// counts (most fork-then-exec children never get one, and leave no file behind). Where the
// parent made the file of the process the child was forked from (kDrainNewFile) the event
// comes alone, with that file's from_dev and from_ino: the parent takes the file it holds
// and the directory it made it in, also for 5 s after that process ended (the newest 64 such
// files: a launcher that exits right after its fork, its file removed, empty, before the
// child's first event came); kAckNeedFile if it has no such file, and the child sends the
// three fds. A pending child's later
// events (its threads') need neither once one of its events brought them: the parent keeps
// them for the child's process, and takes those events alone whether or not it still holds
// that file (gone with a daemon's launcher). Its flushes
// carry kFlushFinish with its CPU time and the time (cpu_ns, end_ns): the parent writes the
// end fields of the file it made, if any (the agent's own job at an exit or exec).
#pragma once

#include <limits.h>

#include <cstdint>

namespace sprofil::drain {

constexpr uint32_t kDrainMagic = 0x53504452;  // "SPDR"
constexpr uint32_t kDrainAdd = 1;
constexpr uint32_t kDrainFlush = 2;
constexpr uint32_t kDrainSync = 3;
constexpr uint32_t kDrainChildFile = 4;
constexpr uint32_t kDrainNewFile = 5;
constexpr uint32_t kFlushRelease = 1;  // DrainMsg::flags of a kDrainFlush
constexpr uint32_t kFlushFinish = 2;   // of a kDrainFlush: a forked child without its file
constexpr uint32_t kAddPending = 1;    // of a kDrainAdd: a forked child without its file
constexpr uint32_t kNewFirst = 1;      // of a kDrainNewFile: the run's first image (`name` itself)
constexpr uint32_t kNewOpenEvent = 2;  // of a kDrainNewFile: the parent opens the asking thread's
                                       // event (see kDrainNewFile)
constexpr int kDrainAckMs = 2000;      // the agent's bound on waiting for the parent's answer
// The one-byte answers (all but kDrainChildFile's and kDrainNewFile's).
constexpr char kAckDone = 0;
constexpr char kAckRefused = 1;
constexpr char kAckNeedFile = 2;  // to a kDrainAdd without the file: send it with the file

struct DrainMsg {
  uint32_t magic = kDrainMagic;
  uint32_t kind = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  uint64_t period_ns = 0;   // P: ns of task clock per sample
  uint64_t first_ns = 0;    // the event's first period (random in (0, P]); later ones are set
  uint64_t ring_bytes = 0;  // the ring asked for: meta page + data (a power of two pages)
  uint32_t jitter = 1;      // 0: SPROFIL_JITTER=0, keep the period at P
  uint32_t flags = 0;       // kDrainFlush: kFlushRelease, kFlushFinish; kDrainAdd: kAddPending
  uint64_t start_pc = 0;    // the thread's start routine, if known: the pc of its kernel time
                            // when it never had a user-space sample
  // The thread's and the process's CPU clocks when the event was opened (0: unknown): the
  // bases the parent holds the credits to (perf::base_at_open, the steal check).
  uint64_t thread_cpu_ns = 0;
  uint64_t process_cpu_ns = 0;
  // kDrainChildFile and kAddPending: the records to copy (the child's, as at the fork), the
  // file's base name (NUL-terminated, no '/'), the fork's time and the child's parent.
  // kDrainNewFile: the base name only.
  uint64_t regions_end = 0;
  uint32_t region_count = 0;
  int32_t ppid = 0;
  uint64_t start_ns = 0;
  char name[NAME_MAX + 1] = {};
  // kFlushFinish: the process's CPU time and the time now (the header's end fields).
  uint64_t cpu_ns = 0;
  uint64_t end_ns = 0;
  // kAddPending with the event alone: the file of the process the child was forked from.
  uint64_t from_dev = 0;
  uint64_t from_ino = 0;
};

// The answer to kDrainChildFile and kDrainNewFile: 0 and the name's k (profile_name.hpp), or an
// errno value.
struct FileAnswer {
  int32_t err = 0;
  int32_t k = 0;
  int32_t added = 0;    // kDrainNewFile: 1 if the event that came with it was taken
  int32_t watched = 0;  // kDrainNewFile: 1 if the parent sees the process end (a pidfd): its
                        // exit completes the file and sends no kDrainFlush
};

// What the agent asks of its events (perf_event_attr.sample_type): every record is the
// header, then ip, then the counter's value: PERF_SAMPLE_IP | PERF_SAMPLE_READ, read_format
// 0. (Not PERF_SAMPLE_PERIOD: a task-clock event reports the period it was opened with
// whatever PERF_EVENT_IOC_PERIOD set since; the parent knows the period it set.)
constexpr uint64_t kDrainSampleType = (1u << 0) | (1u << 4);

}  // namespace sprofil::drain
