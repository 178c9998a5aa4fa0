// sleep_workload: 300 rounds of 2 ms of CPU then a 1 ms wait (nanosleep, poll or usleep in
// turn); prints how many waits ended with EINTR ("eintr N"). Natively: 0.
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace {
double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

int main() {
  int eintr = 0;
  volatile double x = 1;
  for (int i = 0; i < 300; ++i) {
    const double t0 = thread_cpu();
    while (thread_cpu() - t0 < 0.002) x = x * 1.0000001;
    const timespec ms{0, 1000000};
    int rc;
    if (i % 3 == 0)
      rc = nanosleep(&ms, nullptr);
    else if (i % 3 == 1)
      rc = poll(nullptr, 0, 1);
    else
      rc = usleep(1000);
    if (rc < 0 && errno == EINTR) ++eintr;
  }
  printf("eintr %d\n", eintr);
  return 0;
}
