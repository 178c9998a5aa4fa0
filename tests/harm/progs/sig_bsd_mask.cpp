// Changes its mask the BSD and System V ways (sigblock, siggetmask, sigsetmask, sighold,
// sigrelse), which glibc makes with its internal sigprocmask, not through the PLT, and prints
// what it reads; then starts `grep SigBlk /proc/self/status` as Debian's /bin/sh (dash) does:
// every signal blocked around a vfork, the child clearing its mask with sigsetmask before its
// exec; last it execs grep itself with SIGPROF held. The same output natively and under every
// clock.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // the calls under test

int main() {
  // siggetmask by its symbol (as the program's PLT would bind it: a preloaded interposer
  // first), which spares the link glibc's warning that it is obsolete.
  const auto siggetmask = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "siggetmask"));
  if (siggetmask == nullptr) return 5;
  std::printf("%x\n", sigblock((1 << (SIGPROF - 1)) | (1 << (SIGUSR1 - 1))));
  std::printf("%x\n", siggetmask());
  std::printf("%x\n", sigsetmask(0));
  sighold(SIGPROF);
  std::printf("%x\n", siggetmask());
  sigrelse(SIGPROF);
  std::printf("%x\n", siggetmask());
  std::fflush(stdout);
  char grep[] = "grep", pattern[] = "SigBlk", file[] = "/proc/self/status";
  char* argv[] = {grep, pattern, file, nullptr};
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  const pid_t pid = vfork();
  if (pid == 0) {
    sigsetmask(0);
    execvp("grep", argv);
    _exit(127);
  }
  sigsetmask(0);
  if (pid < 0 || waitpid(pid, nullptr, 0) != pid) return 3;
  sighold(SIGPROF);
  execvp("grep", argv);
  return 4;
}
