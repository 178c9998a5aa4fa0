/* Two threads that pass a byte back and forth through two pipes N times: 2N context switches,
 * each between two threads of one process (on one CPU when pinned). Prints "cpu_ms T", the
 * process's user + system time. bench/switch_cost.sh runs it natively and under the tools.
 * Usage: pingpong N */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

static int g_to_peer[2], g_to_main[2];
static long g_n;

static void* peer(void* arg) {
  char c;
  for (long i = 0; i < g_n; i++)
    if (read(g_to_peer[0], &c, 1) != 1 || write(g_to_main[1], &c, 1) != 1) break;
  return arg;
}

int main(int argc, char** argv) {
  g_n = argc > 1 ? atol(argv[1]) : 100000;
  if (pipe(g_to_peer) != 0 || pipe(g_to_main) != 0) return 1;
  pthread_t t;
  if (pthread_create(&t, NULL, peer, NULL) != 0) return 1;
  char c = 'x';
  for (long i = 0; i < g_n; i++)
    if (write(g_to_peer[1], &c, 1) != 1 || read(g_to_main[0], &c, 1) != 1) return 1;
  pthread_join(t, NULL);
  struct rusage r;
  getrusage(RUSAGE_SELF, &r);
  printf("cpu_ms %.1f\n", (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
                              (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3);
  return 0;
}
