// Record's default (agentless_state.hpp): each pass's records, from every CPU's ring in time
// order, into the process images: samples counted at their pc in the mappings of their
// moment, a fork's child, an exec's new image, a thread's end, and the periods re-drawn.
#include "record/agentless_state.hpp"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>

#include "clock/perf.hpp"
#include "format/sprof_format.h"
#include "record/process_end.hpp"
#include "symbolize/perf_map.hpp"
#include "util/clock_ns.hpp"
#include "util/xorshift.hpp"

namespace sprofil::record {

using namespace agentless_impl;

// A copy is first seen at its first sample or its end: it counted from its thread's clone,
// in the image the thread was cloned in.
Copy& Agentless::State::copy_of(uint64_t id, pid_t tid) {
  auto [it, fresh] = copies.try_emplace(id);
  if (fresh) {
    ids_of[tid].push_back(id);
    ++stats.copies;
  }
  return it->second;
}

Img& Agentless::State::new_img(pid_t pid, pid_t ppid, uint64_t time) {
  imgs.emplace_back();
  Img& m = imgs.back();
  m.pid = pid;
  m.ppid = ppid;
  m.start = time;
  ++stats.images;
  return m;
}

Img* Agentless::State::img_of(pid_t pid) {
  const size_t i = img_index(pid);
  return i == ~size_t{0} ? nullptr : &imgs[i];
}

size_t Agentless::State::img_index(pid_t pid) const {
  if (const auto p = procs.find(pid); p != procs.end()) return p->second.img;
  if (const auto g = gone_procs.find(pid); g != gone_procs.end()) return g->second.first;
  return ~size_t{0};
}

// An image that ends with its exec's arguments not read takes its name: its process has let go
// of its memory (the kernel writes the exit record after that) or made a new exec, whose
// arguments a read would give (a read cost a short process's record a failed /proc lookup).
void Agentless::State::end_img(size_t img, uint64_t time, bool finished) {
  Img* m = &imgs[img];
  if (m->argv_pending) m->argv = {m->comm};
  m->argv_pending = false;
  m->ended = true;
  m->finished = finished;
  m->end = time;
  add_before_entry(m);
  ended_imgs.emplace_back(img, 3);
}

// An ended image keeps only the mappings it is written or credited with: those with samples,
// those that hold a pc of one of its threads' ends (run_end credits them there; pc 0 is its
// program's entry point: credit_at_end), and its program's, written even without samples
// (image()) where the image is written at all (collect_images drops one that is not the
// command's and has no sample). A process forked from a shell copies the shell's mappings
// and its exec maps the loader, libc and the vDSO: a loop of 20,000 /bin/true kept 9
// mappings a process till the run's end, 143 MB of record's memory; 86 MB now.
void Agentless::State::compact(size_t img) {
  Img& m = imgs[img];
  std::vector<uint64_t> pcs;
  for (auto it = ends.lower_bound({img, 0}); it != ends.end() && it->first.first == img; ++it)
    pcs.push_back(it->first.second != 0 ? it->first.second : m.entry_pc);
  const bool written = m.root || m.delivered != 0 || !pcs.empty();
  const auto needed = [&](const Reg& g) {
    if (!g.bins.empty() || (written && (g.r.flags & SPROF_R_MAIN))) return true;
    for (const uint64_t pc : pcs)
      if (pc >= g.r.start && pc < g.r.end) return true;
    return false;
  };
  std::vector<size_t> index(m.regs.size(), ~size_t{0});
  std::vector<Reg> kept;
  for (size_t i = 0; i < m.regs.size(); ++i) {
    if (!needed(m.regs[i])) continue;
    index[i] = kept.size();
    kept.push_back(std::move(m.regs[i]));
  }
  stats.regions_dropped += m.regs.size() - kept.size();
  m.regs = std::move(kept);
  for (auto it = m.live.begin(); it != m.live.end();) {
    if (index[it->second] == ~size_t{0}) {
      it = m.live.erase(it);
    } else {
      it->second = index[it->second];
      ++it;
    }
  }
}

// The process's command line now: empty where it is gone (`*gone` set: no such process), or
// while an exec has not put the new image's arguments in place (the kernel's comm record comes
// before that).
std::vector<std::string> Agentless::State::cmdline(pid_t pid, bool* gone) {
  std::vector<std::string> argv;
  const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  *gone = fd < 0 && (errno == ENOENT || errno == ESRCH);
  if (fd >= 0) {
    std::string all;
    char buf[4096];
    ssize_t n;
    while (all.size() < SPROF_CMDLINE_MAX && (n = read(fd, buf, sizeof buf)) > 0)
      all.append(buf, static_cast<size_t>(n));
    close(fd);
    for (size_t at = 0; at < all.size();) {
      const size_t z = all.find('\0', at);
      argv.push_back(all.substr(at, z == std::string::npos ? std::string::npos : z - at));
      if (z == std::string::npos) break;
      at = z + 1;
    }
  }
  return argv;
}

// An exec's image takes its arguments as soon as they are there (at the end of each pass, and
// of the run); its name if it ends first (end_img()) or is found gone (a short process, gone
// before the pass that read its exec: no second look at /proc).
void Agentless::State::settle_argv(Img* m, bool ending) {
  if (!m->argv_pending) return;
  bool gone = false;
  m->argv = cmdline(m->pid, &gone);
  if (m->argv.empty() && !ending && !gone) return;
  if (m->argv.empty()) m->argv.push_back(m->comm);
  m->argv_pending = false;
}

// The periods that `records` records ring r dropped stand for: each copy's period is its own,
// drawn at its clone, 0.8 to 1.33 times the nominal (its rate uniform in 3/4 to 5/4 of the
// nominal: rt::perf::jittered_period), so a record is the mean period of the ring's samples,
// not one nominal period (a thread that lost 10,000 records of its long period was 2-9% short).
// Before the ring's first sample, the nominal one.
uint64_t Agentless::State::lost_periods(const Ring& r, uint64_t records) const {
  if (r.sampled == 0 || period == 0) return records;
  const unsigned __int128 ns = static_cast<unsigned __int128>(records) * r.sampled_ns;
  const unsigned __int128 per = static_cast<unsigned __int128>(r.sampled) * period;
  return static_cast<uint64_t>((ns + per / 2) / per);
}

// Every record of every ring, in time order; then the periods re-drawn where due.
//
// The rings are read one after the other, so a record read from a later ring can be older
// than one that an earlier ring took after record read it: a thread cloned on CPU 0 just
// after ring 0's read that exited on CPU 1 before ring 1's had its EXIT record a pass before
// its FORK record. Its process's count of threads then fell to none while it ran, and its
// later threads and samples were not counted (both CPUs busy beside record: 5 runs in 190 of
// `agent_prog churn 1500 400 2 0.3` at 1 kHz in the ASan build, 0.5-1.1 s of their 1.3 s of
// CPU unsampled; docs/agent.md, "A thread's end before its clone"). So a pass takes only the
// records older than its start (less kOrderSlackNs), which every ring had made readable before it
// was read; the others wait, with the next pass's reads, for the next pass. `all` (the run's end:
// the command is gone) takes them all.
void Agentless::State::pass(bool all) {
  const uint64_t began = util::clock_ns(CLOCK_MONOTONIC);
  std::vector<Rec> recs = std::move(held);
  held.clear();
  for (uint32_t k = 0; k < rings.size(); ++k) {
    rings[k].read(began, [&](const perf_event_header& h, const std::vector<unsigned char>& b) {
      if (b.size() < kSampleIdBytes) return;
      const bool is_sample = h.type == PERF_RECORD_SAMPLE;
      // This thread's own (its originals are on: enable()): its samples and its mappings.
      if (h.type != PERF_RECORD_LOST &&
          field<uint32_t>(b, is_sample ? kSamplePid : b.size() - kSampleIdBytes) ==
              static_cast<uint32_t>(self)) {
        stats.own += is_sample;
        return;
      }
      Rec r;
      r.type = h.type;
      r.misc = h.misc;
      r.ring = k;
      // A sample's time is its third field; a side-band record's is in its sample_id.
      r.time = field<uint64_t>(b, is_sample ? kSampleTime : b.size() - kSampleIdBytes + 8);
      r.body = b;
      recs.push_back(std::move(r));
    });
  }
  std::stable_sort(recs.begin(), recs.end(),
                   [](const Rec& a, const Rec& b) { return a.time < b.time; });
  if (!all) {
    const uint64_t ripe = began > kOrderSlackNs ? began - kOrderSlackNs : 0;
    const auto young =
        std::find_if(recs.begin(), recs.end(), [&](const Rec& r) { return r.time >= ripe; });
    held.assign(std::make_move_iterator(young), std::make_move_iterator(recs.end()));
    recs.erase(young, recs.end());
  }
  forked = false;
  for (const Rec& r : recs) {
    const auto& b = r.body;
    switch (r.type) {
      case PERF_RECORD_SAMPLE:
        rings[r.ring].sampled_ns += field<uint64_t>(b, kSamplePeriod);
        ++rings[r.ring].sampled;
        if (!keep(field<uint64_t>(b, kSampleSet), r.ring, r.time)) {
          ++stats.set_off;
          break;
        }
        if (!throttled_at.empty()) ran_on(r.ring, field<uint64_t>(b, kSampleCopy), r.time);
        sample(r);
        break;
      case PERF_RECORD_LOST: {  // which thread's samples the full ring dropped is not known
        const uint64_t n = field<uint64_t>(b, 8), w = lost_periods(rings[r.ring], n);
        stats.lost += n;
        stats.lost_periods += w;
        if (!imgs.empty()) {
          imgs.front().lost += w;
          imgs.front().delivered += w;
        }
        break;
      }
      case PERF_RECORD_FORK:
        fork(r);
        break;
      case PERF_RECORD_EXIT:
        exit(r);
        break;
      case PERF_RECORD_COMM:
        comm(r);
        break;
      case PERF_RECORD_MMAP2:
        mmap2(r);
        break;
      case PERF_RECORD_THROTTLE:  // the kernel stopped an event's samples till its next tick
        throttled(r);
        break;
      case PERF_RECORD_UNTHROTTLE:
        unthrottled(r);
        break;
    }
  }
  for (auto it = gone_tids.begin(); it != gone_tids.end();) {
    if (--it->second.passes > 0) {
      ++it;
      continue;
    }
    thread_end(it->first, it->second);
    it = gone_tids.erase(it);
  }
  for (auto it = gone_procs.begin(); it != gone_procs.end();)
    it = --it->second.second > 0 ? std::next(it) : gone_procs.erase(it);
  for (auto& e : ended_imgs) --e.second;  // oldest first: each pass's ends are added last
  for (; !ended_imgs.empty() && ended_imgs.front().second <= 0; ended_imgs.pop_front())
    compact(ended_imgs.front().first);
  argv_pending = false;
  for (auto& [pid, p] : procs) {
    settle_argv(&imgs[p.img], false);
    argv_pending |= imgs[p.img].argv_pending;
  }
  // A new period for the clones to come where some were made.
  if (jitter && (forked || redraw_due)) redraw();
  redraw_due = false;
}

// How long run() waits for the next pass: 1 ms while an exec's arguments are pending or an
// exec record is held (they are read from /proc while its process lives), kClonePassMs after
// a clone or while a clone record is held (the clones share the period a pass re-draws), else
// kPassMs.
int Agentless::State::next_pass_ms() const {
  bool exec = argv_pending, clone = forked;
  for (const Rec& r : held) {
    exec |= r.type == PERF_RECORD_COMM && (r.misc & PERF_RECORD_MISC_COMM_EXEC);
    clone |= r.type == PERF_RECORD_FORK;
  }
  return exec ? 1 : clone ? kClonePassMs : kPassMs;
}

// A sample record: in the kernel (where sampled), at the user pc the thread returns to.
void Agentless::State::sample(const Rec& r) {
  const auto& b = r.body;
  uint64_t ip = field<uint64_t>(b, 0);
  const bool in_kernel = (r.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
  if (in_kernel) {
    if (!kernel || field<uint64_t>(b, kSampleAbi) == PERF_SAMPLE_REGS_ABI_NONE) return;
    ip = field<uint64_t>(b, kSampleUserPc);
  }
  const pid_t pid = field<uint32_t>(b, kSamplePid);
  // The command before its exec runs record's code (its events are on from its fork: enable()).
  if (pid == root_pid && !root_execd) {
    ++stats.own;
    dropped_ns += field<uint64_t>(b, kSamplePeriod);
    return;
  }
  count(pid, field<uint32_t>(b, kSamplePid + 4), field<uint64_t>(b, kSampleCopy), ip, r.time,
        field<uint64_t>(b, kSamplePeriod), in_kernel);
}

// A sample of thread tid on cpu at pc ip, `len` ns after its copy's sample before (the
// period that ended here): in user space, or (`in_kernel`) in the kernel, counted as kernel time
// at the pc the thread returns to, as drain mode counts it. Each image's samples are those
// of its time (the records are in time order): a forked child's work before its exec is its
// own.
void Agentless::State::count(pid_t pid, pid_t tid, uint64_t id, uint64_t ip, uint64_t time,
                             uint64_t len, bool in_kernel) {
  ++stats.samples;
  const size_t at = img_index(pid);
  Img* m = at == ~size_t{0} ? nullptr : &imgs[at];
  Copy& c = copy_of(id, tid);
  // Every sample here is a copy's, made at a clone (the original events are record's thread's,
  // whose samples pass() drops), whose period, fixed at its clone, the sample tells: 0.8 to
  // 1.33 times the nominal one (or a shortened one's: note_thread_cpu), counted in whole nominal
  // periods. The copy's time not counted yet is rounded at random, up with the probability of
  // its fraction (its expected count is that time exactly), the difference carried to its next
  // sample: rounded down, a copy's end lost half a period on average (docs/agent.md,
  // "Weights").
  c.acc += static_cast<int64_t>(len);
  const int64_t v = c.acc + static_cast<int64_t>(util::xorshift(&rng) % period);
  const uint64_t w = v > 0 ? static_cast<uint64_t>(v) / period : 0;
  c.acc -= static_cast<int64_t>(w * period);
  // A thread that made an exec has the image before's user pc till the kernel sets the new
  // one as the exec ends: a sample in the kernel in between is the exec's work, counted at
  // the program's entry point (where a thread with no pc of its own is: credit_at_end), or,
  // before the exec has mapped its program (its comm record comes first), once it has
  // (mmap2(); about one run in 40 of a single program had such a sample outside any object).
  bool before_entry = false;
  if (m && !execd.empty() && execd.count(tid)) {
    if (in_kernel && !m->region_of(ip) && m->entry_pc)
      ip = m->entry_pc;
    else if (in_kernel && !m->region_of(ip) && !m->ended)
      before_entry = true;  // no pc of its own yet: credit_at_end's entry point, from its pc 0
    else
      execd.erase(tid);
  }
  if (!before_entry) last_pc[tid] = ip;
  last_ns[tid] = time;
  Own& o = own_of[tid];
  o.ns += len;
  o.user = !in_kernel;
  if (!w || !m) return;
  if (before_entry)
    m->before_entry += w;
  else
    add(m, ip, w, in_kernel ? w : 0);
}

// The exec's work that count() held till its program's entry point was known: there, or
// outside any object where the image ended without one.
void Agentless::State::add_before_entry(Img* m) {
  if (m->before_entry) add(m, m->entry_pc, m->before_entry, m->before_entry);
  m->before_entry = 0;
}

void Agentless::State::add(Img* m, uint64_t ip, uint64_t w, uint64_t system_w) {
  m->delivered += w;
  m->periods += w;
  if (Reg* g = m->region_of(ip)) {
    auto& b = g->bins[(ip - g->r.start) / g->r.bin_size];
    b.first += w;
    b.second += system_w;
    return;
  }
  m->overflow += w;
}

void Agentless::State::mmap2(const Rec& r) {
  const auto& b = r.body;
  const pid_t pid = field<uint32_t>(b, 0);
  Img* m = img_of(pid);
  if (!m || b.size() < 64 + 8 + kSampleIdBytes) return;
  const uint64_t addr = field<uint64_t>(b, 8), len = field<uint64_t>(b, 16),
                 pgoff = field<uint64_t>(b, 24);
  const uint32_t prot = field<uint32_t>(b, 56);
  const size_t name_end = b.size() - kSampleIdBytes;
  std::string path(reinterpret_cast<const char*>(b.data()) + 64,
                   strnlen(reinterpret_cast<const char*>(b.data()) + 64, name_end - 64));
  // JIT code: anonymous executable memory (named or not: PR_SET_VMA_ANON_NAME), or a memfd's.
  // Its names are in the perf map the JIT writes for the process, if any: the report reads it.
  const bool jit = (prot & PROT_EXEC) &&
                   (path.compare(0, 6, "//anon") == 0 || path.compare(0, 6, "[anon:") == 0 ||
                    path.compare(0, 7, "/memfd:") == 0);
  // The mappings it replaces (a dlclose, then a dlopen over the same addresses). JIT code
  // mapped over JIT code keeps its region (a JIT's mprotect of a page of a larger mapping,
  // made executable again once written: the same perf map names both), and only the rest
  // of the new mapping gets regions.
  std::vector<std::pair<uint64_t, uint64_t>> kept;  // the JIT regions kept, in address order
  for (auto it = m->live.lower_bound(addr > (1ull << 32) ? addr - (1ull << 32) : 0);
       it != m->live.end() && it->first < addr + len;) {
    Reg& g = m->regs[it->second];
    if (g.r.end > addr && jit && (g.r.flags & SPROF_R_JIT)) {
      kept.emplace_back(g.r.start, g.r.end);
      ++it;
    } else if (g.r.end > addr) {
      g.r.unload_ns = r.time + real_minus_mono;
      g.r.flags |= SPROF_R_UNLOADED;
      it = m->live.erase(it);
    } else {
      ++it;
    }
  }
  // A new region, and its placing among the mappings of now.
  const auto region = [&](std::string p, uint32_t flags) {
    Reg g;
    g.r.path = std::move(p);
    g.r.bin_size = bin_bytes;
    g.r.load_ns = r.time + real_minus_mono;
    g.r.flags = flags;
    return g;
  };
  const auto place = [&](Reg g) {
    m->live[g.r.start] = m->regs.size();
    m->regs.push_back(std::move(g));
  };
  if (jit) {
    const auto add_jit = [&](uint64_t from, uint64_t to) {
      if (from >= to) return;
      Reg g = region(symbolize::perf_map_path(pid), SPROF_R_JIT);
      g.r.start = from;  // (load bias 0: a perf map gives runtime addresses)
      g.r.end = to;
      place(std::move(g));
    };
    uint64_t at = addr;
    for (const auto& [from, to] : kept) {
      add_jit(at, from);
      at = std::max(at, to);
    }
    add_jit(at, addr + len);
    return;
  }
  if (!(prot & PROT_EXEC) || path.empty()) return;
  const bool vdso = path == "[vdso]";
  if (path[0] == '[' && !vdso) return;  // [vsyscall], [uprobes]
  // (An exec maps its program first.)
  Reg g = region(path, vdso ? SPROF_R_VDSO : m->regs.empty() ? SPROF_R_MAIN : 0u);
  const ElfFile* f = nullptr;
  if (vdso) {
    g.r.build_id = vdso_id;
  } else {
    const uint64_t ino = field<uint64_t>(b, 40);
    auto c = files.find({path, ino});
    if (c == files.end()) c = files.emplace(std::make_pair(path, ino), read_elf(path, ino)).first;
    f = &c->second;
    g.r.build_id = f->build_id;
  }
  if (const Segment* seg = f ? f->holding(pgoff, len) : nullptr) {
    // As the agent's regions: the segment of the program headers.
    const uint64_t bias = addr + (seg->offset - pgoff) - seg->vaddr;
    g.r.load_bias = bias;
    g.r.start = bias + seg->vaddr;
    g.r.end = g.r.start + seg->memsz;
    g.r.file_offset = seg->offset;
  } else {  // the mapping as it is (the vDSO: its addresses are its ELF image's)
    g.r.start = addr;
    g.r.end = addr + len;
    g.r.file_offset = pgoff;
    g.r.load_bias = vdso ? addr : addr - pgoff;
  }
  const bool entry = (g.r.flags & SPROF_R_MAIN) && f && f->read && f->entry;
  if (entry) m->entry_pc = g.r.load_bias + f->entry;
  place(std::move(g));
  if (entry) add_before_entry(m);
}

void Agentless::State::fork(const Rec& r) {
  const pid_t pid = field<uint32_t>(r.body, 0), ppid = field<uint32_t>(r.body, 4),
              tid = field<uint32_t>(r.body, 8), ptid = field<uint32_t>(r.body, 12);
  // A new thread goes on from its parent's clone call: until its first sample, its time
  // (the kernel's, mostly: a forked child's work before its exec) is at the pc where the
  // parent's last was.
  if (const auto pc = last_pc.find(ptid); pc != last_pc.end()) last_pc[tid] = pc->second;
  last_ns[tid] = r.time;
  if (pid == tid) {                    // a new process: its parent's mappings
    const Img* parent = img_of(ppid);  // (stays: imgs is a deque)
    Img& m = new_img(pid, ppid, r.time);
    m.child = true;
    if (parent) {  // the same program: its name, and its arguments (or, where not yet read,
                   // the child's own, read at the pass's end as its parent's are)
      m.comm = parent->comm;
      m.argv = parent->argv;
      m.argv_pending = parent->argv_pending;
      m.entry_pc = parent->entry_pc;
      for (const auto& [start, i] : parent->live) {
        Reg g;
        g.r = parent->regs[i].r;
        m.live[start] = m.regs.size();
        m.regs.push_back(std::move(g));
      }
    }
    // (Its pid, read when record hears of it, a pass later: a pid reused since would have to
    // be that of a process that started and ended within that time.)
    procs[pid] = Proc{imgs.size() - 1, 0, static_cast<int>(syscall(SYS_pidfd_open, pid, 0))};
  }
  forked = true;
  if (auto p = procs.find(pid); p != procs.end()) {
    ++stats.tasks_started;
    ++p->second.threads;
    born_in[tid] = p->second.img;
    gone_tids.erase(tid);
  }
  if (const auto e = early_exits.find(tid); e != early_exits.end()) {
    const Rec end = std::move(e->second);
    early_exits.erase(e);
    exit(end);
  }
}

// A thread's end. One whose clone was not taken yet (its FORK record, stamped before its ring
// was read, made readable after: pass() leaves kOrderSlackNs for that, which a writer held up
// longer, as a virtual CPU the host does not run, would pass) waits for its FORK record, so
// that its process's count of threads never falls while one runs (a process that lost its
// FORK record to a full ring has its threads' ends wait for good: its records are not
// counted anyway).
void Agentless::State::exit(const Rec& r) {
  const pid_t pid = field<uint32_t>(r.body, 0), tid = field<uint32_t>(r.body, 8);
  if (!born_in.count(tid)) {
    early_exits.emplace(tid, r);
    return;
  }
  gone_tids[tid] = Gone{2, img_index(pid), r.time};
  if (!throttled_at.empty()) ended_throttled(tid, r.time);
  auto p = procs.find(pid);
  if (p == procs.end()) return;
  ++stats.tasks_ended;
  if (--p->second.threads <= 0) {
    // Finished unless known to be killed (before Linux 6.15 a process reaped before record
    // looks leaves no exit code: taken as exited).
    const End how = p->second.pidfd >= 0 ? how_it_ended(pid, p->second.pidfd) : End{};
    end_img(p->second.img, r.time, !how.known || how.exited);
    if (p->second.pidfd >= 0) close(p->second.pidfd);
    gone_procs[pid] = {p->second.img, 2};
    procs.erase(p);
  }
}

void Agentless::State::comm(const Rec& r) {
  if (!(r.misc & PERF_RECORD_MISC_COMM_EXEC)) return;
  const pid_t pid = field<uint32_t>(r.body, 0);
  auto p = procs.find(pid);
  if (p == procs.end()) return;
  const char* name = reinterpret_cast<const char*>(r.body.data()) + 8;
  Img* m = &imgs[p->second.img];
  if (m->root && !root_execd) {  // the command's own exec
    root_execd = true;
    // Its user pc is record's, in the child before the exec, till the exec ends: a sample in
    // the kernel in between (the exec's work, once in about 40 runs) is at the program's
    // entry point, as another exec's (count()), not outside any object.
    execd.insert(pid);
    return;
  }
  // The thread that made the exec (now the process's only one, its tid the pid) has no pc in
  // the new image till its first sample there: the pc it had (its own last sample's, or its
  // creator's for a forked child) is the image before's, outside every object of this one.
  last_pc.erase(pid);
  execd.insert(pid);
  end_img(p->second.img, r.time, true);
  Img& n = new_img(pid, m->ppid, r.time);
  n.comm = std::string(name, strnlen(name, r.body.size() - 8));
  n.argv_pending = true;  // read at the pass's end (pass()) if the process is still there
  p->second.img = imgs.size() - 1;
}

// A new period for the threads and processes cloned from now on, each CPU's its own: the
// original events' (a copy keeps the period it was cloned with). They are record's thread's own
// (agentless.hpp), whose samples are not counted: the re-draw ends no period of the command's.
void Agentless::State::redraw() {
  const uint64_t base =
      shortened ? std::max(std::min(period, kShortestNs), period / kShortenBy) : period;
  if (base < period) stats.shortened_ns = base;
  for (Ring& r : rings) {
    uint64_t next = rt::perf::jittered_period(base, &rng);
    if (ioctl(r.fd, PERF_EVENT_IOC_PERIOD, &next) == 0) ++stats.redraws;
    next = rt::perf::jittered_period(base, &rng);
    if (r.set_b >= 0 && ioctl(r.set_b, PERF_EVENT_IOC_PERIOD, &next) == 0) ++stats.redraws;
  }
}

// A thread (not a process's first) ended, its samples standing for `ns` of CPU. A thread per
// small task, shorter than a period, ends before its first sample (its copy's first period is
// a whole one), and its time is credited at its creator's last pc, not at its own code: 4,000
// std::async tasks of 0.5 ms each had 99.95% of a run's samples at the main thread's last pc,
// in ld.so's mmap. So where three quarters of the last kShortWindow threads to end had samples
// for less than a nominal period, the clones to come get periods kShortenBy times shorter
// (redraw()), and the nominal one again where a quarter or less had (the same measure under
// either period: a thread's CPU as its samples tell it). Each sample counts its own period
// (count()): the weights stay unbiased, only those threads' rate rises.
void Agentless::State::note_thread_cpu(uint64_t ns) {
  const bool is_short = ns < period;
  ran_short.push_back(is_short);
  short_runs += is_short;
  if (ran_short.size() > kShortWindow) {
    short_runs -= ran_short.front();
    ran_short.pop_front();
  }
  if (ran_short.size() < kShortWindow) return;
  const bool was = shortened;
  if (!shortened && short_runs * 4 >= kShortWindow * 3) shortened = true;
  if (shortened && short_runs * 4 <= kShortWindow) shortened = false;
  if (shortened == was) return;
  stats.shortened_changes += 1;
  redraw_due = true;  // at this pass's end, for the clones to come
}

// Every thread re-phased while it runs. A copy's period is the one its thread was cloned with
// (no ioctl reaches a copy's period), so each thread is sampled by two sets of copies, of two
// periods drawn for it, one set on at a time: from one swap to the next, each set's samples
// fall at phases of the thread's work that the other set's time in between moved at random,
// as drain mode's re-draws do. PERF_EVENT_IOC_ENABLE and _DISABLE on an original reach its
// copies, whose samples go to that original's ring (its CPU's). So a swap is made a CPU's
// events at a time, one CPU a pass: the set to come first, so that no time goes unsampled,
// then the set that was on. A thread's copies of that CPU's events, both on meanwhile, count
// the samples of the set that was on till the enabling ioctl ended, and the set to come's
// from then on (keep(): that CPU's cut). Both on cost the program twice the samples, and
// while record's thread competes with the command's for the CPUs, each ioctl's interrupts
// (below) make it wait for a CPU after it: where a swap made every CPU's enabling ioctl
// before any disabling one, in one pass, 64 threads on 2 CPUs at 10 kHz had both sets on
// through those waits, a median of 1,079 samples of the set that was off a run, against 11 a
// CPU at a time (docs/benchmarks.md, "A swap a CPU at a time"). The pass after the last CPU's
// makes every CPU's ioctls once more: a thread cloned while they ran can have copied the one
// set's state before it changed and the other's after (the kernel copies an original's state
// before it links the copy where the ioctl reaches it), and so start with both sets off, or
// both on, till the next swap; the second ioctls reach such copies (an ioctl on a copy already
// in its state does nothing, with no interrupt). The task, comm and mmap records come from a
// third event that stays on (attach()), so that no swap loses or doubles them. Each copy's
// ioctl runs on the CPU its thread last ran on, by an interrupt where that is not this
// thread's CPU: a swap comes every kSwapMinMs at the soonest, and no sooner than its two
// interrupts a thread and CPU are 1/kSwapIpiShare of the interrupts that sample the command
// (the rate times its threads that can run at once: up to one a CPU). With a fixed number of
// interrupts a second (200, before), the swaps of one thread on 2 CPUs at 1 kHz cost 16% of
// its sampling's cost in the program, 0.4% of its CPU; at 10 kHz 1.6%.
void Agentless::State::swap() {
  if (!next_swap) return;
  const uint64_t now = util::clock_ns(CLOCK_MONOTONIC);
  if (swap_step == 0) {
    if (now < next_swap) return;
    b_on = !b_on;
    swap_began = now;
    if (swaps.size() != rings.size()) swaps.assign(rings.size(), {});
  }
  if (swap_step < rings.size()) {
    // One CPU's events a pass. The cut: their enabling ioctl has reached every copy, their
    // disabling one has not begun, so each thread's copies of them both sample there.
    const Ring& r = rings[swap_step];
    ioctl(b_on ? r.set_b : r.fd, PERF_EVENT_IOC_ENABLE, 0);
    swaps[swap_step].emplace_back(util::clock_ns(CLOCK_MONOTONIC), b_on);
    ioctl(b_on ? r.fd : r.set_b, PERF_EVENT_IOC_DISABLE, 0);
    ++swap_step;
    return;
  }
  // The pass after the last CPU's: every CPU's ioctls once more, for the clones made meanwhile.
  for (const Ring& r : rings) {
    ioctl(b_on ? r.set_b : r.fd, PERF_EVENT_IOC_ENABLE, 0);
    ioctl(b_on ? r.fd : r.set_b, PERF_EVENT_IOC_DISABLE, 0);
  }
  swap_step = 0;
  const uint64_t done = util::clock_ns(CLOCK_MONOTONIC);
  ++stats.swaps;
  stats.swap_ns_max = std::max(stats.swap_ns_max, done - swap_began);
  // What a sample or record read from now on can still need: the last two seconds' swaps.
  for (auto& cuts : swaps)
    while (cuts.size() > 1 && cuts.front().first + 2000000000ull < done) cuts.pop_front();
  uint64_t threads = 0;
  for (const auto& [pid, p] : procs) threads += static_cast<uint64_t>(std::max(p.threads, 1));
  threads = std::max<uint64_t>(threads, 1);
  const uint64_t interrupts = 2 * rings.size() * threads;
  const uint64_t busy = std::min<uint64_t>(threads, rings.size());
  const uint64_t budget = std::max<uint64_t>(1, 1000000000 / period * busy / kSwapIpiShare);
  const uint64_t every = std::max(kSwapMinMs * 1000000, interrupts * 1000000000 / budget);
  next_swap = done + every / 2 + util::xorshift(&rng) % every;  // 0.5 to 1.5 times `every`
}

// Whether a sample of the set whose original has id `set_id`, taken at `time` by a copy of
// ring `ring`'s events, counts: the set that was on then on that CPU's events, the first till
// its first swap's cut.
bool Agentless::State::keep(uint64_t set_id, uint32_t ring, uint64_t time) const {
  const bool of_b = std::find(set_b_ids.begin(), set_b_ids.end(), set_id) != set_b_ids.end();
  if (ring >= swaps.size()) return !of_b;
  const auto& cuts = swaps[ring];
  auto it =
      std::upper_bound(cuts.begin(), cuts.end(), time,
                       [](uint64_t t, const std::pair<uint64_t, bool>& w) { return t < w.first; });
  const bool on = it == cuts.begin() ? false : std::prev(it)->second;
  return of_b == on;
}

}  // namespace sprofil::record
