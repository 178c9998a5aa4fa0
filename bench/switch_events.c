/* Opens N inherited task clocks on this process, then execs a command: the first samples every
 * millisecond (its samples dropped: no ring), the others only count, as record's tracking event
 * does. bench/switch_events.sh runs bench/pingpong.c under it to measure whether a switch
 * between two threads of one process costs more with more events in their contexts.
 * Usage: switch_events N COMMAND [ARG...] */
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: switch_events N COMMAND [ARG...]\n");
    return 2;
  }
  const int n = atoi(argv[1]);
  for (int i = 0; i < n; i++) {
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.type = PERF_TYPE_SOFTWARE;
    a.size = sizeof a;
    a.config = PERF_COUNT_SW_TASK_CLOCK;
    a.sample_period = i == 0 ? 1000000 : 0;
    a.inherit = 1;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    /* Not close-on-exec: the events live while the command holds their fds. */
    if (syscall(SYS_perf_event_open, &a, 0, -1, -1, 0) < 0) {
      perror("perf_event_open");
      return 1;
    }
  }
  execvp(argv[2], argv + 2);
  perror(argv[2]);
  return 127;
}
