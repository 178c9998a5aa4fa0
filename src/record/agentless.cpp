// Sampling the command from outside (agentless.hpp): record's default where perf events are
// allowed.
#include "record/agentless.hpp"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>

#include "clock/perf.hpp"
#include "format/sprof_format.h"
#include "record/agentless_state.hpp"
#include "util/clock_ns.hpp"
#include "util/env.hpp"

namespace sprofil::record {

using namespace agentless_impl;

Agentless::State::~State() {
  for (auto& [pid, p] : procs)
    if (p.pidfd >= 0) close(p.pidfd);
  close_events();
  for (int fd : stop_pipe)
    if (fd >= 0) close(fd);
}

void Agentless::State::close_events() {
  for (Ring& r : rings) r.close_all();
  rings.clear();
  if (unshared >= 0) close(unshared);
  unshared = -1;
}

void Agentless::State::run() {
  // The stop; each ring's wake-up as it half fills (wakeup_watermark) only while a ring fills
  // fast or is small (Ring::filling); else every pass. The
  // kernel wakes whoever waits on a ring each time a copy of one of its events ends: a short
  // process's exit woke record's thread once for each of its events (three a CPU), and a
  // process of 1.3 ms paid for it 24-30 us of its own CPU (docs/benchmarks.md, "Record's
  // thread not woken by every exit").
  std::vector<pollfd> fds{{stop_pipe[0], POLLIN, 0}};
  for (const Ring& r : rings) fds.push_back(pollfd{r.fd, POLLIN, 0});
  while (!stopping.load(std::memory_order_acquire)) {
    const bool filling =
        std::any_of(rings.begin(), rings.end(), [](const Ring& r) { return r.filling; });
    poll(fds.data(), filling ? fds.size() : 1, next_pass_ms());
    ++stats.passes;
    pass();
    swap();
    checkpoint();
    serve_live();
  }
  rusage ru{};
  if (getrusage(RUSAGE_THREAD, &ru) == 0) stats.wakeups = static_cast<uint64_t>(ru.ru_nvcsw);
  pass(true);
  tell_last_losses();
  pass(true);
  ended_throttled(0, util::clock_ns(CLOCK_MONOTONIC));
  if (kernel) run_end();
  std::lock_guard<std::mutex> l(live_mu);  // the run ended: a waiting request gets nothing
  live_pids.clear();
  live_done = true;
  live_found = false;
  live_cv.notify_all();
}

// What a ring that was full till the run's end dropped, told. The kernel counts the records a
// full ring drops and writes a LOST record of them before the ring's next record only: when
// record read too slowly for the command's last stretch (the ASan build's record, 64 threads on
// 2 CPUs at 10 kHz: a CPU's last 0.4 s of samples) and the command then ended, no record came
// after, and those samples were neither counted nor lost. So, after the last read, this thread
// (whose tracking events make comm records) renames itself to its own name on the CPU of each
// ring that a read found nearly full (Ring::nearly_full; the others dropped nothing): each
// such ring takes a COMM record, after the LOST record of what it dropped, and the pass after
// reads them (the COMM record is this thread's, dropped there). A CPU outside the cpuset is
// left as it is (the command could not run there either). The visits cost a run 0.25 ms
// (bench/record_end_ab.sh), so a run whose rings never filled makes none.
void Agentless::State::tell_last_losses() {
  if (std::none_of(rings.begin(), rings.end(), [](const Ring& r) { return r.nearly_full; })) return;
  cpu_set_t was;
  char name[16] = {};
  if (sched_getaffinity(0, sizeof was, &was) != 0 || prctl(PR_GET_NAME, name) != 0) return;
  for (const Ring& r : rings) {
    if (!r.nearly_full || r.cpu < 0 || r.cpu >= CPU_SETSIZE) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(r.cpu, &one);
    // (sched_setaffinity moves this thread to the one CPU before it returns; a CPU outside
    // this thread's mask may be the command's, which can set its own within the cpuset.)
    if (sched_setaffinity(0, sizeof one, &one) != 0) continue;
    prctl(PR_SET_NAME, name);
  }
  sched_setaffinity(0, sizeof was, &was);
}

// Image m as it stands (`final`: at the end, an exec's arguments not read yet are read or
// given up; else its command name stands in for them).
Agentless::Image Agentless::State::image(Img& m, bool final) {
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
std::vector<Agentless::Image> Agentless::State::images(bool final) {
  std::vector<Image> out;
  for (Img& m : imgs) out.push_back(image(m, final));
  std::stable_sort(out.begin(), out.end(), [](const Image& a, const Image& b) {
    if (a.root != b.root) return a.root;
    return a.start_ns < b.start_ns;
  });
  return out;
}

void Agentless::State::serve_live() {
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
void Agentless::State::checkpoint() {
  if (!checkpoint_fn) return;
  const uint64_t now = util::clock_ns(CLOCK_MONOTONIC);
  if (now - checkpoint_at < checkpoint_ns || stats.samples == checkpoint_samples) return;
  checkpoint_fn(images(false));
  checkpoint_at = util::clock_ns(CLOCK_MONOTONIC);  // the next a whole interval after this one
  checkpoint_samples = stats.samples;
}

Agentless::Agentless() : s_(std::make_unique<State>()) {}
Agentless::~Agentless() {
  if (s_->loop.joinable()) finish();
}

namespace {

int perf_open(perf_event_attr* a, pid_t pid, int cpu) {
  return static_cast<int>(syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC));
}

// The attributes of each CPU's events (attach()): a task clock of period `period` that the
// command's threads and processes inherit; with `kernel` its samples in the kernel too, with
// the user pc (else user space only, allowed at perf_event_paranoid 2). With `track` instead
// a task clock that only counts (no period: no timer, no sample) and makes the task, comm and
// mmap records, which stays on while the two sets of task clocks are swapped (swap()): its
// count is the command's time, which the sets' counts, both on while a swap is made, exceed
// (run_end()). Opened disabled: record enables
// the tracking event and the first set once the command is forked, before its exec (start()).
// Not enabled by the exec (enable_on_exec): every exec in the command would then enable the
// set that is off in that process.
perf_event_attr event_attr(uint64_t period, bool kernel, size_t pages, bool track = false) {
  perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.sample_period = track ? 0 : period;
  a.sample_type = kSampleType | (kernel && !track ? PERF_SAMPLE_REGS_USER : 0);
  a.sample_regs_user = kernel && !track ? kUserPc : 0;
  a.sample_id_all = 1;
  a.inherit = 1;
  a.disabled = 1;
  a.exclude_kernel = !kernel;
  a.exclude_hv = 1;
  a.use_clockid = 1;
  a.clockid = CLOCK_MONOTONIC;
  a.task = track;
  a.comm = track;
  a.comm_exec = track;
  a.mmap = track;
  a.mmap2 = track;
  a.watermark = 1;  // a wake-up as one half fills, heard while a ring fills fast (run())
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

bool Agentless::attach(unsigned hz, std::string* why) {
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
  s.real_minus_mono = util::clock_ns(CLOCK_REALTIME) - util::clock_ns(CLOCK_MONOTONIC);
  s.rng ^= util::clock_ns(CLOCK_MONOTONIC) ^ (static_cast<uint64_t>(getpid()) << 32);
  util::xorshift(&s.rng);
  const long ncpu = sysconf(_SC_NPROCESSORS_CONF);
  const size_t pages = ring_pages();
  auto fail = [&](const std::string& what) {
    *why = what + ": " + strerror(errno);
    s.close_events();
    return false;
  };
  // perf record's model: on each CPU an event that the command's threads and children inherit
  // at their clone (no event to open, no gap), enabled once the command is forked (enable()),
  // beside one that makes the task, comm and mmap records; opened on this thread (the rings'),
  // which forks the command (agentless.hpp, "Against aliasing"). Its samples in the kernel too,
  // where perf_event_paranoid (at most 1) or the capabilities allow it; else user time only, as
  // `perf record --all-user`. Not the thread's own counter in each sample (PERF_SAMPLE_READ with
  // inherit, Linux 6.12), which drain mode's weights use: the kernel then switches between the
  // command's threads the slow way (each switch stops and starts their events: the fast swap of
  // cloned contexts would mix the threads' counts), and two threads passing a byte through pipes on
  // one CPU, 200,000 switches, took 3.6 s of CPU against perf record's 0.92 s (0.88 s without it).
  for (int with_kernel = kUserPc != 0; with_kernel >= 0 && s.rings.empty(); --with_kernel) {
    for (int cpu = 0; cpu < ncpu; ++cpu) {
      perf_event_attr a = event_attr(
          s.jitter ? rt::perf::jittered_period(s.period, &s.rng) : s.period, with_kernel, pages);
      const int fd = perf_open(&a, 0, cpu);
      if (fd < 0 && errno == ENODEV) continue;  // an offline CPU
      if (fd < 0 && with_kernel && (errno == EACCES || errno == EPERM || errno == EINVAL)) {
        s.close_events();
        break;  // perf_event_paranoid 2: user space only
      }
      if (fd < 0) return fail("perf_event_open");
      Ring r;
      r.cpu = cpu;
      if (!r.map(fd, pages)) {
        close(fd);
        return fail("mmap (perf ring)");
      }
      s.rings.push_back(r);
    }
    s.kernel = with_kernel && !s.rings.empty();
  }
  // Each CPU's tracking event (event_attr()), its records into the ring.
  for (Ring& r : s.rings) {
    perf_event_attr t = event_attr(0, s.kernel, pages, true);
    r.track = perf_open(&t, 0, r.cpu);
    if (r.track < 0) return fail("perf_event_open (tracking)");
    if (ioctl(r.track, PERF_EVENT_IOC_SET_OUTPUT, r.fd) != 0)
      return fail("perf_event_open (tracking output)");
  }
  // The second set (swap()): the same events, each of a period drawn for it, their samples
  // into the first's rings. Without it (the fds or memory refused), no swaps: each thread
  // keeps the period it was cloned with.
  for (size_t i = 0; s.jitter && i < s.rings.size(); ++i) {
    perf_event_attr b = event_attr(rt::perf::jittered_period(s.period, &s.rng), s.kernel, pages);
    uint64_t id = 0;
    Ring& r = s.rings[i];
    r.set_b = perf_open(&b, 0, r.cpu);
    if (r.set_b < 0 || ioctl(r.set_b, PERF_EVENT_IOC_SET_OUTPUT, r.fd) != 0 ||
        ioctl(r.set_b, PERF_EVENT_IOC_ID, &id) != 0) {
      for (Ring& o : s.rings) {
        if (o.set_b >= 0) close(o.set_b);
        o.set_b = -1;
      }
      s.set_b_ids.clear();
      break;
    }
    s.set_b_ids.push_back(id);
  }
  if (s.rings.empty()) {
    errno = ENODEV;
    return fail("perf_event_open");
  }
  // And an event the command does not inherit (a dummy, which counts nothing): a context of
  // events not all inherited makes the clone's context no copy of it, which the kernel never
  // swaps with it. Without it, where this thread and the command's, before its exec, switched
  // on one CPU, the command took this thread's context, the originals with it (one run in
  // three of bench/thread_phase.sh: one function 50-67% of the four). Closed once the command
  // is forked (root()).
  perf_event_attr d;
  memset(&d, 0, sizeof d);
  d.type = PERF_TYPE_SOFTWARE;
  d.size = sizeof d;
  d.config = PERF_COUNT_SW_DUMMY;
  d.disabled = 1;
  d.exclude_kernel = 1;
  d.exclude_hv = 1;
  s.unshared = perf_open(&d, 0, -1);
  if (s.unshared < 0) return fail("perf_event_open (dummy)");
  s.attached_ns = util::clock_ns(CLOCK_MONOTONIC);
  if (pipe2(s.stop_pipe, O_CLOEXEC) != 0) return fail("pipe");
  if (pipe2(s.go, O_CLOEXEC) != 0) return fail("pipe");
  return true;
}

// The command's events on: the first set's originals and their copies (the command's, made at
// its fork). This thread's own are on from now too (its samples and records are dropped,
// pass(); its CPU time is not the command's, run_end()). Then the command may exec.
void Agentless::State::enable(pid_t child) {
  for (const Ring& r : rings) {
    ioctl(r.track, PERF_EVENT_IOC_ENABLE, 0);
    ioctl(r.fd, PERF_EVENT_IOC_ENABLE, 0);
  }
  self_cpu_at = util::clock_ns(CLOCK_THREAD_CPUTIME_ID);
  root_pid = child;
  if (set_b_ids.size() == rings.size() && !rings.empty())
    next_swap = util::clock_ns(CLOCK_MONOTONIC) + kSwapMinMs * 1000000;
  const char c = 'g';
  ssize_t ignored = write(go[1], &c, 1);
  (void)ignored;
  close_go();
}

void Agentless::State::close_go() {
  for (int& fd : go) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

void Agentless::wait_to_exec() {
  int* go = s_->go;
  if (go[0] < 0) return;
  close(go[1]);
  char c;
  while (read(go[0], &c, 1) < 0 && errno == EINTR) {
  }
  close(go[0]);
}

void Agentless::root(pid_t pid, const std::vector<std::string>& argv) {
  State& s = *s_;
  if (s.unshared >= 0) close(s.unshared);  // (the fork is made: the dummy's work is done)
  s.unshared = -1;
  Img& m = s.new_img(pid, getpid(), s.attached_ns);
  m.root = true;
  m.argv = argv;
  s.procs[pid] = Proc{0, 1, static_cast<int>(syscall(SYS_pidfd_open, pid, 0))};
  s.born_in[pid] = 0;
}

pid_t Agentless::start(unsigned hz, const std::vector<std::string>& argv,
                       const std::function<pid_t()>& fork_command, std::string* why) {
  std::promise<pid_t> forked;
  std::future<pid_t> pid = forked.get_future();
  std::string failed;
  // (The references are the caller's, who waits for the pid: not used after it is set.)
  s_->loop = std::thread([&, this] {
    State& s = *s_;
    pid_t child = -1;
    if (attach(hz, &failed)) {
      child = fork_command();
      if (child > 0) {
        root(child, argv);
        s.enable(child);
      } else {
        failed = std::string("fork: ") + strerror(errno);
        s.close_events();
        s.close_go();
      }
    }
    forked.set_value(child);
    if (child > 0) s.run();
  });
  const pid_t child = pid.get();
  if (child < 0) {
    s_->loop.join();
    *why = failed;
  }
  return child;
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

void Agentless::bound_lost(uint64_t run_cpu_ns) {
  s_->bound_lost(run_cpu_ns);
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
  s_->checkpoint_at = util::clock_ns(CLOCK_MONOTONIC);
  s_->checkpoint_fn = std::move(fn);
}

Agentless::Stats Agentless::stats() const {
  Stats st = s_->stats;
  st.kernel = s_->kernel;
  return st;
}

}  // namespace sprofil::record
