// agent_prog: the unmodified programs the agent tests record. Each mode burns CPU in named
// functions and, with --truth FILE, writes what it really used ("name value" lines).
//
//   agent_prog [--truth FILE] MODE ARGS...
//   burn S              burn S s in burn_main
//   burn_on CPU S       burn S s in burn_main on CPU only (its affinity set to it)
//   split S             burn S/3 s in burn_a and 2S/3 s in burn_b, interleaved
//   exit_ S             burn S s, then _exit(0) (atexit handlers do not run)
//   abort S             burn S s, then abort()
//   rawexit S           burn S s, write the truth, then end with a raw exit_group(3) system
//                       call (as Go's runtime does): no atexit handler, no _exit
//   sigcount PIDFILE    count the SIGINTs and SIGTERMs it gets: write the pid to PIDFILE, burn
//                       in burn_main until 0.2 s (wall) after the first of them (or 20 s in all),
//                       then write the truth (sigint, sigterm: how many) and exit 0
//   forkmany N US       fork N children in turn; each spins until its thread has US us of CPU,
//                       then calls _exit(0); the parent waits for each (truth: children)
//   vforkkill S         burn S s, vfork a child that calls _exit(0) at once, burn S s more,
//                       write the truth, then SIGKILL itself
//   handlerexit S       malloc and free in a loop (with 1 ms burns in burn_main) until a
//                       SIGALRM S s of wall time later, whose handler calls _exit(9); a
//                       watchdog SIGUSR2 (default action: terminate) 30 s later ends a
//                       process that hangs in that _exit
//   forever PIDFILE     write the pid to PIDFILE, then burn until killed
//   burnexec S CMD...   burn S s, then execvp CMD
//   fork SP SC [failexec]  fork; the child burns SC s in burn_child and exits; the parent
//                       waits, then burns SP s in burn_parent (truth: child_pid, child_cpu,
//                       child_cpu_task_clock, ...); with failexec the child first tries to exec a
//                       program that does not exist
//   forkdl SO FN S      fork; the child burns 0.1 s in burn_child, dlopens SO and burns S s in
//                       its FN (double FN(double s)), then exits (truth .child: child_pid,
//                       child_cpu, dl_cpu); the parent waits. With `gone` as a 4th argument,
//                       the parent first removes its own profile file (the one it maps), as
//                       the record parent removes the file of a process that took no sample
//                       at its end: the child then cannot read the file it was forked with
//   forkexec SC CMD...  fork; the child spends SC s of CPU in the kernel (reading /dev/zero,
//                       nearly no user time), writes its truth (.child: child_pid, child_cpu,
//                       child_cpu_task_clock) and execs CMD; the parent waits
//   daemon S            the daemon pattern: runs `agent_prog launch S FD` (fork and exec), which
//                       removes its own profile file (as the record parent removes the file of
//                       a process that took no sample at its end), forks a child and exits
//                       once the child runs; the child, once its parent has exited, starts a
//                       thread that burns S s in burn_daemon (truth .daemon: daemon_pid,
//                       daemon_cpu, its task clock) and exits. This process waits for both
//                       (the child holds the pipe FD). With `now` as a 2nd argument the
//                       launcher exits right after its fork, and its child hands its event
//                       over only after that end (libagent_early_fork's atfork handler)
//   threads N S         N late threads (pthread_create in main) plus $AGENT_EARLY_THREADS
//                       threads started by a library constructor, each burning S s in a
//                       function of its own (burn_late_K, burn_early_K)
//   sleepburn S         a thread burns S s in burn_main while the main thread sleeps S s of
//                       wall time in clock_nanosleep
//   anonexec S          runs a spin loop copied into an anonymous executable mapping for S s
//                       of CPU (x86-64 only; exit 77 elsewhere)
//   phase N MS          N threads made and joined in turn, each running phase_a, phase_b,
//                       phase_c and phase_d for MS ms of wall time apiece, three times over:
//                       short threads that all run the same work from their start, a quarter
//                       of it in each function
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "burn.hpp"

