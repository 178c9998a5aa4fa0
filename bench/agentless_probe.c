// A prototype, for measurement only, of sampling a command's processes with nothing loaded into
// them (issue 10, goal 1 on short processes): the parent that runs the command opens every
// thread's sampling event itself, as soon as the kernel tells it the thread exists, instead of
// an agent in each process opening its own and handing it over. Not part of sprofil; it writes
// no profile and counts samples only, so that what it costs the program and the tree can be
// set beside perf record and `sprofil record` (bench/agentless.sh).
//
// Modes:
//   open     per-CPU tracker events on the command (a dummy software event, inherited,
//            enabled at the exec, task and comm records only, a wake-up per record: a watermark of
//            one byte). On each PERF_RECORD_FORK the parent opens a task-clock sampling event on
//            the new thread (pid = tid, cpu = -1, not inherited, its period drawn with jitter as
//            sprofil's drainer draws it), maps a two-page ring and drains it; at PERF_RECORD_EXIT
//            it drains and closes it. Re-draws the period every BLOCK samples
//            (PERF_EVENT_IOC_PERIOD), which an inherited event's copies cannot have. The command's
//            own first thread gets its event before the exec (enable_on_exec).
//   track    open mode's tracker alone: no thread's event is opened (what the tracker's records
//            and the parent's wake-ups cost, apart from the events' opening)
//   inherit  perf record's model: per-CPU task-clock sampling events on the command, inherited,
//            enabled at the exec, one ring per CPU; one fixed period, no re-draw.
// With -g (open mode) the parent also reads each new thread's CPU time so far from
// /proc/PID/task/TID/schedstat when it opens the event, and the event's count when it closes
// it: the CPU each thread ran before it could be sampled (the gap), against its whole CPU.
//
// With -n (open mode) the tracker has no comm records: no wake-up of the parent at an exec.
//
// Usage: agentless_probe open|track|inherit [-F HZ] [-g] [-n] -- CMD [ARGS...]
// Prints one line on stderr at the end; exits with the command's status.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CPUS 256
#define MAX_THREADS 4096
#define BLOCK 64

static long page;
static uint64_t period_ns;
static uint64_t rng = 0x9e3779b97f4a7c15ull;

struct ring {
  int fd;
  void* base;
  size_t data_size;
};

struct thread {
  int tid, pid;
  struct ring r;
  uint64_t gap_ns, since_redraw;
};

static struct thread threads[MAX_THREADS];
static int nthreads;
static uint64_t samples, lost, redraws, opened, open_failed, gap_total, run_total, forks, exits;

static uint64_t next_rand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

// Uniform in [3P/4, 5P/4], as sprofil's jittered_period draws the rate's spread.
static uint64_t draw_period(void) {
  return period_ns * 3 / 4 + next_rand() % (period_ns / 2 + 1);
}

