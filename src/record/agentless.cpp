// `sprofil record --agentless` (agentless.hpp): record samples the command from outside.
#include "record/agentless.hpp"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <thread>
#include <unordered_map>

#include "clock/perf.hpp"
#include "record/process_end.hpp"
#include "util/loaded_object.hpp"

namespace sprofil::record {

namespace {

constexpr size_t kPage = 4096;
constexpr size_t kSampleDataPages = 4;  // a thread's ring: 16 KiB, ~400 samples (40 ms at 10 kHz)
constexpr size_t kTaskDataPages = 8;    // a CPU's task/comm tracker
constexpr size_t kMapDataPages = 16;    // a CPU's mmap tracker (paths are long)
constexpr int kPassMs = 16;             // a pass over every ring at least this often
constexpr uint32_t kBinBytes = 4;       // bytes of text per counter, as the agent's default
constexpr uint64_t kSampleType =
    PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_READ;
constexpr uint64_t kTrackerSampleType = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;

uint64_t clock_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

int perf_open(perf_event_attr* a, pid_t pid, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// A perf ring: the meta page and 2^n data pages, mapped read-write (record moves the tail).
struct Ring {
  int fd = -1;
  char* base = nullptr;
  size_t data = 0;  // bytes of data pages

  // Maps fd's ring with up to `pages` data pages, fewer where the locked-memory allowance
  // refuses them. False if not even one page could be mapped.
  bool map(int event_fd, size_t pages) {
    for (; pages >= 1; pages /= 2) {
      void* p = mmap(nullptr, (pages + 1) * kPage, PROT_READ | PROT_WRITE, MAP_SHARED, event_fd, 0);
      if (p != MAP_FAILED) {
        fd = event_fd;
        base = static_cast<char*>(p);
        data = pages * kPage;
        return true;
      }
    }
    return false;
  }
  void close_all() {
    if (base) munmap(base, data + kPage);
    if (fd >= 0) close(fd);
    base = nullptr;
    fd = -1;
  }
  perf_event_mmap_page* meta() const { return reinterpret_cast<perf_event_mmap_page*>(base); }
  // Copies n bytes at ring offset `at` (a record may wrap).
  void copy(uint64_t at, void* dst, size_t n) const {
    const char* d = base + kPage;
    const size_t o = static_cast<size_t>(at % data);
    const size_t first = std::min(n, data - o);
    memcpy(dst, d + o, first);
    if (first < n) memcpy(static_cast<char*>(dst) + first, d, n - first);
  }
  // Calls f(header, body bytes) for every complete record, then frees them.
  template <class F>
  void read(F&& f) {
    if (!base) return;
    perf_event_mmap_page* m = meta();
    const uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = m->data_tail;
    std::vector<unsigned char> body;
    while (tail < head) {
      perf_event_header h;
      copy(tail, &h, sizeof h);
      if (h.size < sizeof h || tail + h.size > head) break;
      body.resize(h.size - sizeof h);
      copy(tail + sizeof h, body.data(), body.size());
      f(h, body);
      tail += h.size;
    }
    __atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
  }
};

template <class T>
T field(const std::vector<unsigned char>& b, size_t off) {
  T v{};
  if (off + sizeof v <= b.size()) memcpy(&v, b.data() + off, sizeof v);
  return v;
}

// One thread's sampling event.
struct Thread {
  uint64_t id = 0;  // unique in the run (a tid may be reused)
  pid_t pid = 0, tid = 0;
  Ring ring;
  uint64_t period = 0;      // P, the nominal period
  uint64_t cur_period = 0;  // the kernel's period now (jittered)
  uint64_t phase = 0;       // random, added to the counter: a thread shorter than P keeps its share
  uint64_t rng = 0;
  rt::perf::Credit credit;
  uint64_t records = 0;       // in the block running now
  uint64_t jitter_after = 0;  // the block's length
  uint64_t last_pc = 0;
  uint64_t last_ns = 0;  // CLOCK_MONOTONIC of its last sample, or of its event's opening
};

// A sample or side-band record, in a pass's list sorted by time.
struct Rec {
  uint64_t time = 0;
  uint32_t type = 0;  // PERF_RECORD_*
  uint16_t misc = 0;
  pid_t tid = 0;        // samples and lost records: the thread's event,
  uint64_t thread = 0;  // and its Thread::id
  std::vector<unsigned char> body;
};

// An executable mapping's samples.
struct Reg {
  profile::Region r;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> bins;  // index -> count, system
};

struct Img {
  pid_t pid = 0, ppid = 0;
  bool root = false, child = false, ended = false;
  bool finished = false;  // ended by an exec or an exit, not by a signal
  std::vector<std::string> argv;
  bool argv_pending = false;    // an exec's image whose arguments are not in place yet
  std::string comm;             // its name, for want of them
  uint64_t start = 0, end = 0;  // CLOCK_MONOTONIC
  std::vector<Reg> regs;
  std::map<uint64_t, size_t> live;  // start -> index in regs, the mappings of now
  uint64_t overflow = 0, delivered = 0, lost = 0, periods = 0;
};

struct Proc {
  size_t img = 0;
  int threads = 0;
  int pidfd = -1;  // how it ended (process_end.hpp)
};

// What record reads of a mapped file, once per file: its executable segments (the program
// headers) and its GNU build-id. Read here rather than by the kernel (attr.build_id makes
// every mmap record parse the file's notes in the program's time).
struct Segment {
  uint64_t vaddr = 0, offset = 0, memsz = 0;
};
struct ElfFile {
  bool read = false;
  std::vector<Segment> text;
  std::vector<uint8_t> build_id;
  // The executable segment that a mapping at file offset pgoff, len bytes long, holds.
  const Segment* holding(uint64_t pgoff, uint64_t len) const {
    for (const Segment& s : text)
      if (s.offset >= pgoff && s.offset < pgoff + len) return &s;
    return nullptr;
  }
};

// The file at path, if it is the one mapped (inode ino; 0: not checked).
ElfFile read_elf(const std::string& path, uint64_t ino) {
  ElfFile f;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return f;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (ino && st.st_ino != ino)) {
    close(fd);
    return f;
  }
  elf_version(EV_CURRENT);
  if (Elf* e = elf_begin(fd, ELF_C_READ_MMAP, nullptr)) {
    size_t n = 0;
    if (elf_getphdrnum(e, &n) == 0) {
      f.read = true;
      for (size_t i = 0; i < n; ++i) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, static_cast<int>(i), &ph)) continue;
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && ph.p_memsz != 0)
          f.text.push_back(Segment{ph.p_vaddr, ph.p_offset, ph.p_memsz});
        if (ph.p_type != PT_NOTE || !f.build_id.empty()) continue;
        Elf_Data* d =
            elf_getdata_rawchunk(e, static_cast<int64_t>(ph.p_offset), ph.p_filesz, ELF_T_NHDR);
        GElf_Nhdr nh;
        size_t name_at = 0, desc_at = 0;
        for (size_t at = 0; d && (at = gelf_getnote(d, at, &nh, &name_at, &desc_at)) != 0;) {
          if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
              memcmp(static_cast<char*>(d->d_buf) + name_at, "GNU", 4) == 0) {
            const auto* id = static_cast<const uint8_t*>(d->d_buf) + desc_at;
            f.build_id.assign(id, id + std::min<size_t>(nh.n_descsz, SPROF_BUILD_ID_MAX));
            break;
          }
        }
      }
    }
    elf_end(e);
  }
  close(fd);
  return f;
}

