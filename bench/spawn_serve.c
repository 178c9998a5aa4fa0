// A short-process server for bench/spawn_interleaved.py: for each byte read from fd IN it
// starts CMD (posix_spawn, stdout to /dev/null), waits for it (wait4) and writes the child's
// user + system time in microseconds, a line, to fd OUT; at IN's end it exits 0. Run under a
// tool (sprofil record, perf record), whose children and events it and CMD inherit, beside
// other such servers under other tools: the coordinator asks each in turn, one process at a
// time, so that a change of the machine's speed falls on every tool alike.
// Usage: spawn_serve IN OUT CMD [ARGS...]
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn_child.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 4) return 2;
  const int in = atoi(argv[1]), out = atoi(argv[2]);
  posix_spawn_file_actions_t fa;
  spawn_to_null(&fa);
  posix_spawn_file_actions_addclose(&fa, in);
  posix_spawn_file_actions_addclose(&fa, out);
  char c;
  while (read(in, &c, 1) == 1) {
    pid_t pid;
    if (posix_spawnp(&pid, argv[3], &fa, NULL, argv + 3, environ) != 0) return 1;
    struct rusage ru;
    int status;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return 1;
    char line[32];
    const int len = snprintf(line, sizeof line, "%ld\n", child_cpu_us(&ru));
    if (write(out, line, (size_t)len) != len) return 1;
  }
  return 0;
}