SPROFIL_BURN(burn_main)
SPROFIL_BURN(burn_a)
SPROFIL_BURN(burn_b)
SPROFIL_BURN(burn_child)
SPROFIL_BURN(burn_parent)
SPROFIL_BURN(burn_late_0)
SPROFIL_BURN(burn_late_1)
SPROFIL_BURN(burn_late_2)
SPROFIL_BURN(burn_late_3)
SPROFIL_BURN(burn_daemon)

extern "C" int agent_early_count(bool* before_agent);
extern "C" void agent_early_go(double seconds);
extern "C" double agent_early_join(int k);
extern "C" void agent_early_hold_child();

namespace {

const char* g_truth = nullptr;
std::string g_lines;

void note(const char* name, double v) {
  char line[256];
  snprintf(line, sizeof line, "%s %.6f\n", name, v);
  g_lines += line;
}

void write_truth(const char* suffix = "") {
  if (!g_truth) return;
  note("process_cpu", burn_process_cpu());
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  note("process_system",
       static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) * 1e-6);
  const std::string path = std::string(g_truth) + suffix;
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return;
  fputs(g_lines.c_str(), f);
  fclose(f);
}

// This thread's task clock (a counting perf event, no sampling), in seconds, or -1 if perf
// events are not allowed. The perf clock's periods are task-clock time, which counts the time
// the hypervisor steals while the thread is on its vCPU (sched_clock runs on); the thread's
// CPU clock and rusage do not (CONFIG_PARAVIRT_TIME_ACCOUNTING). tests/clock compares the
// perf clock's samples with the CPU time plus that difference.
int task_clock_fd() {
  perf_event_attr a;
  memset(&a, 0, sizeof a);
  a.type = PERF_TYPE_SOFTWARE;
  a.size = sizeof a;
  a.config = PERF_COUNT_SW_TASK_CLOCK;
  a.exclude_kernel = 1;  // allowed at perf_event_paranoid 2; the task clock counts all the same
  a.exclude_hv = 1;
  return static_cast<int>(syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

double task_clock(int fd) {
  uint64_t v = 0;
  return fd >= 0 && read(fd, &v, sizeof v) == sizeof v ? static_cast<double>(v) * 1e-9 : -1;
}

// Runs fn(s) and notes what it used: `name` (its CPU time) and, where perf events are
// allowed, `name`_task_clock (task_clock_fd: its CPU time plus the steal the perf clock counts).
void burn_noting(const char* name, double (*fn)(double), double s) {
  const int tc = task_clock_fd();
  const double t0 = task_clock(tc);
  const double used = fn(s);
  const double t1 = task_clock(tc);
  note(name, used);
  if (tc >= 0) {
    note((std::string(name) + "_task_clock").c_str(), t1 - t0);
    close(tc);
  }
}

struct Late {
  double (*fn)(double);
  double seconds, used;
};

void* late_thread(void* p) {
  auto* l = static_cast<Late*>(p);
  l->used = l->fn(l->seconds);
  return nullptr;
}

int threads(int n, double s) {
  bool before_agent = false;
  const int early = agent_early_count(&before_agent);
  double (*const fns[])(double) = {burn_late_0, burn_late_1, burn_late_2, burn_late_3};
  Late late[4];
  pthread_t tids[4];
  if (n > 4) n = 4;
  for (int k = 0; k < n; ++k) {
    late[k] = Late{fns[k], s, 0};
    pthread_create(&tids[k], nullptr, late_thread, &late[k]);
  }
  agent_early_go(s);
  char name[64];
  for (int k = 0; k < n; ++k) {
    pthread_join(tids[k], nullptr);
    snprintf(name, sizeof name, "burn_late_%d", k);
    note(name, late[k].used);
  }
  for (int k = 0; k < early; ++k) {
    snprintf(name, sizeof name, "burn_early_%d", k);
    note(name, agent_early_join(k));
  }
  note("early_threads", early);
  note("early_before_agent", before_agent ? 1 : 0);
  write_truth();
  return 0;
}

// n threads that each burn `us` microseconds in burn_child, `par` at a time (each group joined
// before the next), then n2 threads of us2 microseconds each alike, then s seconds in
// burn_main: a program that runs short tasks on new threads, on every CPU at once.
int churn(int n, double us, int par, double s, int n2 = 0, double us2 = 0) {
  if (par < 1) par = 1;
  if (par > 64) par = 64;
  Late l[64];
  pthread_t tids[64];
  double used = 0;
  for (int done = 0; done < n + n2; done += par) {
    for (int k = 0; k < par; ++k) {
      l[k] = Late{burn_child, (done < n ? us : us2) * 1e-6, 0};
      pthread_create(&tids[k], nullptr, late_thread, &l[k]);
    }
    for (int k = 0; k < par; ++k) {
      pthread_join(tids[k], nullptr);
      used += l[k].used;
    }
  }
  note("burn_child", used);
  burn_noting("burn_main", burn_main, s);
  write_truth();
  return 0;
}

// phase: each function spins for g_phase_ns of wall time (CLOCK_MONOTONIC, read in the vDSO).
uint64_t g_phase_ns = 0;
uint64_t mono_ns() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}
volatile uint64_t g_phase_sink = 0;
// (extern "C": named plainly in the report, as burn.hpp's are; 200 steps between clock reads,
// so that the time is the function's own, not the vDSO's.)
#define PHASE_FN(name)                               \
  extern "C" __attribute__((noinline)) void name() { \
    const uint64_t start = mono_ns();                \
    uint64_t x = 0;                                  \
    while (mono_ns() - start < g_phase_ns)           \
      for (int k = 0; k < 200; ++k) x += x * 3 + 1;  \
    g_phase_sink = x;                                \
  }
PHASE_FN(phase_a)
PHASE_FN(phase_b)
PHASE_FN(phase_c)
PHASE_FN(phase_d)
#undef PHASE_FN

void* phase_thread(void*) {
  for (int r = 0; r < 3; ++r) {
    phase_a();
    phase_b();
    phase_c();
    phase_d();
  }
  return nullptr;
}

int phase(int n, double ms) {
  g_phase_ns = static_cast<uint64_t>(ms * 1e6);
  for (int k = 0; k < n; ++k) {
    pthread_t t;
    if (pthread_create(&t, nullptr, phase_thread, nullptr) != 0) return 1;
    pthread_join(t, nullptr);
  }
  write_truth();
  return 0;
}

int sleepburn(double s) {
  Late l{burn_main, s, 0};
  pthread_t tid;
  pthread_create(&tid, nullptr, late_thread, &l);
  timespec t0, deadline, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  deadline = t0;
  deadline.tv_sec += static_cast<time_t>(s);
  deadline.tv_nsec += static_cast<long>((s - static_cast<double>(static_cast<time_t>(s))) * 1e9);
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000;
  }
  // A profiling signal interrupts the sleep (EINTR): sleep again until the deadline.
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, nullptr) != 0) {
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  pthread_join(tid, nullptr);
  note("burn_main", l.used);
  note("sleep_wall", static_cast<double>(t1.tv_sec - t0.tv_sec) +
                         static_cast<double>(t1.tv_nsec - t0.tv_nsec) * 1e-9);
  write_truth();
  return 0;
}

