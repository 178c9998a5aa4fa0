// Forks children that wait (pause) until it has made MAX of them or a fork fails, then kills
// and reaps them and prints how many it made: the process limit (RLIMIT_NPROC, a cgroup's
// pids.max) seen from a program. Usage: agent_forks MAX
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

int main(int argc, char** argv) {
  const int max = argc > 1 ? atoi(argv[1]) : 0;
  if (max <= 0) {
    fprintf(stderr, "usage: agent_forks MAX\n");
    return 2;
  }
  std::vector<pid_t> children;
  while (static_cast<int>(children.size()) < max) {
    const pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      for (;;) pause();
    }
    children.push_back(pid);
  }
  for (const pid_t pid : children) kill(pid, SIGKILL);
  for (const pid_t pid : children) waitpid(pid, nullptr, 0);
  printf("%zu\n", children.size());
  return 0;
}
