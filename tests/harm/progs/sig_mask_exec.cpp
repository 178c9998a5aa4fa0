// Blocks SIGPROF and SIGUSR1, then starts `grep SigBlk /proc/self/status` three ways: with
// posix_spawnp, with fork and execvp, and with its own execvp. Each prints the mask it
// inherited: the same natively and under every clock.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

int main() {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGPROF);
  sigaddset(&s, SIGUSR1);
  sigprocmask(SIG_BLOCK, &s, nullptr);
  char grep[] = "grep", pattern[] = "SigBlk", file[] = "/proc/self/status";
  char* argv[] = {grep, pattern, file, nullptr};
  pid_t pid;
  if (posix_spawnp(&pid, "grep", nullptr, nullptr, argv, environ) != 0) return 3;
  waitpid(pid, nullptr, 0);
  pid = fork();
  if (pid == 0) {
    execvp("grep", argv);
    _exit(127);
  }
  waitpid(pid, nullptr, 0);
  execvp("grep", argv);
  return 4;
}
