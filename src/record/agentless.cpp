// Sampling the command from outside (agentless.hpp): record's default where perf events are
// allowed.
#include "record/agentless.hpp"

#include <asm/perf_regs.h>
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
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "clock/perf.hpp"
#include "record/process_end.hpp"
#include "util/env.hpp"
#include "util/loaded_object.hpp"

namespace sprofil::record {

namespace {

constexpr size_t kPage = 4096;
// A CPU's ring at most: 512 KiB, perf record's (6,500 samples, 0.65 s at 10 kHz). The kernel
// wakes record each time half a ring's size has been written (wakeup_watermark), from the
// program's CPU (an irq_work): rings of 128 KiB woke it 12 times a second at 10 kHz, 3 now.
constexpr size_t kMaxDataPages = 128;
constexpr int kPassMs = 16;  // a pass over every ring at least this often
// The samples' fields, in this order (perf_event_open(2)): ip, pid and tid, time, the id of
// the event (each copy's own), the period, and where kernel time is sampled the user
// registers' ABI and pc (the pc the thread returns to from the kernel). The side-band records
// end with pid and tid, time and the event's id (sample_id_all). No cpu: a ring is one CPU's.
constexpr uint64_t kSampleType = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                                 PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_PERIOD;
constexpr size_t kSampleIdBytes = 24;
#if defined(__x86_64__)
constexpr uint64_t kUserPc = 1ull << PERF_REG_X86_IP;
#elif defined(__aarch64__)
constexpr uint64_t kUserPc = 1ull << PERF_REG_ARM64_PC;
#else
constexpr uint64_t kUserPc = 0;  // no kernel time: user time only
#endif

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

// A sample or side-band record, in a pass's list sorted by time.
struct Rec {
  uint64_t time = 0;
  uint32_t type = 0;  // PERF_RECORD_*
  uint16_t misc = 0;
  uint32_t ring = 0;  // the ring (a CPU's) it came from
  std::vector<unsigned char> body;
};

// One CPU's copy of one thread's event (an inherited event counts a thread on one CPU: its
// time there): each of its samples ends a period.
struct Copy {
  uint64_t last_ns = 0;  // CLOCK_MONOTONIC of its last sample
  uint64_t acc = 0;      // ns of its periods not credited yet (the periods vary: re-draws)
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
  uint64_t entry_pc = 0;  // its program's entry point (_start), where a thread with no pc of
                          // its own is credited
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
  uint64_t entry = 0;  // e_entry: where an exec'd program starts
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
    GElf_Ehdr eh;
    if (gelf_getehdr(e, &eh)) f.entry = eh.e_entry;
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
  bool kernel = false;  // kernel time is sampled too (at the user pc: PERF_SAMPLE_REGS_USER)
  // The agent's settings, from the same variables (docs/agent.md, "Environment"): bytes of text
  // per counter (exact: the regions' counts are kept sparse in record's memory), and whether
  // each region gets its system-time array.
  uint32_t bin_bytes = 1;
  bool system = true;
  std::vector<Ring> rings;                      // one a CPU: the events that the command inherits
  std::vector<uint64_t> periods;                // per ring: the event's period now
  std::unordered_map<uint64_t, Copy> copies;    // by the copy's event id
  std::unordered_map<pid_t, uint64_t> last_pc;  // by tid: the pc of its last sample
  std::unordered_map<pid_t, uint64_t> last_ns;  // by tid: the time of its last sample or clone
  std::unordered_map<pid_t, std::vector<uint64_t>> ids_of;  // by tid: its copies' event ids
  std::unordered_map<pid_t, size_t> born_in;                // by tid: the image it was cloned in
  std::unordered_map<pid_t, Proc> procs;                    // by pid: the image running now
  // Threads and processes that ended, kept for two passes more: a sample on another CPU from
  // before a thread's EXIT record may be read a pass after it.
  struct Gone {
    int passes = 2;
    size_t img = ~size_t{0};  // the image it ended in
    uint64_t time = 0;        // its EXIT record's
  };
  std::unordered_map<pid_t, Gone> gone_tids;
  // The threads' ends, to take their share of the periods that no sample credited (run_end):
  // by (image, the thread's last pc), the sum of their weights, and of those of threads that
  // had no sample of their own (their pc is their creator's).
  struct Tail {
    uint64_t w = 0, unsampled_w = 0;
  };
  std::map<std::pair<size_t, uint64_t>, Tail> ends;
  std::unordered_map<pid_t, std::pair<size_t, int>> gone_procs;  // pid -> image, passes left
  std::deque<Img> imgs;  // (a deque: an image's address stays while others are added)
  pid_t root = 0;
  uint64_t root_records = 0, jitter_after = 0;  // the root thread's block (re-draw)
  uint64_t root_periods = 0;      // credited to the root thread (its age, for jitter_block)
  size_t root_ring = ~size_t{0};  // the ring of the root thread's last sample: its event that runs
  bool jitter = true;             // re-draw the periods (SPROFIL_JITTER=0: not, as the agent's)
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
    for (Ring& r : rings) r.close_all();
    for (int fd : stop_pipe)
      if (fd >= 0) close(fd);
  }