// The vDSO's build-id: record's own, the kernel's one image in every process (a special
// mapping's record carries none; the report names its functions only with it).
std::vector<uint8_t> vdso_build_id() {
  std::vector<uint8_t> id;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (!util::is_vdso_name(info->dlpi_name)) return 0;
        uint8_t b[SPROF_BUILD_ID_MAX];
        const uint32_t n = util::build_id_of(info, b, sizeof b);
        static_cast<std::vector<uint8_t>*>(out)->assign(b, b + n);
        return 1;
      },
      &id);
  return id;
}

}  // namespace

struct Agentless::State {
  uint64_t period = 0;
  unsigned hz = 0;
  uint64_t real_minus_mono = 0;
  std::vector<Ring> task_rings, map_rings;
  std::unordered_map<pid_t, Thread*> threads;  // by tid
  std::unordered_map<pid_t, Proc> procs;       // by pid: the image running now
  std::deque<Img> imgs;  // (a deque: an image's address stays while others are added)
  uint64_t next_thread = 1;
  std::map<std::pair<std::string, uint64_t>, ElfFile> files;  // by (path, inode)
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  std::vector<uint8_t> vdso_id = vdso_build_id();
  int stop_pipe[2] = {-1, -1};
  std::thread loop;
  std::atomic<bool> stopping{false};
  bool argv_pending = false;  // an exec's image waits for its arguments: the next pass is soon
  Stats stats;

