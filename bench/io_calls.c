// io_calls: the cost of the calls interpose_sockets.cpp interposes, per call: N reads of one
// byte from /dev/zero, N writes of one byte to /dev/null, and N recv of one byte from a socket
// with SO_RCVTIMEO that always has data (so the call never waits: what is measured is the
// interposer's work, under the sampler clock the mask it sets around a timed socket's call).
// Prints "read NS write NS recv_timed NS" (nanoseconds a call, wall time over N calls).
// Usage: io_calls [N]   (default 1,000,000)
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char** argv) {
  const long n = argc > 1 ? atol(argv[1]) : 1000000;
  const int zero = open("/dev/zero", O_RDONLY), null = open("/dev/null", O_WRONLY);
  int sv[2];
  if (zero < 0 || null < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
  const struct timeval tv = {1, 0};
  setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char c = 0;
  double t = now();
  for (long i = 0; i < n; ++i)
    if (read(zero, &c, 1) != 1) return 3;
  const double r = (now() - t) / (double)n;
  t = now();
  for (long i = 0; i < n; ++i)
    if (write(null, &c, 1) != 1) return 3;
  const double w = (now() - t) / (double)n;
  double s = 0;
  for (long i = 0; i < n; ++i) {
    if (write(sv[1], &c, 1) != 1) return 3;  // (not timed: the data the recv finds)
    const double t0 = now();
    if (recv(sv[0], &c, 1, 0) != 1) return 3;
    s += now() - t0;
  }
  printf("read %.1f write %.1f recv_timed %.1f\n", r, w, s / (double)n);
  return 0;
}