  // A copy is first seen at its first sample or its end: it counted from its thread's clone,
  // in the image the thread was cloned in.
  Copy& copy_of(uint64_t id, pid_t tid) {
    auto [it, fresh] = copies.try_emplace(id);
    if (fresh) {
      ids_of[tid].push_back(id);
      ++stats.copies;
    }
    return it->second;
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
    const size_t i = img_index(pid);
    return i == ~size_t{0} ? nullptr : &imgs[i];
  }
  size_t img_index(pid_t pid) const {
    if (const auto p = procs.find(pid); p != procs.end()) return p->second.img;
    if (const auto g = gone_procs.find(pid); g != gone_procs.end()) return g->second.first;
    return ~size_t{0};
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

  // A sample record: in the kernel (where sampled), at the user pc the thread returns to.
  void sample(const Rec& r) {
    const auto& b = r.body;
    uint64_t ip = field<uint64_t>(b, 0);
    const bool in_kernel = (r.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL;
    if (in_kernel) {
      if (!kernel || field<uint64_t>(b, 40) == PERF_SAMPLE_REGS_ABI_NONE) return;
      ip = field<uint64_t>(b, 48);
    }
    count(field<uint32_t>(b, 8), field<uint32_t>(b, 12), field<uint64_t>(b, 24), ip, r.time,
          field<uint64_t>(b, 32), in_kernel);
  }

  // A sample of thread tid on cpu at pc ip, `len` ns after its copy's sample before (the
  // period that ended here): in user space, or (`in_kernel`) in the kernel, counted as kernel time
  // at the pc the thread returns to, as drain mode counts it. Each image's samples are those
  // of its time (the records are in time order): a forked child's work before its exec is its
  // own.
  void count(pid_t pid, pid_t tid, uint64_t id, uint64_t ip, uint64_t time, uint64_t len,
             bool in_kernel) {
    ++stats.samples;
    const size_t at = img_index(pid);
    Img* m = at == ~size_t{0} ? nullptr : &imgs[at];
    Copy& c = copy_of(id, tid);
    // The samples of the CPUs' own events (the root thread's; or another's where the kernel
    // swapped the thread's cloned context for the root's at a switch on one CPU) are at the
    // period last set (the kernel's period field keeps a task clock's first); a copy made at
    // a clone keeps the period it was cloned with, which the sample tells.
    // (By the event's id, not the sample's cpu: the rings are the online CPUs', in order, and
    // a CPU that was offline has none.)
    const size_t k = static_cast<size_t>(std::find(ids.begin(), ids.end(), id) - ids.begin());
    const bool own = k < ids.size();
    if (own) {
      ++root_records;
      root_ring = k;
      len = periods[k];
    }
    c.acc += len;
    const uint64_t w = c.acc / period;
    c.acc -= w * period;
    if (own) root_periods += w;
    c.last_ns = time;
    last_pc[tid] = ip;
    last_ns[tid] = time;
    if (w && m) add(m, ip, w, in_kernel ? w : 0);
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

  // w periods at the end of a thread's time in image m: kernel time at its last pc; where it
  // had none (a thread or process shorter than its first period: an inherited event's first
  // period is a whole one), at its program's entry point, as the agent credits a thread's
  // start routine; else outside every object.
  void credit_at_end(Img* m, uint64_t pc, uint64_t w) {
    stats.exit_credited += w;
    if (!m) return;
    if (!pc) pc = m->entry_pc;
    if (pc) {
      add(m, pc, w, w);
      return;
    }
    m->delivered += w;
    m->periods += w;
    m->overflow += w;
  }

  // The kernel throttles a copy's event (PERF_RECORD_THROTTLE: it took more than
  // perf_event_max_sample_rate / HZ samples since the CPU's last tick) till that CPU's next
  // tick, or till the thread is next switched in where it left the CPU before (each writes
  // PERF_RECORD_UNTHROTTLE). Its thread's CPU time meanwhile, taken as sampled time that no
  // sample stands for, is lost samples of its image, at no pc (as a full ring's): the time from
  // the throttle to the earliest of the resume, the CPU's next tick (at most a tick: the
  // resolution of CLOCK_MONOTONIC_COARSE), and another thread of the command sampled or
  // throttled on that CPU (it was switched out by then). Three threads on two CPUs throttled at
  // 4 kHz counted 155% of their CPU as delivered with the whole time to the resume, which takes
  // their time switched out too. A thread that ends while throttled gets no resume: its end
  // (its EXIT record) ends the time, and what is still throttled when the run ends, its end.
  struct Throttle {
    uint64_t at = 0;    // when it was throttled
    uint32_t ring = 0;  // the CPU's ring its records go to
    size_t img = ~size_t{0};
    pid_t tid = 0;
  };
  void throttled(const Rec& r) {
    ++stats.throttled;
    const uint64_t id = field<uint64_t>(r.body, 16);
    ran_on(r.ring, id, r.time);
    const size_t ids_at = r.body.size() - kSampleIdBytes;  // sample_id: pid, tid, time, id
    throttled_at[id] = Throttle{r.time, r.ring, img_index(field<uint32_t>(r.body, ids_at)),
                                static_cast<pid_t>(field<uint32_t>(r.body, ids_at + 4))};
  }
  // Thread tid ended at `time` (tid 0: every thread, the run's end).
  void ended_throttled(pid_t tid, uint64_t time) {
    resume_if([&](uint64_t, const Throttle& t) { return tid == 0 || t.tid == tid; }, time);
  }
  void unthrottled(const Rec& r) {
    const auto it = throttled_at.find(field<uint64_t>(r.body, 16));
    if (it == throttled_at.end()) return;
    resumed(it->second, r.time);
    throttled_at.erase(it);
  }
  // Copy `id` ran on ring's CPU at `time`: the other copies throttled there were switched out.
  void ran_on(uint32_t ring, uint64_t id, uint64_t time) {
    resume_if([&](uint64_t c, const Throttle& t) { return t.ring == ring && c != id; }, time);
  }
  // The throttled copies for which stop(copy id, its throttle) holds resume at `time`.
  template <class Stop>
  void resume_if(Stop stop, uint64_t time) {
    for (auto it = throttled_at.begin(); it != throttled_at.end();)
      if (stop(it->first, it->second)) {
        resumed(it->second, time);
        it = throttled_at.erase(it);
      } else {
        ++it;
      }
  }
  void resumed(const Throttle& t, uint64_t time) {
    const uint64_t n = time > t.at ? std::min(time - t.at, tick_ns) / period : 0;
    if (n == 0 || t.img >= imgs.size()) return;
    imgs[t.img].lost += n;
    imgs[t.img].delivered += n;
    stats.throttled_lost += n;
  }
  std::unordered_map<uint64_t, Throttle> throttled_at;  // a copy's id -> its throttle
  const uint64_t tick_ns = [] {
    timespec ts{};
    if (clock_getres(CLOCK_MONOTONIC_COARSE, &ts) != 0 || (ts.tv_sec == 0 && ts.tv_nsec == 0))
      return uint64_t{10000000};  // HZ 100, the longest tick
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  }();

  void mmap2(const Rec& r) {
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
    g.r.bin_size = bin_bytes;
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
    if ((g.r.flags & SPROF_R_MAIN) && f && f->read && f->entry)
      m->entry_pc = g.r.load_bias + f->entry;
    m->live[g.r.start] = m->regs.size();
    m->regs.push_back(std::move(g));
  }

  void fork(const Rec& r) {
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
      if (parent) {
        m.argv = parent->argv;
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
      forked = true;
    }
    if (auto p = procs.find(pid); p != procs.end()) {
      ++p->second.threads;
      born_in[tid] = p->second.img;
      gone_tids.erase(tid);
    }
  }

  void exit(const Rec& r) {
    const pid_t pid = field<uint32_t>(r.body, 0), tid = field<uint32_t>(r.body, 8);
    gone_tids[tid] = Gone{2, img_index(pid), r.time};
    if (!throttled_at.empty()) ended_throttled(tid, r.time);
    auto p = procs.find(pid);
    if (p == procs.end()) return;
    if (--p->second.threads <= 0) {
      // Finished unless known to be killed (before Linux 6.15 a process reaped before record
      // looks leaves no exit code: taken as exited).
      const End how = p->second.pidfd >= 0 ? how_it_ended(pid, p->second.pidfd) : End{};
      end_img(&imgs[p->second.img], r.time, !how.known || how.exited);
      if (p->second.pidfd >= 0) close(p->second.pidfd);
      gone_procs[pid] = {p->second.img, 2};
      procs.erase(p);
    }
  }

  void comm(const Rec& r) {
    if (!(r.misc & PERF_RECORD_MISC_COMM_EXEC)) return;
    const pid_t pid = field<uint32_t>(r.body, 0);
    auto p = procs.find(pid);
    if (p == procs.end()) return;
    const char* name = reinterpret_cast<const char*>(r.body.data()) + 8;
    Img* m = &imgs[p->second.img];
    if (m->root && m->regs.empty() && m->delivered == 0) return;  // the command's own exec
    end_img(m, r.time, true);
    Img& n = new_img(pid, m->ppid, r.time);
    n.comm = std::string(name, strnlen(name, r.body.size() - 8));
    n.argv_pending = true;
    settle_argv(&n, false);
    p->second.img = imgs.size() - 1;
  }

  // A new period for the events, which the threads cloned from now on inherit (an inherited
  // copy's period is its own, fixed at its clone), and the root thread's own events take at
  // once (a re-draw of its block, as drain mode's). Every CPU's event where clones are being
  // made (`all`); at the end of the root thread's block only that of the CPU it last ran on:
  // a re-draw of an event of a thread that is running interrupts its CPU (the ioctl runs
  // there by IPI, bench/redraw_ipi.sh: 46 us of the thread's time each on the AMD EPYC VM of
  // docs/benchmarks.md), whichever CPU the event counts on, and at the end of a block the one
  // that counts now is the one whose samples the block's period set. An event of another CPU
  // keeps its own drawn period until the thread runs there at a block's end.
  void redraw(bool all) {
    for (size_t k = 0; k < rings.size(); ++k) {
      if (!all && root_ring < rings.size() && k != root_ring) continue;
      const uint64_t next = rt::perf::jittered_period(period, &rng);
      const uint64_t now = clock_ns(CLOCK_MONOTONIC);
      if (ioctl(rings[k].fd, PERF_EVENT_IOC_PERIOD, &next) != 0) continue;
      // The re-draw restarts the period: the part of the old one that had run ends no period.
      // The root thread's event on the CPU it last ran on was running since its last sample
      // (a block ends while it takes samples): that part is the time since then, modulo the
      // old period (a sample record may be in flight), credited with its next sample.
      if (const auto c = copies.find(ids[k]); c != copies.end() && k == root_ring)
        if (now > c->second.last_ns) c->second.acc += (now - c->second.last_ns) % periods[k];
      periods[k] = next;
      ++stats.redraws;
    }
    root_records = 0;
    jitter_after = rt::perf::jitter_block(&rng, period, root_periods);
  }

  // Every record of every ring, in time order; then the periods re-drawn where due.
  void pass() {
    std::vector<Rec> recs;
    for (uint32_t k = 0; k < rings.size(); ++k) {
      rings[k].read([&](const perf_event_header& h, const std::vector<unsigned char>& b) {
        if (b.size() < kSampleIdBytes) return;
        Rec r;
        r.type = h.type;
        r.misc = h.misc;
        r.ring = k;
        // A sample's time is its third field; a side-band record's is in its sample_id.
        r.time = field<uint64_t>(b, h.type == PERF_RECORD_SAMPLE ? 16 : b.size() - 16);
        r.body = b;
        recs.push_back(std::move(r));
      });
    }
    std::stable_sort(recs.begin(), recs.end(),
                     [](const Rec& a, const Rec& b) { return a.time < b.time; });
    forked = false;
    for (const Rec& r : recs) {
      const auto& b = r.body;
      switch (r.type) {
        case PERF_RECORD_SAMPLE:
          if (!throttled_at.empty()) ran_on(r.ring, field<uint64_t>(b, 24), r.time);
          sample(r);
          break;
        case PERF_RECORD_LOST:  // which thread's samples the full ring dropped is not known
          stats.lost += field<uint64_t>(b, 8);
          if (!imgs.empty()) {
            imgs.front().lost += field<uint64_t>(b, 8);
            imgs.front().delivered += field<uint64_t>(b, 8);
          }
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
    argv_pending = false;
    for (auto& [pid, p] : procs) {
      settle_argv(&imgs[p.img], false);
      argv_pending |= imgs[p.img].argv_pending;
    }
    // A new period for the clones to come where some were made (each process of a build
    // starts at a period of its own), and for the root thread at the end of its block.
    if (jitter && (forked || root_records >= jitter_after)) redraw(forked);
  }

  // A thread's end, two passes after its EXIT record: its weight for the periods that no
  // sample credited (run_end), and what record kept of it dropped.
  //
  // A copy's time since its last sample (and a thread's shorter than its first period: an
  // inherited copy starts with a whole period) ends no period. The kernel's record of each
  // copy's end (inherit_stat's READ record) is not reliable: it is written from the exiting
  // thread's CPU into every CPU's ring, and it loses records. 2,000 threads of 0.5 ms, two at
  // a time, lost 5-40% of their FORK, EXIT and READ records in 6 of 8 runs, with no LOST
  // record; perf record -s with `-e '{task-clock}:S'` as many; without inherit_stat, or with
  // the program pinned to one CPU, every record came (8 of 8, 6 of 6): the writes from
  // another CPU look to race with the ring's own CPU's. So the ends are credited together at
  // the run's end, from the events' counters (read(2) of an inherited event adds its copies'
  // ends): each thread takes a share in proportion to its wall time from its last sample (or
  // clone) to its exit, at most a period (a copy's time after its last sample is under a
  // period unless it was in the kernel, and a thread that slept before it exited did not run).
  void thread_end(pid_t tid, const Gone& g) {
    if (const auto ns = last_ns.find(tid); ns != last_ns.end() && g.img != ~size_t{0}) {
      const auto pc = last_pc.find(tid);
      const uint64_t w = g.time > ns->second ? std::min(g.time - ns->second, period) : 0;
      if (w) {
        Tail& e = ends[{g.img, pc != last_pc.end() ? pc->second : 0}];
        e.w += w;
        // A thread (not a process's first) with no sample of its own (no copy that sampled):
        // its pc is its creator's.
        if (!ids_of.count(tid) && imgs[g.img].pid != tid) {
          e.unsampled_w += w;
          ++stats.unsampled_threads;
        }
      }
    }
    last_pc.erase(tid);
    last_ns.erase(tid);
    born_in.erase(tid);
    if (const auto it = ids_of.find(tid); it != ids_of.end()) {
      for (const uint64_t id : it->second) copies.erase(id);
      ids_of.erase(it);
    }
  }

  // Once the command's every process ended: the periods of its events' counters (every
  // thread's, read(2) adding the copies' ends) that no sample credited, shared among the
  // threads' ends (thread_end) by largest remainder, each share at its thread's last pc (its
  // creator's, or its program's entry point, where it had no sample: credit_at_end).
  void run_end() {
    if (!procs.empty()) return;
    for (auto& [tid, g] : gone_tids) thread_end(tid, g);
    gone_tids.clear();
    uint64_t total = 0, credited = stats.lost + stats.throttled_lost;
    for (const Ring& r : rings) {
      uint64_t v = 0;
      if (::read(r.fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) return;
      total += v;
    }
    for (const Img& m : imgs) credited += m.periods;
    const uint64_t target = (total + period / 2) / period;
    if (target <= credited) return;
    uint64_t weight = 0;
    for (const auto& [at, e] : ends) weight += e.w;
    // The ends take at most their tails' time: a thread's CPU time from its last sample to its
    // exit is at most its weight. The rest was counted without a sample anywhere (a timer that
    // fired late, as when the VM did not run, skips the periods it missed; a re-drawn period's
    // cut part is estimated from wall time) and stays unplaced: the summary counts it as CPU
    // with no sample. Crediting it all at the ends once put 52 ms of a 0.6 s single-threaded
    // run at its exit in ld.so. (A throttled event's counter is no measure at all: at
    // kernel.perf_event_max_sample_rate 1000, a 0.32 s run read 3.7 s on 6.18.)
    const uint64_t missing = std::min(target - credited, (weight + period - 1) / period);
    stats.unplaced = target - credited - missing;
    if (missing == 0) return;
    std::vector<std::pair<uint64_t, std::pair<size_t, uint64_t>>> rest;  // remainder, end
    uint64_t given = 0;
    for (const auto& [at, e] : ends) {
      const unsigned __int128 share = static_cast<unsigned __int128>(missing) * e.w;
      const uint64_t n = static_cast<uint64_t>(share / weight);
      // The part of threads with no sample of their own, at their creator's pc (the summary
      // says how much: agentless.hpp).
      stats.unsampled_credited +=
          static_cast<uint64_t>(static_cast<unsigned __int128>(missing) * e.unsampled_w / weight);
      if (n) credit_at_end(&imgs[at.first], at.second, n);
      given += n;
      rest.push_back({static_cast<uint64_t>(share % weight), at});
    }
    std::sort(rest.begin(), rest.end(),
              [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = 0; given < missing && i < rest.size(); ++i, ++given)
      credit_at_end(&imgs[rest[i].second.first], rest[i].second.second, 1);
  }

  void run() {
    // The stop, and each ring's wake-up as it half fills (wakeup_watermark), else every pass.
    std::vector<pollfd> fds{{stop_pipe[0], POLLIN, 0}};
    for (const Ring& r : rings) fds.push_back(pollfd{r.fd, POLLIN, 0});
    while (!stopping.load(std::memory_order_acquire)) {
      poll(fds.data(), fds.size(), argv_pending ? 1 : kPassMs);
      pass();
      checkpoint();
      serve_live();
    }
    pass();
    ended_throttled(0, clock_ns(CLOCK_MONOTONIC));
    if (kernel) run_end();
    std::lock_guard<std::mutex> l(live_mu);  // the run ended: a waiting request gets nothing
    live_pids.clear();
    live_done = true;
    live_found = false;
    live_cv.notify_all();
  }

  // Image m as it stands (`final`: at the end, an exec's arguments not read yet are read or
  // given up; else its command name stands in for them).
  Agentless::Image image(Img& m, bool final) {
    if (final) settle_argv(&m, true);
    Image im;
    im.root = m.root;
    im.start_ns = m.start + real_minus_mono;
    profile::Profile& p = im.profile;
    p.version = SPROF_VERSION;
    p.flags = (m.finished ? SPROF_F_FINISHED : 0u) | (m.child ? SPROF_F_CHILD : 0u);
    p.clock = profile::Clock::kPerf;
    p.requested_hz = hz;
    p.tick_ns = period;
    p.start_ns = im.start_ns;
    p.end_ns = m.ended ? m.end + real_minus_mono : 0;
    p.cpu_ns = (m.periods + m.lost) * period;  // its periods, sampled or lost
    p.effective_hz = p.cpu_ns ? double(m.delivered) * 1e9 / double(p.cpu_ns) : 0;
    p.pid = m.pid;
    p.ppid = m.ppid;
    p.argv = final || !m.argv.empty() ? m.argv : std::vector<std::string>{m.comm};
    p.overflow = m.overflow;
    p.delivered = m.delivered;
    p.lost = m.lost;
    for (Reg& g : m.regs) {
      if (g.bins.empty() && !(g.r.flags & SPROF_R_MAIN)) continue;
      std::vector<std::pair<uint64_t, std::pair<uint64_t, uint64_t>>> bins(g.bins.begin(),
                                                                           g.bins.end());
      std::sort(bins.begin(), bins.end());
      profile::Region r = g.r;
      if (system) r.flags |= SPROF_R_SYSTEM;  // the kernel part of each bin, as drain mode's
      for (const auto& [i, c] : bins)
        if (i < r.nbins()) r.add(i, c.first, system ? c.second : 0);
      p.regions.push_back(std::move(r));
    }
    return im;
  }

  // The process images seen, the command's first image first, then by start time.
  std::vector<Agentless::Image> images(bool final) {
    std::vector<Image> out;
    for (Img& m : imgs) out.push_back(image(m, final));
    std::stable_sort(out.begin(), out.end(), [](const Image& a, const Image& b) {
      if (a.root != b.root) return a.root;
      return a.start_ns < b.start_ns;
    });
    return out;
  }

  // Live snapshots (record --live): the processes running now, and one request at a time for
  // a process's image, answered by the rings' thread after its next pass (a consistent image,
  // no lock held while the rings are read).
  std::mutex live_mu;
  std::condition_variable live_cv;
  std::vector<pid_t> live_pids;  // the processes running now (after each pass)
  pid_t live_want = 0;           // the process whose image is asked for; 0: none
  bool live_done = false;        // the answer is in live_answer (found: live_found)
  bool live_found = false;
  Agentless::Image live_answer;
  bool live_on = false;

  void serve_live() {
    if (!live_on) return;
    std::vector<pid_t> now;
    for (const auto& [pid, p] : procs) now.push_back(pid);
    std::unique_lock<std::mutex> l(live_mu);
    live_pids = std::move(now);
    if (live_want == 0 || live_done) return;
    live_found = false;
    if (const auto it = procs.find(live_want); it != procs.end() && it->second.img < imgs.size()) {
      live_answer = image(imgs[it->second.img], false);
      live_found = true;
    }
    live_done = true;
    live_cv.notify_all();
  }

  // The images as they stand, to checkpoint_fn every checkpoint_ns where samples came since.
  void checkpoint() {
    if (!checkpoint_fn) return;
    const uint64_t now = clock_ns(CLOCK_MONOTONIC);
    if (now - checkpoint_at < checkpoint_ns || stats.samples == checkpoint_samples) return;
    checkpoint_fn(images(false));
    checkpoint_at = clock_ns(CLOCK_MONOTONIC);  // the next a whole interval after this one
    checkpoint_samples = stats.samples;
  }
  std::function<void(std::vector<Agentless::Image>)> checkpoint_fn;
  uint64_t checkpoint_ns = 0, checkpoint_at = 0, checkpoint_samples = 0;

  bool forked = false;        // a pass saw a new process
  std::vector<uint64_t> ids;  // per ring: the id of its event (the root thread's copy)
};

Agentless::Agentless() : s_(std::make_unique<State>()) {}
Agentless::~Agentless() {
  if (s_->loop.joinable()) finish();
}

namespace {

// The attributes of each CPU's event (attach()): a task clock of period `period` that the
// command's threads and processes inherit, enabled by its exec, with the task, comm and mmap
// records; with `kernel` its samples in the kernel too, with the user pc (else user space
// only, allowed at perf_event_paranoid 2).
perf_event_attr event_attr(uint64_t period, bool kernel, size_t pages) {
  perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = period;
  a.sample_type = kSampleType | (kernel ? PERF_SAMPLE_REGS_USER : 0);
  a.sample_regs_user = kernel ? kUserPc : 0;
  a.sample_id_all = 1;
  a.inherit = 1;
  a.disabled = 1;
  a.enable_on_exec = 1;
  a.exclude_kernel = !kernel;
  a.exclude_hv = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.task = 1;
  a.comm = 1;
  a.comm_exec = 1;
  a.mmap = 1;
  a.mmap2 = 1;
  a.watermark = 1;  // record reads the rings every pass: a wake-up as one half fills
  a.wakeup_watermark = static_cast<uint32_t>(pages * kPage / 2);
  return a;
}

// Data pages for each CPU's ring: at most kMaxDataPages, and no more than the locked-memory
// allowance for perf rings gives each CPU (perf_event_mlock_kb: per user, times the online
// CPUs; a ring that the user's other rings leave no room for is mapped smaller, Ring::map).
size_t ring_pages() {
  long kb = 516;  // the kernel's default
  if (FILE* f = fopen("/proc/sys/kernel/perf_event_mlock_kb", "re")) {
    if (fscanf(f, "%ld", &kb) != 1) kb = 516;
    fclose(f);
  }
  const long per_cpu = kb * 1024 - static_cast<long>(kPage);
  size_t pages = kMaxDataPages;
  while (pages > 1 && static_cast<long>(pages * kPage) > per_cpu) pages /= 2;
  return pages;
}

}  // namespace

bool Agentless::allowed(std::string* why) {
  perf_event_attr a = event_attr(1000000, false, 1);
  const int fd = perf_open(&a, 0, 0);  // this process, CPU 0, as attach() opens one a CPU
  if (fd < 0) {
    *why = std::string("perf_event_open: ") + strerror(errno);
    return false;
  }
  close(fd);
  return true;
}

bool Agentless::attach(pid_t pid, unsigned hz, const std::vector<std::string>& argv,
                       std::string* why) {
  State& s = *s_;
  if (const char* v = getenv("SPROFIL_BIN_BYTES");
      v && *v && !util::parse_bin_bytes(v, &s.bin_bytes)) {
    *why = "SPROFIL_BIN_BYTES must be a power of two";
    return false;
  }
  if (const char* v = getenv("SPROFIL_SYSTEM"); v && *v) {
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0) {
      *why = "SPROFIL_SYSTEM must be 0 or 1";
      return false;
    }
    s.system = v[0] == '1';
  }
  if (const char* v = getenv("SPROFIL_JITTER"); v && strcmp(v, "0") == 0) s.jitter = false;
  s.hz = hz;
  s.period = 1000000000ull / (hz ? hz : 1);
  if (s.period == 0) s.period = 1;
  s.root = pid;
  s.real_minus_mono = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
  s.rng ^= clock_ns(CLOCK_MONOTONIC) ^ (static_cast<uint64_t>(pid) << 32);
  util::xorshift(&s.rng);
  const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  const size_t pages = ring_pages();
  auto fail = [&](const std::string& what) {
    *why = what + ": " + strerror(errno);
    for (Ring& r : s.rings) r.close_all();
    s.rings.clear();
    s.ids.clear();
    s.periods.clear();
    return false;
  };
  // perf record's model: on each CPU an event on the command that its threads and children
  // inherit at their clone (no event to open, no gap), enabled by its exec, with the task,
  // comm and mmap records. Its samples in the kernel too, where perf_event_paranoid (at most
  // 1) or the capabilities allow it; else user time only, as `perf record --all-user`.
  // Not the thread's own counter in each sample (PERF_SAMPLE_READ with inherit, Linux 6.12),
  // which drain mode's weights use: the kernel then switches between the command's threads
  // the slow way (each switch stops and starts their events: the fast swap of cloned contexts
  // would mix the threads' counts), and two threads passing a byte through pipes on one CPU,
  // 200,000 switches, took 3.6 s of CPU against perf record's 0.92 s (0.88 s without it).
  for (int with_kernel = kUserPc != 0; with_kernel >= 0 && s.rings.empty(); --with_kernel) {
    for (int cpu = 0; cpu < ncpu; ++cpu) {
      perf_event_attr a = event_attr(
          s.jitter ? rt::perf::jittered_period(s.period, &s.rng) : s.period, with_kernel, pages);
      const int fd = perf_open(&a, pid, cpu);
      if (fd < 0 && errno == ENODEV) continue;  // an offline CPU
      if (fd < 0 && with_kernel && (errno == EACCES || errno == EPERM || errno == EINVAL)) {
        for (Ring& r : s.rings) r.close_all();
        s.rings.clear();
        s.ids.clear();
        s.periods.clear();
        break;  // perf_event_paranoid 2: user space only
      }
      if (fd < 0) return fail("perf_event_open");
      Ring r;
      if (!r.map(fd, pages)) {
        close(fd);
        return fail("mmap (perf ring)");
      }
      uint64_t id = 0;
      if (ioctl(fd, PERF_EVENT_IOC_ID, &id) != 0) {
        r.close_all();
        return fail("PERF_EVENT_IOC_ID");
      }
      s.rings.push_back(r);
      s.ids.push_back(id);
      s.periods.push_back(a.sample_period);
    }
    s.kernel = with_kernel && !s.rings.empty();
  }
  if (s.rings.empty()) {
    errno = ENODEV;
    return fail("perf_event_open");
  }
  Img& m = s.new_img(pid, getpid(), clock_ns(CLOCK_MONOTONIC));
  m.root = true;
  m.argv = argv;
  s.procs[pid] = Proc{0, 1, static_cast<int>(syscall(SYS_pidfd_open, pid, 0))};
  s.born_in[pid] = 0;
  s.jitter_after = rt::perf::jitter_block(&s.rng, s.period, 0);
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
  return s_->images(true);
}

void Agentless::serve_live() {
  s_->live_on = true;
}

std::vector<pid_t> Agentless::live_pids() {
  std::lock_guard<std::mutex> l(s_->live_mu);
  return s_->live_pids;
}

bool Agentless::live_image(pid_t pid, Image* out, int timeout_ms) {
  State& s = *s_;
  std::unique_lock<std::mutex> l(s.live_mu);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  // One request at a time: wait for the slot, then for the answer.
  if (!s.live_cv.wait_until(l, until, [&] { return s.live_want == 0; })) return false;
  s.live_want = pid;
  s.live_done = false;
  const bool answered = s.live_cv.wait_until(l, until, [&] { return s.live_done; });
  const bool found = answered && s.live_found;
  if (found) *out = std::move(s.live_answer);
  s.live_want = 0;
  s.live_done = false;
  s.live_cv.notify_all();
  return found;
}

void Agentless::checkpoint(uint64_t every_ns, std::function<void(std::vector<Image>)> fn) {
  s_->checkpoint_ns = every_ns;
  s_->checkpoint_at = clock_ns(CLOCK_MONOTONIC);
  s_->checkpoint_fn = std::move(fn);
}

Agentless::Stats Agentless::stats() const {
  Stats st = s_->stats;
  st.kernel = s_->kernel;
  return st;
}

}  // namespace sprofil::record