  ~State() {
    for (auto& [pid, p] : procs)
      if (p.pidfd >= 0) close(p.pidfd);
    for (auto& [tid, t] : threads) {
      t->ring.close_all();
      delete t;
    }
    for (Ring& r : task_rings) r.close_all();
    for (Ring& r : map_rings) r.close_all();
    for (int fd : stop_pipe)
      if (fd >= 0) close(fd);
  }

  // The sampling event of thread tid of process pid: enabled now, or by its exec (the
  // command's first thread, before it).
  Thread* open_thread(pid_t pid, pid_t tid, bool at_exec) {
    auto* t = new Thread;
    t->id = next_thread++;
    t->pid = pid;
    t->tid = tid;
    t->period = period;
    t->rng = rng ^ (static_cast<uint64_t>(tid) * 0x9e3779b97f4a7c15ull);
    util::xorshift(&t->rng);
    const uint64_t first = rt::perf::jittered_period(period, &t->rng);
    t->phase = (util::xorshift(&t->rng) >> 8) % period;
    // The phase counts as user time (as drain mode's): perf::credit's kernel part starts at 0.
    t->credit.user_ns = t->phase;
    t->cur_period = first;
    perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = first;
    a.sample_type = kSampleType;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    a.use_clockid = 1;
    a.clockid = CLOCK_MONOTONIC;
    a.sample_id_all = 1;
    a.watermark = 1;  // record reads the rings every pass: wake-ups only as a ring fills
    a.wakeup_watermark = static_cast<uint32_t>(kSampleDataPages * kPage * 3 / 4);
    a.disabled = at_exec;
    a.enable_on_exec = at_exec;
    const int fd = perf_open(&a, tid, -1);
    if (fd < 0 || !t->ring.map(fd, kSampleDataPages)) {
      if (fd >= 0) close(fd);
      delete t;
      ++stats.not_opened;
      return nullptr;
    }
    t->jitter_after = rt::perf::jitter_block(&t->rng, period, 0);
    t->last_ns = clock_ns(CLOCK_MONOTONIC);
    threads[tid] = t;
    ++stats.threads;
    return t;
  }

  Img& new_img(pid_t pid, pid_t ppid, uint64_t time) {
    imgs.emplace_back();
    Img& m = imgs.back();
    m.pid = pid;
    m.ppid = ppid;
    m.start = time;
    ++stats.images;
    return m;
  }

  Img* img_of(pid_t pid) {
    const auto p = procs.find(pid);
    return p == procs.end() ? nullptr : &imgs[p->second.img];
  }

