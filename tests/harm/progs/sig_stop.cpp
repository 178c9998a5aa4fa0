// A program that stops, for the job-control tests (tests/harm/basic_test.cpp):
//   sig_stop self STOP|TSTP      prints "before", stops itself with raise(), prints "after"
//   sig_stop outside PIDFILE     writes its pid into PIDFILE, waits (at most 20 s) until a
//                                SIGCONT came, prints "continued" (exit 3 if none came)
//   sig_stop ignore-tstp PIDFILE ignores SIGTSTP (^Z does nothing), writes its pid into PIDFILE,
//                                prints "done" 300 ms later
//   sig_stop usr1 PIDFILE        counts SIGUSR1 (a reload): writes its pid into PIDFILE, prints
//                                "usr1 N" 1 s later
//   sig_stop ignore-chld CMD...  runs CMD with SIGCHLD ignored (a daemon's way), by exec
//   sig_stop pdeath PIDFILE CMD... runs CMD in a child whose parent-death signal is SIGKILL (a
//                                supervisor's way), and exits once PIDFILE exists (10 s at most)
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <string>

namespace {

volatile sig_atomic_t g_continued = 0;
volatile sig_atomic_t g_usr1 = 0;

void on_usr1(int) {
  g_usr1 = g_usr1 + 1;
}

void on_continue(int) {
  g_continued = 1;
}

bool write_pid(const char* path) {
  const std::string tmp = std::string(path) + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) return false;
  fprintf(f, "%d\n", static_cast<int>(getpid()));
  fclose(f);
  return rename(tmp.c_str(), path) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "self") == 0) {
    printf("before\n");
    fflush(stdout);
    raise(strcmp(argv[2], "STOP") == 0 ? SIGSTOP : SIGTSTP);
    printf("after\n");
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "ignore-tstp") == 0) {
    signal(SIGTSTP, SIG_IGN);
    if (!write_pid(argv[2])) return 2;
    const timespec wait{0, 300 * 1000 * 1000};
    nanosleep(&wait, nullptr);
    printf("done\n");
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "usr1") == 0) {
    signal(SIGUSR1, on_usr1);
    if (!write_pid(argv[2])) return 2;
    for (int i = 0; i < 100; ++i) {
      const timespec ten_ms{0, 10 * 1000 * 1000};
      nanosleep(&ten_ms, nullptr);
    }
    printf("usr1 %d\n", static_cast<int>(g_usr1));
    return 0;
  }
  if (argc == 3 && strcmp(argv[1], "outside") == 0) {
    signal(SIGCONT, on_continue);
    if (!write_pid(argv[2])) return 2;
    for (int i = 0; i < 2000 && !g_continued; ++i) {
      const timespec ten_ms{0, 10 * 1000 * 1000};
      nanosleep(&ten_ms, nullptr);
    }
    if (!g_continued) return 3;
    printf("continued\n");
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "pdeath") == 0) {
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child == 0) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(1);
      execvp(argv[3], argv + 3);
      _exit(127);
    }
    for (int i = 0; i < 1000 && access(argv[2], F_OK) != 0; ++i) {
      const timespec ten_ms{0, 10 * 1000 * 1000};
      nanosleep(&ten_ms, nullptr);
    }
    return access(argv[2], F_OK) == 0 ? 0 : 3;
  }
  if (argc >= 3 && strcmp(argv[1], "ignore-chld") == 0) {
    signal(SIGCHLD, SIG_IGN);
    execvp(argv[2], argv + 2);
    perror("exec");
    return 127;
  }
  fprintf(stderr,
          "usage: sig_stop self STOP|TSTP | outside PIDFILE | ignore-tstp PIDFILE | ignore-chld "
          "CMD...\n");
  return 2;
}
