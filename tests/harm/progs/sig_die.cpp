// Ends the way its argument says, after some work, a line on stdout and a file: `exit N` (a
// normal exit, also one of 128 + a signal's number), or `SIGNAME` (killed by that signal:
// SEGV by a real fault, ABRT by abort(), the others sent to itself), or `thread-SEGV` (a
// worker thread faults while another burns CPU). No core is dumped (RLIMIT_CORE 0), so the
// scratch directory holds only what the program wrote.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstring>

#include "sig_common.hpp"

namespace {

[[noreturn]] void die(int sig) {
  if (sig == SIGSEGV) {
    volatile int* nowhere = nullptr;
    *nowhere = 1;
  }
  if (sig == SIGABRT) abort();
  kill(getpid(), sig);
  pause();  // SIGKILL, SIGTERM, ... end the process here
  _exit(99);
}

void* faulting_worker(void*) {
  sig_burn(100000000);
  die(SIGSEGV);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  rlimit core{0, 0};
  setrlimit(RLIMIT_CORE, &core);
  FILE* f = fopen("before.txt", "w");
  if (!f) return 3;
  fprintf(f, "%s\n", argv[1]);
  fclose(f);
  printf("ending by %s\n", argv[1]);
  fflush(stdout);
  sig_burn(50000000);
  if (strcmp(argv[1], "exit") == 0) return argc > 2 ? atoi(argv[2]) : 0;
  const bool in_thread = strncmp(argv[1], "thread-", 7) == 0;
  const char* name = in_thread ? argv[1] + 7 : argv[1];
  int sig = 0;
  for (int s = 1; s < NSIG && sig == 0; ++s)
    if (const char* abbrev = sigabbrev_np(s); abbrev && strcmp(abbrev, name) == 0) sig = s;
  if (sig == 0) return 2;
  set_signal(sig, SIG_DFL, SIG_UNBLOCK);
  if (in_thread) {
    pthread_t t;
    pthread_create(&t, nullptr, faulting_worker, nullptr);
    for (;;) sig_burn(10000000);
  }
  die(sig);
}