  void end_img(Img* m, uint64_t time, bool finished) {
    settle_argv(m, true);
    m->ended = true;
    m->finished = finished;
    m->end = time;
  }

  // The process's command line now: empty where it is gone, or while an exec has not put the
  // new image's arguments in place (the kernel's comm record comes before that).
  static std::vector<std::string> cmdline(pid_t pid) {
    std::vector<std::string> argv;
    const std::string path = "/proc/" + std::to_string(pid) + "/cmdline";
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
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

  // An exec's image takes its arguments as soon as they are there; its name if it ends first.
  void settle_argv(Img* m, bool ending) {
    if (!m->argv_pending) return;
    m->argv = cmdline(m->pid);
    if (m->argv.empty() && !ending) return;
    if (m->argv.empty()) m->argv.push_back(m->comm);
    m->argv_pending = false;
  }

  void count(Thread* t, uint64_t ip, uint64_t time, uint64_t value) {
    Img* m = img_of(t->pid);
    ++stats.samples;
    ++t->records;
    uint64_t system_w = 0;
    // Credited with the length of the period that just ended (a re-draw's restart is not
    // placed, as drain mode places it: its sample's user part may be a period off).
    t->credit.next_ns = t->cur_period;
    const uint64_t w = rt::perf::credit(value + t->phase, period, &t->credit, &system_w);
    t->last_pc = ip;
    t->last_ns = time;
    if (w && m) add(m, ip, w, system_w);
  }

  void add(Img* m, uint64_t ip, uint64_t w, uint64_t system_w) {
    m->delivered += w;
    m->periods += w;
    auto it = m->live.upper_bound(ip);
    if (it != m->live.begin()) {
      Reg& g = m->regs[std::prev(it)->second];
      if (ip < g.r.end) {
        auto& b = g.bins[(ip - g.r.start) / g.r.bin_size];
        b.first += w;
        b.second += system_w;
        return;
      }
    }
    m->overflow += w;
  }

  // The thread's end: its last records, then the whole periods since the last (spent in the
  // kernel, its exit among them) at its last pc, as drain mode's finalize.
  void end_thread(Thread* t) {
    ioctl(t->ring.fd, PERF_EVENT_IOC_DISABLE, 0);
    t->ring.read([&](const perf_event_header& h, const std::vector<unsigned char>& b) {
      if (h.type == PERF_RECORD_SAMPLE)
        count(t, field<uint64_t>(b, 0), field<uint64_t>(b, 16), field<uint64_t>(b, 24));
      else if (h.type == PERF_RECORD_LOST)
        lost(t, field<uint64_t>(b, 8));
    });
    uint64_t value = 0;
    if (::read(t->ring.fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value) && value) {
      const uint64_t elapsed = (value + t->phase) / period;
      if (elapsed > t->credit.periods) {
        const uint64_t w = elapsed - t->credit.periods;
        t->credit.periods = elapsed;
        credit_at_end(img_of(t->pid), t->last_pc, w);
      }
    }
    t->ring.close_all();
    threads.erase(t->tid);
    delete t;
  }

  void lost(Thread* t, uint64_t n) {
    rt::perf::drop_lost(n, t->credit.running(period), &t->credit);
    stats.lost += n;
    if (Img* m = img_of(t->pid)) {
      m->delivered += n;
      m->lost += n;
      m->periods += n;
    }
  }

  void mmap2(const Rec& r) {
    const auto& b = r.body;
    const pid_t pid = field<uint32_t>(b, 0);
    Img* m = img_of(pid);
    if (!m || b.size() < 72 + 16) return;
    const uint64_t addr = field<uint64_t>(b, 8), len = field<uint64_t>(b, 16),
                   pgoff = field<uint64_t>(b, 24);
    const uint32_t prot = field<uint32_t>(b, 56);
    const size_t name_end = b.size() - 16;  // the sample_id: pid, tid, time
    std::string path(reinterpret_cast<const char*>(b.data()) + 64,
                     strnlen(reinterpret_cast<const char*>(b.data()) + 64, name_end - 64));
    // The mappings it replaces (a dlclose, then a dlopen over the same addresses).
    for (auto it = m->live.lower_bound(addr > (1ull << 32) ? addr - (1ull << 32) : 0);
         it != m->live.end() && it->first < addr + len;) {
      Reg& g = m->regs[it->second];
      if (g.r.end > addr) {
        g.r.unload_ns = r.time + real_minus_mono;
        g.r.flags |= SPROF_R_UNLOADED;
        it = m->live.erase(it);
      } else {
        ++it;
      }
    }
    if (!(prot & PROT_EXEC) || path.empty()) return;
    const bool vdso = path == "[vdso]";
    if (path[0] == '[' && !vdso) return;            // [vsyscall], [uprobes]
    if (path.compare(0, 7, "//anon") == 0) return;  // JIT code: its samples count as overflow
    Reg g;
    g.r.path = path;
    g.r.bin_size = kBinBytes;
    g.r.load_ns = r.time + real_minus_mono;
    g.r.flags = vdso ? SPROF_R_VDSO : 0;
    if (m->regs.empty() && !vdso) g.r.flags |= SPROF_R_MAIN;  // an exec maps its program first
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
    m->live[g.r.start] = m->regs.size();
    m->regs.push_back(std::move(g));
  }

  void fork(const Rec& r) {
    const pid_t pid = field<uint32_t>(r.body, 0), ppid = field<uint32_t>(r.body, 4),
                tid = field<uint32_t>(r.body, 8), ptid = field<uint32_t>(r.body, 12);
    if (pid == tid) {                    // a new process: its parent's mappings
      const Img* parent = img_of(ppid);  // (stays: imgs is a deque)
      Img& m = new_img(pid, ppid, r.time);
      m.child = true;
      if (parent) {
        m.argv = parent->argv;
        for (const auto& [start, i] : parent->live) {
          Reg g;
          g.r = parent->regs[i].r;
          g.r.bins.clear();
          m.live[start] = m.regs.size();
          m.regs.push_back(std::move(g));
        }
      }
      // (The process's pid, read as soon as record hears of it; a pid reused since would have
      // to be the pid of a process that started and ended within that time.)
      procs[pid] = Proc{imgs.size() - 1, 0, static_cast<int>(syscall(SYS_pidfd_open, pid, 0))};
    }
    auto p = procs.find(pid);
    if (p == procs.end()) return;
    ++p->second.threads;
    if (threads.count(tid)) return;
    Thread* t = open_thread(pid, tid, false);
    // A forked child's thread goes on from its parent's fork call: until its first sample, its
    // time (the kernel's, mostly) is at the pc where the parent's last was.
    if (const auto parent = threads.find(ptid); t && pid == tid && parent != threads.end())
      t->last_pc = parent->second->last_pc;
  }

  void exit(const Rec& r) {
    const pid_t pid = field<uint32_t>(r.body, 0), tid = field<uint32_t>(r.body, 8);
    if (auto t = threads.find(tid); t != threads.end()) end_thread(t->second);
    auto p = procs.find(pid);
    if (p == procs.end()) return;
    if (--p->second.threads <= 0) {
      // Finished unless known to be killed (before Linux 6.15 a process reaped before record
      // looks leaves no exit code: taken as exited).
      const End how = p->second.pidfd >= 0 ? how_it_ended(pid, p->second.pidfd) : End{};
      end_img(&imgs[p->second.img], r.time, !how.known || how.exited);
      if (p->second.pidfd >= 0) close(p->second.pidfd);
      procs.erase(p);
    }
  }

  void comm(const Rec& r) {
    if (!(r.misc & PERF_RECORD_MISC_COMM_EXEC)) return;
    const pid_t pid = field<uint32_t>(r.body, 0);
    auto p = procs.find(pid);
    if (p == procs.end()) return;
    const pid_t tid = field<uint32_t>(r.body, 4);
    const char* name = reinterpret_cast<const char*>(r.body.data()) + 8;
    Img* m = &imgs[p->second.img];
    if (m->root && m->regs.empty() && m->delivered == 0) return;  // the command's own exec
    if (const auto t = threads.find(tid); t != threads.end()) settle_at_exec(t->second, m, r.time);
    end_img(m, r.time, true);
    Img& n = new_img(pid, m->ppid, r.time);
    n.comm = std::string(name, strnlen(name, r.body.size() - 8));
    n.argv_pending = true;
    settle_argv(&n, false);
    p->second.img = imgs.size() - 1;
  }

  // The exec'ing thread's time up to its exec is the image's before (the kernel's work of a
  // forked child before its exec, say): its counter is read now, and all but the time since the
  // exec (at most; record reads the comm record at once) is credited at its last pc there, as
  // at a thread's end. The next sample, in the new image, credits only what is left.
  // Not read where less than a period of time passed since its last sample (or its opening):
  // less than a period's credit is at stake, and the read of a running thread's counter
  // interrupts its CPU (a fork-then-exec child, as a shell's, execs within microseconds).
  void settle_at_exec(Thread* t, Img* old, uint64_t exec_time) {
    uint64_t value = 0;
    const uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (exec_time < t->last_ns + period) {
      t->last_pc = 0;
      return;
    }
    if (::read(t->ring.fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value)) {
      const uint64_t since = now > exec_time ? now - exec_time : 0;
      const uint64_t before = value > since ? value - since : 0;
      const uint64_t elapsed = (before + t->phase) / period;
      if (elapsed > t->credit.periods) {
        const uint64_t w = elapsed - t->credit.periods;
        t->credit.periods = elapsed;
        t->credit.system += w;
        credit_at_end(old, t->last_pc, w);
      }
    }
    t->last_pc = 0;  // no pc of the new image yet
  }

  // w periods at the end of a thread's time in image m: kernel time at its last pc, or outside
  // every object where it had none.
  void credit_at_end(Img* m, uint64_t last_pc, uint64_t w) {
    stats.exit_credited += w;
    if (!m) return;
    if (last_pc) {
      add(m, last_pc, w, w);
      return;
    }
    m->delivered += w;
    m->periods += w;
    m->overflow += w;
  }

  // Every record of every ring, in time order; then the periods re-drawn that are due.
  void pass() {
    std::vector<Rec> recs;
    // The threads' rings first: a side-band record of a moment before their last sample is in
    // its ring by the time the trackers are read.
    for (auto& [tid, t] : threads) {
      Thread* th = t;
      th->ring.read([&](const perf_event_header& h, const std::vector<unsigned char>& b) {
        if (h.type != PERF_RECORD_SAMPLE && h.type != PERF_RECORD_LOST) return;
        Rec r;
        r.type = h.type;
        r.tid = th->tid;
        r.thread = th->id;
        r.time = h.type == PERF_RECORD_SAMPLE ? field<uint64_t>(b, 16)
                                              : field<uint64_t>(b, b.size() - 8);
        r.body = b;
        recs.push_back(std::move(r));
      });
    }
    auto side = [&](Ring& ring) {
      ring.read([&](const perf_event_header& h, const std::vector<unsigned char>& b) {
        if (h.type == PERF_RECORD_LOST) {
          stats.tracker_lost += field<uint64_t>(b, 8);
          return;
        }
        if (h.type != PERF_RECORD_FORK && h.type != PERF_RECORD_EXIT &&
            h.type != PERF_RECORD_COMM && h.type != PERF_RECORD_MMAP2)
          return;
        Rec r;
        r.type = h.type;
        r.misc = h.misc;
        r.time = field<uint64_t>(b, b.size() - 8);  // sample_id_all: pid, tid, time
        r.body = b;
        recs.push_back(std::move(r));
      });
    };
    for (Ring& ring : task_rings) side(ring);
    for (Ring& ring : map_rings) side(ring);
    std::stable_sort(recs.begin(), recs.end(),
                     [](const Rec& a, const Rec& b) { return a.time < b.time; });
    for (const Rec& r : recs) {
      // A thread's record counts while its event is open (it was drained whole at its end).
      Thread* th = nullptr;
      if (r.thread) {
        const auto t = threads.find(r.tid);
        if (t == threads.end() || t->second->id != r.thread) continue;
        th = t->second;
      }
      switch (r.type) {
        case PERF_RECORD_SAMPLE:
          count(th, field<uint64_t>(r.body, 0), r.time, field<uint64_t>(r.body, 24));
          break;
        case PERF_RECORD_LOST:
          lost(th, field<uint64_t>(r.body, 8));
          break;
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
      }
    }
    argv_pending = false;
    for (auto& [pid, p] : procs) {
      settle_argv(&imgs[p.img], false);
      argv_pending |= imgs[p.img].argv_pending;
    }
    for (auto& [tid, t] : threads) {
      if (t->records < t->jitter_after) continue;
      const uint64_t next = rt::perf::jittered_period(period, &t->rng);
      if (ioctl(t->ring.fd, PERF_EVENT_IOC_PERIOD, &next) == 0) {
        t->cur_period = next;
        ++stats.redraws;
      }
      t->records = 0;
      t->jitter_after = rt::perf::jitter_block(&t->rng, period, t->credit.periods);
    }
  }

  void run() {
    std::vector<pollfd> fds;
    for (const Ring& r : task_rings) fds.push_back(pollfd{r.fd, POLLIN, 0});
    fds.push_back(pollfd{stop_pipe[0], POLLIN, 0});
    while (!stopping.load(std::memory_order_acquire)) {
      poll(fds.data(), fds.size(), argv_pending ? 1 : kPassMs);
      pass();
    }
    pass();
    // What runs on (a background job that outlives the command): sampled to here.
    while (!threads.empty()) end_thread(threads.begin()->second);
  }
};

Agentless::Agentless() : s_(std::make_unique<State>()) {}
Agentless::~Agentless() {
  if (s_->loop.joinable()) finish();
}

bool Agentless::attach(pid_t pid, unsigned hz, const std::vector<std::string>& argv,
                       std::string* why) {
  State& s = *s_;
  s.hz = hz;
  s.period = 1000000000ull / (hz ? hz : 1);
  if (s.period == 0) s.period = 1;
  s.real_minus_mono = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
  s.rng ^= clock_ns(CLOCK_MONOTONIC) ^ (static_cast<uint64_t>(pid) << 32);
  const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  auto fail = [&](const std::string& what) {
    *why = what + ": " + strerror(errno);
    for (Ring& r : s.task_rings) r.close_all();
    for (Ring& r : s.map_rings) r.close_all();
    s.task_rings.clear();
    s.map_rings.clear();
    return false;
  };
  for (int cpu = 0; cpu < ncpu; ++cpu) {
    for (int kind = 0; kind < 2; ++kind) {
      perf_event_attr a;
      memset(&a, 0, sizeof a);
      a.type = PERF_TYPE_SOFTWARE;
      a.size = sizeof a;
      a.config = PERF_COUNT_SW_DUMMY;
      a.sample_type = kTrackerSampleType;
      a.sample_id_all = 1;
      a.inherit = 1;
      a.disabled = 1;
      a.enable_on_exec = 1;
      a.exclude_kernel = 1;
      a.exclude_hv = 1;
      a.use_clockid = 1;
      a.clockid = CLOCK_MONOTONIC;
      a.watermark = 1;
      const size_t pages = kind == 0 ? kTaskDataPages : kMapDataPages;
      if (kind == 0) {  // wakes record at each record: a new thread's event is opened at once
        a.task = 1;
        a.comm = 1;
        a.comm_exec = 1;
        a.wakeup_watermark = 1;
      } else {  // read at each pass
        a.mmap = 1;
        a.mmap2 = 1;
        a.wakeup_watermark = static_cast<uint32_t>(pages * kPage * 3 / 4);
      }
      const int fd = perf_open(&a, pid, cpu);
      if (fd < 0 && errno == ENODEV) break;  // an offline CPU
      if (fd < 0) return fail("perf_event_open (tracker)");
      Ring r;
      if (!r.map(fd, pages)) {
        close(fd);
        return fail("mmap (tracker ring)");
      }
      (kind == 0 ? s.task_rings : s.map_rings).push_back(r);
    }
  }
  if (s.task_rings.empty()) {
    errno = ENODEV;
    return fail("perf_event_open (tracker)");
  }
  Img& m = s.new_img(pid, getpid(), clock_ns(CLOCK_MONOTONIC));
  m.root = true;
  m.argv = argv;
  s.procs[pid] = Proc{0, 1, static_cast<int>(syscall(SYS_pidfd_open, pid, 0))};
  if (!s.open_thread(pid, pid, true)) return fail("perf_event_open (the command's thread)");
  if (pipe2(s.stop_pipe, O_CLOEXEC) != 0) return fail("pipe");
  return true;
}

void Agentless::start() {
  s_->loop = std::thread([this] { s_->run(); });
}

void Agentless::finish() {
  State& s = *s_;
  if (!s.loop.joinable()) return;
  s.stopping.store(true, std::memory_order_release);
  if (s.stop_pipe[1] >= 0) {
    const char c = 0;
    ssize_t ignored = write(s.stop_pipe[1], &c, 1);
    (void)ignored;
  }
  s.loop.join();
}

std::vector<Agentless::Image> Agentless::take_images() {
  State& s = *s_;
  std::vector<Image> out;
  for (Img& m : s.imgs) {
    s.settle_argv(&m, true);
    Image im;
    im.root = m.root;
    im.start_ns = m.start + s.real_minus_mono;
    profile::Profile& p = im.profile;
    p.version = SPROF_VERSION;
    p.flags = (m.finished ? SPROF_F_FINISHED : 0u) | (m.child ? SPROF_F_CHILD : 0u);
    p.clock = profile::Clock::kPerf;
    p.requested_hz = s.hz;
    p.tick_ns = s.period;
    p.start_ns = im.start_ns;
    p.end_ns = m.ended ? m.end + s.real_minus_mono : 0;
    p.cpu_ns = m.periods * s.period;
    p.effective_hz = p.cpu_ns ? double(m.delivered) * 1e9 / double(p.cpu_ns) : 0;
    p.pid = m.pid;
    p.ppid = m.ppid;
    p.argv = m.argv;
    p.overflow = m.overflow;
    p.delivered = m.delivered;
    p.lost = m.lost;
    for (Reg& g : m.regs) {
      if (g.bins.empty() && !(g.r.flags & SPROF_R_MAIN)) continue;
      std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> bins(g.bins.begin(),
                                                                           g.bins.end());
      std::sort(bins.begin(), bins.end());
      profile::Region r = g.r;
      r.flags |= SPROF_R_SYSTEM;  // the kernel part of each bin, as drain mode's
      for (const auto& [i, c] : bins)
        if (i < r.nbins()) r.add(i, c.first, c.second);
      p.regions.push_back(std::move(r));
    }
    out.push_back(std::move(im));
  }
  std::stable_sort(out.begin(), out.end(), [](const Image& a, const Image& b) {
    if (a.root != b.root) return a.root;
    return a.start_ns < b.start_ns;
  });
  return out;
}

Agentless::Stats Agentless::stats() const {
  return s_->stats;
}

}  // namespace sprofil::record