static int perf_open(struct perf_event_attr* a, pid_t pid, int cpu) {
  return (int)syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static int map_ring(struct ring* r, int fd, int data_pages) {
  r->fd = fd;
  r->data_size = (size_t)data_pages * (size_t)page;
  r->base = mmap(NULL, (size_t)page + r->data_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return r->base == MAP_FAILED ? -1 : 0;
}

static void unmap_ring(struct ring* r) {
  if (r->base && r->base != MAP_FAILED) munmap(r->base, (size_t)page + r->data_size);
  if (r->fd >= 0) close(r->fd);
  r->base = NULL;
  r->fd = -1;
}

static struct thread* find(int tid) {
  for (int i = 0; i < nthreads; ++i)
    if (threads[i].tid == tid) return &threads[i];
  return NULL;
}

static uint64_t schedstat_ns(int pid, int tid) {
  char path[64], buf[128];
  snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", pid, tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  return strtoull(buf, NULL, 10);
}

static void sample_attr(struct perf_event_attr* a, uint64_t period, int inherit) {
  memset(a, 0, sizeof *a);
  a->size = sizeof *a;
  a->type = PERF_TYPE_SOFTWARE;
  a->config = PERF_COUNT_SW_TASK_CLOCK;
  a->sample_period = period;
  a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID;
  a->exclude_kernel = 1;
  a->exclude_hv = 1;
  a->inherit = (unsigned)inherit;
  a->watermark = 1;
  a->wakeup_watermark = (uint32_t)page;
}

static struct thread* open_thread(int pid, int tid, int enable_on_exec, int gap) {
  if (nthreads == MAX_THREADS) return NULL;
  struct perf_event_attr a;
  sample_attr(&a, draw_period(), 0);
  a.disabled = (unsigned)enable_on_exec;
  a.enable_on_exec = (unsigned)enable_on_exec;
  const int fd = perf_open(&a, tid, -1);
  if (fd < 0) {
    if (getenv("PROBE_DEBUG")) fprintf(stderr, "open %d: %s\n", tid, strerror(errno));
    ++open_failed;
    return NULL;
  }
  struct thread* t = &threads[nthreads++];
  memset(t, 0, sizeof *t);
  t->tid = tid;
  t->pid = pid;
  if (map_ring(&t->r, fd, 1) != 0) {
    close(fd);
    --nthreads;
    ++open_failed;
    return NULL;
  }
  if (gap) t->gap_ns = schedstat_ns(pid, tid);
  ++opened;
  return t;
}

// Reads a ring's records from its tail to its head; calls on_record(record, arg) for each that
// is not a sample (samples are counted, lost records summed).
static uint64_t drain(struct ring* r, void (*on_record)(struct perf_event_header*, void*),
                      void* arg) {
  struct perf_event_mmap_page* m = r->base;
  const uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = m->data_tail, n = 0;
  char* data = (char*)r->base + page;
  char tmp[4096];
  while (tail < head) {
    struct perf_event_header* h = (void*)(data + (tail % r->data_size));
    size_t off = tail % r->data_size;
    if (off + sizeof *h > r->data_size || off + h->size > r->data_size) {
      // A record that wraps: copied out in two parts.
      size_t first = r->data_size - off;
      memcpy(tmp, data + off, first);
      struct perf_event_header hh;
      memcpy(&hh, tmp, first >= sizeof hh ? sizeof hh : first);
      if (first < sizeof hh) memcpy((char*)&hh + first, data, sizeof hh - first);
      const size_t size = hh.size < sizeof tmp ? hh.size : sizeof tmp;
      if (size > first) memcpy(tmp + first, data, size - first);
      h = (void*)tmp;
    }
    if (h->size == 0) break;
    if (h->type == PERF_RECORD_SAMPLE) {
      ++n;
    } else if (h->type == PERF_RECORD_LOST) {
      lost += ((uint64_t*)(h + 1))[1];
    } else if (on_record) {
      on_record(h, arg);
    }
    tail += h->size;
  }
  __atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
  samples += n;
  return n;
}

static void drain_thread(struct thread* t) {
  const uint64_t n = drain(&t->r, NULL, NULL);
  t->since_redraw += n;
  if (t->since_redraw >= BLOCK) {
    uint64_t p = draw_period();
    if (ioctl(t->r.fd, PERF_EVENT_IOC_PERIOD, &p) == 0) ++redraws;
    t->since_redraw = 0;
  }
}

static void close_thread(struct thread* t, int gap) {
  drain(&t->r, NULL, NULL);
  if (gap) {
    uint64_t count = 0;
    if (read(t->r.fd, &count, sizeof count) == (ssize_t)sizeof count) {
      gap_total += t->gap_ns;
      run_total += t->gap_ns + count;
    }
  }
  unmap_ring(&t->r);
  *t = threads[--nthreads];
}

struct task_rec {
  uint32_t pid, ppid, tid, ptid;
  uint64_t time;
};

static int gap_wanted;
static int track_only;  // track mode
static int no_comm;     // -n: the tracker without comm records (no wake-up at an exec)

static void on_task(struct perf_event_header* h, void* arg) {
  (void)arg;
  const struct task_rec* rec = (const void*)(h + 1);
  if (h->type == PERF_RECORD_FORK) {
    ++forks;
    if (!track_only && !find((int)rec->tid))
      open_thread((int)rec->pid, (int)rec->tid, 0, gap_wanted);
  } else if (h->type == PERF_RECORD_EXIT) {
    ++exits;
    struct thread* t = find((int)rec->tid);
    if (t) close_thread(t, gap_wanted);
  }
}

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const int inherit_mode = strcmp(argv[1], "inherit") == 0;
  track_only = strcmp(argv[1], "track") == 0;
  if (!inherit_mode && !track_only && strcmp(argv[1], "open") != 0) return 2;
  int hz = 1000, i = 2;
  for (; i < argc && strcmp(argv[i], "--") != 0; ++i) {
    if (strcmp(argv[i], "-F") == 0 && i + 1 < argc)
      hz = atoi(argv[++i]);
    else if (strcmp(argv[i], "-g") == 0)
      gap_wanted = 1;
    else if (strcmp(argv[i], "-n") == 0)
      no_comm = 1;
    else
      return 2;
  }
  if (i + 1 >= argc || hz <= 0) return 2;
  char** cmd = argv + i + 1;
  page = sysconf(_SC_PAGESIZE);
  period_ns = 1000000000ull / (uint64_t)hz;
  rng ^= (uint64_t)getpid() << 32;
  const int ncpu = (int)sysconf(_SC_NPROCESSORS_CONF);
  if (ncpu <= 0 || ncpu > MAX_CPUS) return 2;

  int go[2];
  if (pipe2(go, O_CLOEXEC) != 0) return 1;
  const pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    char c;
    close(go[1]);
    if (read(go[0], &c, 1) != 1) _exit(127);
    execvp(cmd[0], cmd);
    _exit(127);
  }
  close(go[0]);

  struct ring cpu_rings[MAX_CPUS];
  int ncpu_rings = 0;
  for (int c = 0; c < ncpu; ++c) {
    struct perf_event_attr a;
    if (inherit_mode) {
      sample_attr(&a, period_ns, 1);
      a.task = 1;
      a.comm = 1;
    } else {
      memset(&a, 0, sizeof a);
      a.size = sizeof a;
      a.type = PERF_TYPE_SOFTWARE;
      a.config = PERF_COUNT_SW_DUMMY;
      a.sample_type = PERF_SAMPLE_TID;
      a.sample_id_all = 1;
      a.exclude_kernel = 1;
      a.exclude_hv = 1;
      a.inherit = 1;
      a.task = 1;
      a.comm = (unsigned)!no_comm;
      a.watermark = 1;  // a wake-up per record: wakeup_events counts samples only
      a.wakeup_watermark = 1;
    }
    a.disabled = 1;
    a.enable_on_exec = 1;
    const int fd = perf_open(&a, child, c);
    if (fd < 0) {
      if (errno == ENODEV || errno == EINVAL) continue;  // an offline CPU
      perror("agentless_probe: perf_event_open");
      kill(child, SIGKILL);
      return 1;
    }
    if (map_ring(&cpu_rings[ncpu_rings], fd, inherit_mode ? 8 : 2) != 0) {
      perror("agentless_probe: mmap");
      kill(child, SIGKILL);
      return 1;
    }
    ++ncpu_rings;
  }
  if (!inherit_mode && !track_only && !open_thread(child, child, 1, 0)) {
    perror("agentless_probe: the command's event");
    kill(child, SIGKILL);
    return 1;
  }
  if (write(go[1], "g", 1) != 1) return 1;
  close(go[1]);

  int status = 0;
  struct pollfd pfd[MAX_CPUS];
  for (int c = 0; c < ncpu_rings; ++c) pfd[c] = (struct pollfd){cpu_rings[c].fd, POLLIN, 0};
  for (;;) {
    const int ready = poll(pfd, (nfds_t)ncpu_rings, 50);
    for (int c = 0; c < ncpu_rings; ++c) drain(&cpu_rings[c], inherit_mode ? NULL : on_task, NULL);
    if (ready == 0)
      for (int t = 0; t < nthreads; ++t) drain_thread(&threads[t]);
    if (waitpid(child, &status, WNOHANG) == child) break;
  }
  for (int c = 0; c < ncpu_rings; ++c) drain(&cpu_rings[c], inherit_mode ? NULL : on_task, NULL);
  while (nthreads) close_thread(&threads[nthreads - 1], gap_wanted);
  for (int c = 0; c < ncpu_rings; ++c) unmap_ring(&cpu_rings[c]);
  fprintf(stderr,
          "agentless_probe %s: samples %llu lost %llu forks %llu exits %llu opened %llu "
          "open_failed %llu redraws %llu",
          argv[1], (unsigned long long)samples, (unsigned long long)lost, (unsigned long long)forks,
          (unsigned long long)exits, (unsigned long long)opened, (unsigned long long)open_failed,
          (unsigned long long)redraws);
  if (gap_wanted && run_total)
    fprintf(stderr, " gap %.3f ms of %.3f ms (%.2f%%)", (double)gap_total / 1e6,
            (double)run_total / 1e6, 100.0 * (double)gap_total / (double)run_total);
  fprintf(stderr, "\n");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
