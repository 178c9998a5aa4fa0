// A program that sandboxes itself with seccomp, as servers and tools built on libseccomp do:
// it works, installs a filter that kills the process (SECCOMP_RET_KILL_PROCESS) on system
// calls it never makes itself, and works on: a thread, a forked child that exits, a program
// started with posix_spawn and a forked child that execs, both with an environment copied
// before the filter, a dlopen, more work in the main thread. The calls it denies are the ones
// sprofil's agent would make (the drain exchange, perf events, signal handlers' weights, records of
// a dlopen'd object), so natively it runs and prints its lines; anything sprofil does behind its
// back kills it with SIGSYS. Its output must be a pipe or a file (on a terminal printf's ioctl
// would be denied). Usage: agent_sandbox prctl|syscall PLUGIN
//   prctl: the filter through prctl(PR_SET_SECCOMP); syscall: through syscall(SYS_seccomp), as
//   libseccomp's seccomp_load does. PLUGIN: a module to dlopen after the filter.
#include <dlfcn.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <spawn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

extern char** environ;

namespace {

// The same work before and after the filter: the profile compares them.
__attribute__((noinline)) double burn_before(long n) {
  volatile double x = 0;
  for (long i = 0; i < n; ++i) x = x + static_cast<double>(i) * 0.5;
  return x;
}
__attribute__((noinline)) double burn_after(long n) {  // not folded into burn_before
  volatile double x = 1;
  for (long i = 0; i < n; ++i) x = x + static_cast<double>(i) * 0.25;
  return x;
}

constexpr long kWork = 150000000;

void* thread_work(void*) {
  burn_after(kWork / 10);
  return nullptr;
}

bool install(bool via_syscall) {
  static const int denied[] = {
      SYS_socket,
      SYS_connect,
      SYS_sendmsg,
      SYS_recvmsg,
      SYS_perf_event_open,
      SYS_getrusage,
      SYS_pwrite64,
      SYS_fallocate,
      SYS_ftruncate,
      SYS_sched_setaffinity,
      SYS_getppid,
      SYS_timer_create,
      SYS_timer_settime,
      SYS_timer_delete,
      SYS_tgkill,
      SYS_ioctl,
      SYS_clock_gettime,
      SYS_setitimer,
      SYS_fcntl,
      SYS_dup3,
      SYS_sched_getaffinity,
      SYS_bind,
      SYS_listen,
      SYS_accept4,
      SYS_unlinkat,
#ifdef SYS_unlink
      SYS_unlink,
#endif
  };
  constexpr size_t n = sizeof denied / sizeof denied[0];
  std::vector<sock_filter> f;
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
#if defined(__x86_64__)
  constexpr unsigned kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
#endif
  f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));  // another arch: not checked
  f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
  for (size_t i = 0; i < n; ++i) {
    // Equal: jump to the kill at the end; else on to the next comparison.
    f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<unsigned>(denied[i]),
                         static_cast<unsigned char>(n - i), 0));
  }
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS));
  sock_fprog prog{static_cast<unsigned short>(f.size()), f.data()};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  if (via_syscall) return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

int wait_status(pid_t pid) {
  int st = 0;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "prctl") != 0 && strcmp(argv[1], "syscall") != 0)) {
    fprintf(stderr, "usage: agent_sandbox prctl|syscall PLUGIN\n");
    return 2;
  }
  burn_before(kWork);
  // An environment copied before the filter, as a program that keeps one for its children.
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(strdup(*e));
  env.push_back(nullptr);
  if (!install(strcmp(argv[1], "syscall") == 0)) {
    perror("seccomp");
    return 3;
  }
  printf("filter installed\n");
  pthread_t t;
  if (pthread_create(&t, nullptr, thread_work, nullptr) != 0) return 4;
  pthread_join(t, nullptr);
  printf("thread joined\n");
  fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    burn_after(kWork / 10);
    exit(0);
  }
  printf("forked child: %d\n", wait_status(child));
  char true_path[] = "/bin/true";
  char* true_argv[] = {true_path, nullptr};
  pid_t spawned = 0;
  if (posix_spawn(&spawned, true_path, nullptr, nullptr, true_argv, env.data()) != 0) return 5;
  printf("spawned with the copied environment: %d\n", wait_status(spawned));
  fflush(stdout);
  const pid_t execed = fork();
  if (execed == 0) {
    execve(true_path, true_argv, env.data());
    _exit(127);
  }
  printf("exec with the copied environment: %d\n", wait_status(execed));
  void* plugin = dlopen(argv[2], RTLD_NOW);
  printf("dlopen: %s\n", plugin ? "ok" : "failed");
  if (plugin) dlclose(plugin);
  burn_after(kWork);
  printf("done\n");
  return 0;
}
