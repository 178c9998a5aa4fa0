// Resets every signal to SIG_DFL (sigaction and signal()), burns CPU, then forks children
// that reset every signal again, burn, and exec a program that exits 7 (sh -c 'exit 7' by
// execl, by execlp through PATH, and by execle with the 7 in the environment it passes).
// Nothing may kill it or its children: prints the children's statuses.
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sig_common.hpp"

static void reset_all(bool with_signal) {
  for (int s = 1; s < NSIG; ++s) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    if (with_signal) {
      signal(s, SIG_DFL);
    } else {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = SIG_DFL;
      sigaction(s, &sa, nullptr);
    }
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

int main() {
  reset_all(true);
  sig_burn(200000000);
  reset_all(false);
  sig_burn(100000000);
  for (int i = 0; i < 3; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      reset_all(i % 2 == 0);
      sig_burn(30000000);
      char* const env[] = {const_cast<char*>("CODE=7"), nullptr};
      if (i == 0) execl("/bin/sh", "sh", "-c", "exit 7", static_cast<char*>(nullptr));
      if (i == 1) execlp("sh", "sh", "-c", "exit 7", static_cast<char*>(nullptr));
      if (i == 2) execle("/bin/sh", "sh", "-c", "exit $CODE", static_cast<char*>(nullptr), env);
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("child %d: %s %d\n", i, WIFEXITED(st) ? "exit" : "signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  }
  struct sigaction cur;
  sigaction(SIGPROF, nullptr, &cur);
  printf("SIGPROF reads %s\n", cur.sa_handler == SIG_DFL ? "SIG_DFL" : "other");
  return 0;
}
