// sleep_workload: 300 rounds of 2 ms of CPU then a 1 ms wait (nanosleep, poll or usleep in
// turn); prints how many waits ended with EINTR ("eintr N"). Natively: 0.
// sleep_workload park: a worker waits 0.3 s on a condition variable (a futex wait, which the
// sampler clock parks as idle), then burns 0.3 s of its CPU in park_burn; prints
// "park_burn SECONDS" (its thread CPU time in the burn).
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace {
double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}
}  // namespace

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
bool g_go = false;
double g_burnt = 0;

extern "C" __attribute__((noinline)) double park_burn(double seconds) {
  volatile double x = 1;
  const double t0 = thread_cpu();
  do {  // the clock read every 100,000 steps: the samples are in this function, not in it
    for (int i = 0; i < 100000; ++i) x = x * 1.0000001;
  } while (thread_cpu() - t0 < seconds);
  return thread_cpu() - t0;
}

void* parked_worker(void*) {
  pthread_mutex_lock(&g_mu);
  while (!g_go) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  g_burnt = park_burn(0.3);
  return nullptr;
}

int park() {
  pthread_t t;
  if (pthread_create(&t, nullptr, parked_worker, nullptr) != 0) return 1;
  const timespec wait{0, 300000000};
  nanosleep(&wait, nullptr);
  pthread_mutex_lock(&g_mu);
  g_go = true;
  pthread_cond_signal(&g_cv);
  pthread_mutex_unlock(&g_mu);
  pthread_join(t, nullptr);
  printf("park_burn %.6f\n", g_burnt);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "park") == 0) return park();
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