std::atomic<int> g_sigint{0}, g_sigterm{0};  // lock-free: signal-safe

void count_signal(int sig) {
  (sig == SIGINT ? g_sigint : g_sigterm).fetch_add(1);
}

int sigcount(const char* pidfile) {
  signal(SIGINT, count_signal);
  signal(SIGTERM, count_signal);
  if (FILE* f = fopen(pidfile, "w")) {
    fprintf(f, "%d\n", static_cast<int>(getpid()));
    fclose(f);
  }
  // 0.2 s of wall time after the first: a copy relayed at once comes within it, and a loaded
  // machine does not stretch it past record's grace of a second (as CPU time could).
  double used = 0, first = -1;
  const auto wall = [] {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  while (used < 20 && (first < 0 || wall() - first < 0.2)) {
    used += burn_main(0.01);
    if (first < 0 && (g_sigint || g_sigterm)) first = wall();
  }
  note("burn_main", used);
  note("sigint", g_sigint.load());
  note("sigterm", g_sigterm.load());
  write_truth();
  return 0;
}

int forkmany(int n, double us) {
  int made = 0;
  for (int k = 0; k < n; ++k) {
    const pid_t pid = fork();
    if (pid == 0) {
      while (burn_thread_cpu() * 1e6 < us) {
      }
      _exit(0);
    }
    if (pid > 0 && waitpid(pid, nullptr, 0) == pid) ++made;
  }
  note("children", made);
  write_truth();
  return made == n ? 0 : 1;
}

int vforkkill(double s) {
  double used = burn_main(s);
  const pid_t pid = vfork();
  if (pid == 0) _exit(0);
  if (pid < 0 || waitpid(pid, nullptr, 0) != pid) return 3;
  used += burn_main(s);
  note("burn_main", used);
  write_truth();
  raise(SIGKILL);
  return 4;
}

void exit_nine(int) {
  _exit(9);
}

int handlerexit(double s) {
  timer_t watchdog;
  sigevent ev{};
  ev.sigev_notify = SIGEV_SIGNAL;
  ev.sigev_signo = SIGUSR2;
  const itimerspec dog{{0, 0}, {30, 0}};
  if (timer_create(CLOCK_MONOTONIC, &ev, &watchdog) != 0 ||
      timer_settime(watchdog, 0, &dog, nullptr) != 0)
    return 3;
  signal(SIGALRM, exit_nine);
  const auto whole = static_cast<time_t>(s);
  const itimerval when{{0, 0},
                       {whole, static_cast<suseconds_t>((s - static_cast<double>(whole)) * 1e6)}};
  if (setitimer(ITIMER_REAL, &when, nullptr) != 0) return 3;
  for (unsigned k = 1;; ++k) {
    void* p = malloc(16 + (k * 2654435761u) % 100000);
    if (p) memset(p, static_cast<int>(k), 16);
    free(p);
    if (k % 256 == 0) burn_main(0.001);
  }
}

int anonexec(double s) {
#if defined(__x86_64__)
  // mov %rdi,%rax; 1: dec %rax; jnz 1b; ret
  static const unsigned char code[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 1;
  memcpy(page, code, sizeof code);
  if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return 1;
  auto spin = reinterpret_cast<void (*)(long)>(page);
  // Only the spin is timed: the clock reads between calls are a tiny part of the CPU.
  const double t0 = burn_thread_cpu();
  double now = t0;
  while (now - t0 < s) {
    spin(20000000);  // a few ms
    now = burn_thread_cpu();
  }
  note("spin_cpu", now - t0);
  write_truth();
  return 0;
#else
  (void)s;
  return 77;
#endif
}

int fork_mode(double sp, double sc, bool failexec) {
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    if (failexec) execl("/nonexistent/sprofil-no-such-program", "x", static_cast<char*>(nullptr));
    burn_noting("child_cpu", burn_child, sc);
    note("child_pid", getpid());
    write_truth(".child");
    exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  burn_noting("parent_cpu", burn_parent, sp);
  note("child_pid", pid);
  note("parent_pid", getpid());
  write_truth();
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

// This process's own profile file under `sprofil record`: the file mapped shared at offset 0
// (its header) whose name is that of $SPROFIL_OUTPUT or follows it (NAME.PID, NAME.PID.K).
// Empty if none.
std::string own_profile() {
  const char* out = getenv("SPROFIL_OUTPUT");
  const char* slash = out ? strrchr(out, '/') : nullptr;
  if (!slash) return "";
  const std::string name = slash + 1;
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) return "";
  char line[4096];
  std::string found;
  while (found.empty() && fgets(line, sizeof line, maps)) {
    char perms[8] = {}, path[4096] = {};
    unsigned long long off = 1;
    const char* base = nullptr;
    if (sscanf(line, "%*s %7s %llx %*s %*s %4095s", perms, &off, path) == 3 && perms[3] == 's' &&
        off == 0 && (base = strrchr(path, '/')) && std::string(base + 1).rfind(name, 0) == 0)
      found = path;
  }
  fclose(maps);
  return found;
}

// Removes own_profile(), as the record parent removes the file of a process that took no
// sample at its end. False (said) if there is none.
bool remove_own_profile() {
  const std::string own = own_profile();
  if (own.empty() || unlink(own.c_str()) != 0) {
    fprintf(stderr, "agent_prog: no profile file of its own to remove\n");
    return false;
  }
  return true;
}

int forkdl(const char* so, const char* fn, double seconds, bool gone) {
  if (gone && !remove_own_profile()) return 2;
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    burn_noting("child_cpu", burn_child, 0.1);
    void* h = dlopen(so, RTLD_NOW);
    auto* f = h ? reinterpret_cast<double (*)(double)>(dlsym(h, fn)) : nullptr;
    if (!f) {
      fprintf(stderr, "agent_prog: %s\n", dlerror());
      _exit(2);
    }
    note("dl_cpu", f(seconds));
    note("child_pid", getpid());
    write_truth(".child");
    exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  note("child_pid", pid);
  note("parent_pid", getpid());
  write_truth();
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

// The child's kernel burn: reads of 16 MB from /dev/zero (the kernel clears the buffer, a
// few ms a read) until this process has used `seconds` of CPU. Its user time, a vDSO clock
// read between reads, is a few microseconds in all.
int forkexec(double seconds, char** cmd) {
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    static char buf[16 << 20];
    const int tc = task_clock_fd();
    const double c0 = burn_process_cpu(), t0 = task_clock(tc);
    const int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    if (fd < 0) _exit(1);
    while (burn_process_cpu() < seconds)
      if (read(fd, buf, sizeof buf) <= 0) _exit(1);
    close(fd);
    const double c1 = burn_process_cpu(), t1 = task_clock(tc);
    note("child_cpu", c1);
    rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    note("child_system",
         static_cast<double>(ru.ru_stime.tv_sec) + static_cast<double>(ru.ru_stime.tv_usec) * 1e-6);
    if (tc >= 0) note("child_cpu_task_clock", c1 + (t1 - t0) - (c1 - c0));  // + the burn's steal
    note("child_pid", getpid());
    write_truth(".child");
    execvp(cmd[0], cmd);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

void* daemon_thread(void* p) {
  burn_noting("daemon_cpu", burn_daemon, *static_cast<double*>(p));
  return nullptr;
}

// `launch S FD`: see `daemon` above.
int launch(double seconds, int fd, bool now) {
  if (!remove_own_profile()) return 2;
  // The launcher exits once the child runs: its fork's hand-over (its main thread's event)
  // is done by then. With `now`, right after its fork, and the child's hand-over waits
  // until the record parent has seen this end (early_fork.cpp).
  int up[2];
  if (pipe(up) != 0) return 1;
  const pid_t launcher = getpid();
  if (now) agent_early_hold_child();  // the child hands over after this process ended
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid > 0) {
    char c;
    if (now) _exit(0);
    close(up[1]);
    _exit(read(up[0], &c, 1) == 1 ? 0 : 5);
  }
  close(up[0]);
  if (!now && write(up[1], "r", 1) != 1) _exit(5);
  close(up[1]);
  for (int i = 0; i < 5000 && getppid() == launcher; ++i) usleep(1000);
  if (getppid() == launcher) _exit(3);
  double s = seconds;
  pthread_t t;
  if (pthread_create(&t, nullptr, daemon_thread, &s) != 0) _exit(4);
  pthread_join(t, nullptr);
  note("daemon_pid", getpid());
  write_truth(".daemon");
  close(fd);
  exit(0);
}

int daemon_mode(const char* self, double seconds, bool now) {
  int p[2];
  if (pipe(p) != 0) return 1;  // the write end is inherited by the launcher and its child
  const pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    close(p[0]);
    const std::string s = std::to_string(seconds), fd = std::to_string(p[1]);
    execl(self, self, "--truth", g_truth ? g_truth : "/dev/null", "launch", s.c_str(), fd.c_str(),
          now ? "now" : static_cast<char*>(nullptr), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(p[1]);
  int st = 0;
  waitpid(pid, &st, 0);
  char c;
  while (read(p[0], &c, 1) > 0) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // The process's CPU before main: the exec, the loader and the constructors (the agent's
  // start among them), which a clock started by the agent samples only in part.
  note("process_cpu_at_main", burn_process_cpu());
  int i = 1;
  if (i + 1 < argc && !strcmp(argv[i], "--truth")) {
    g_truth = argv[i + 1];
    i += 2;
  }
  if (i >= argc) {
    fprintf(stderr, "usage: agent_prog [--truth FILE] MODE ARGS...\n");
    return 2;
  }
  const std::string mode = argv[i];
  const double s = i + 1 < argc ? atof(argv[i + 1]) : 0;
  if (mode == "burn") {
    burn_noting("burn_main", burn_main, s);
  } else if (mode == "burn_on" && i + 2 < argc) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(atoi(argv[i + 1]), &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 3;
    burn_noting("burn_main", burn_main, atof(argv[i + 2]));
  } else if (mode == "split") {
    double a = 0, b = 0;
    for (double done = 0; done < s; done += 0.03) {
      a += burn_a(0.01);
      b += burn_b(0.02);
    }
    note("burn_a", a);
    note("burn_b", b);
  } else if (mode == "exit_") {
    note("burn_main", burn_main(s));
    write_truth();
    _exit(0);
  } else if (mode == "abort") {
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    note("burn_main", burn_main(s));
    write_truth();
    abort();
  } else if (mode == "rawexit") {
    burn_noting("burn_main", burn_main, s);
    write_truth();
    syscall(SYS_exit_group, 3);
  } else if (mode == "sigcount") {
    if (i + 1 >= argc) return 2;
    return sigcount(argv[i + 1]);
  } else if (mode == "forkmany") {
    if (i + 2 >= argc) return 2;
    return forkmany(atoi(argv[i + 1]), atof(argv[i + 2]));
  } else if (mode == "vforkkill") {
    return vforkkill(s);
  } else if (mode == "handlerexit") {
    return handlerexit(s);
  } else if (mode == "forever") {
    if (FILE* f = fopen(argv[i + 1], "w")) {
      fprintf(f, "%d\n", static_cast<int>(getpid()));
      fclose(f);
    }
    burn_main(-1);
  } else if (mode == "burnexec") {
    note("burn_main", burn_main(s));
    write_truth();
    if (i + 2 >= argc) return 2;
    execvp(argv[i + 2], argv + i + 2);
    perror("agent_prog: execvp");
    return 127;
  } else if (mode == "fork") {
    return fork_mode(s, i + 2 < argc ? atof(argv[i + 2]) : 0,
                     i + 3 < argc && !strcmp(argv[i + 3], "failexec"));
  } else if (mode == "forkdl") {
    if (i + 3 >= argc) return 2;
    return forkdl(argv[i + 1], argv[i + 2], atof(argv[i + 3]),
                  i + 4 < argc && !strcmp(argv[i + 4], "gone"));
  } else if (mode == "daemon") {
    return daemon_mode("/proc/self/exe", s, i + 2 < argc && !strcmp(argv[i + 2], "now"));
  } else if (mode == "launch") {
    if (i + 2 >= argc) return 2;
    return launch(s, atoi(argv[i + 2]), i + 3 < argc && !strcmp(argv[i + 3], "now"));
  } else if (mode == "forkexec") {
    if (i + 2 >= argc) return 2;
    return forkexec(s, argv + i + 2);
  } else if (mode == "threads") {
    return threads(atoi(argv[i + 1]), i + 2 < argc ? atof(argv[i + 2]) : 0);
  } else if (mode == "churn" && i + 4 < argc) {
    return churn(atoi(argv[i + 1]), atof(argv[i + 2]), atoi(argv[i + 3]), atof(argv[i + 4]),
                 i + 6 < argc ? atoi(argv[i + 5]) : 0, i + 6 < argc ? atof(argv[i + 6]) : 0);
  } else if (mode == "sleepburn") {
    return sleepburn(s);
  } else if (mode == "anonexec") {
    return anonexec(s);
  } else if (mode == "phase" && i + 2 < argc) {
    return phase(atoi(argv[i + 1]), atof(argv[i + 2]));
  } else {
    fprintf(stderr, "agent_prog: unknown mode %s\n", mode.c_str());
    return 2;
  }
  write_truth();
  return 0;
}
