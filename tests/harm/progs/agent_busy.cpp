// Burns CPU in its own code and in libc (snprintf, qsort, memcpy) for about MS milliseconds
// of CPU time and prints a checksum that does not depend on the time taken. With a directory,
// it first fills that directory's filesystem (a file written until ENOSPC), burns with the
// disk full, then removes the file: samples keep landing in counter pages not touched before.
//   agent_busy MS [DIR]
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

static double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void* a, const void* b) {
  const int x = *static_cast<const int*>(a), y = *static_cast<const int*>(b);
  return (x > y) - (x < y);
}

// One round of work; the result is the same every time.
static unsigned long round_of_work() {
  static int v[4096];
  unsigned long h = 0;
  for (int i = 0; i < 4096; ++i) v[i] = (i * 2654435761u) >> 7;
  qsort(v, 4096, sizeof v[0], cmp);
  char buf[64];
  for (int i = 0; i < 4096; i += 16) {
    const int n = snprintf(buf, sizeof buf, "%d:%x", v[i], v[i] ^ 0x55);
    for (int k = 0; k < n; ++k) h = h * 131 + static_cast<unsigned char>(buf[k]);
  }
  return h;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const double ms = atof(argv[1]);
  std::string fill;
  if (argc > 2) {
    fill = std::string(argv[2]) + "/fill.bin";
    const int fd = open(fill.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return perror("open"), 3;
    static char block[65536];
    memset(block, 'x', sizeof block);
    ssize_t n;
    while ((n = write(fd, block, sizeof block)) > 0) {
    }
    const int e = n < 0 ? errno : 0;
    close(fd);
    printf("filled: %s\n", e == ENOSPC ? "ENOSPC" : strerror(e));
  }
  const double t0 = cpu_ms();
  unsigned long h = 0;
  long rounds = 0;
  // Bounded: at most 100000 rounds whatever the clock says.
  while (rounds < 100000 && (rounds < 20 || cpu_ms() - t0 < ms)) {
    const unsigned long r = round_of_work();
    if (rounds == 0)
      h = r;
    else if (r != h)
      return 4;
    ++rounds;
  }
  if (!fill.empty()) unlink(fill.c_str());
  printf("checksum %lx\n", h);
  return 0;
}
