// Linked with libsprofil (not preloaded): what a setuid-root program built with the library
// looks like. Prints its ids, burns a little CPU and exits 0. Run as nobody with the setuid bit,
// the library must not obey the caller's SPROFIL_* variables (AT_SECURE).
#include <time.h>
#include <unistd.h>

#include <cstdio>

int main() {
  timespec t0, t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  volatile unsigned long acc = 0;
  long i = 0;
  do {
    for (int k = 0; k < 100000; ++k) acc = acc + (k ^ (acc >> 5));
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  } while (++i < 10000 &&
           (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 50000000L);
  printf("ruid %d euid %d\n", static_cast<int>(getuid()), static_cast<int>(geteuid()));
  return 0;
}
