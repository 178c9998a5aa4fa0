// A program that closes every descriptor it did not open (close_range(3, ~0U, 0)) and then
// opens its own files, which get the numbers an agent may have held: a buffered stdio log
// (fd 3) written throughout and flushed at exit, a dlopen'd plugin (the profile grows), and a
// forked child that writes to fd 3 and exits with the status of that write.
//   agent_fds PLUGIN
// With AGENT_FDS_REPLACE=PATH in the environment it also replaces PATH (the profile, when the
// test says so) with a file of its own before the first dlopen.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifndef SYS_close_range
#include <sys/syscall.h>
#endif

static double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) return perror("close_range"), 3;
  FILE* log = fopen("log.txt", "w");
  if (!log) return perror("log.txt"), 3;
  static char buf[1 << 16];
  setvbuf(log, buf, _IOFBF, sizeof buf);  // nothing reaches the file before exit
  fprintf(log, "log fd %d\n", fileno(log));
  const int data = open("data.bin", O_RDWR | O_CREAT | O_TRUNC, 0644);
  fprintf(log, "data fd %d\n", data);
  for (int i = 0; i < 100; ++i) fprintf(log, "line %d\n", i);

  if (const char* victim = getenv("AGENT_FDS_REPLACE")) {
    unlink(victim);
    FILE* f = fopen(victim, "w");
    if (!f) return 6;
    fputs("mine\n", f);
    fclose(f);
  }
  void* h = dlopen(argv[1], RTLD_NOW);
  if (!h) return fprintf(stderr, "%s\n", dlerror()), 4;
  auto work = reinterpret_cast<long (*)(long)>(dlsym(h, "agent_plugin_work"));
  const double t0 = cpu_ms();
  long r = 0;
  for (int i = 0; i < 2000 && cpu_ms() - t0 < 150; ++i) r = work(200000);
  fprintf(log, "plugin result %ld\n", r);
  dlclose(h);
  if (write(data, "0123456789", 10) != 10) return 5;

  fflush(log);  // the child inherits no pending output
  const pid_t pid = fork();
  if (pid == 0) {
    static const char msg[] = "child wrote to fd 3\n";
    const ssize_t n = write(3, msg, sizeof msg - 1);
    _exit(n == static_cast<ssize_t>(sizeof msg - 1) ? 7 : 8);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  fprintf(log, "child status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
  // Re-dlopen after the child: the agent grows its file again.
  h = dlopen(argv[1], RTLD_NOW);
  if (h) dlclose(h);
  for (int i = 0; i < 100; ++i) fprintf(log, "tail %d\n", i);
  printf("done\n");
  return 0;  // exit flushes `log` after the atexit handlers ran
}
