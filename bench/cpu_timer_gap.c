/* The kernel's per-thread CPU-time timers alone, without sprofil: two threads each burn 250 ms
 * of their own CPU time with a POSIX timer on their CPU clock (SIGEV_THREAD_ID, 1 ms), count
 * 1 + si_overrun per signal, and print per thread: the CPU time burned, the weight counted,
 * the signals, the thread's CPU time at its last signal and the longest stretch of its CPU
 * time without a signal. docs/architecture.md ("The cpu clock under load") quotes a run beside
 * two busy loops:
 *   cc -O2 -o /tmp/cpu_timer_gap bench/cpu_timer_gap.c -lpthread
 *   sh -c 'while :; do :; done' & sh -c 'while :; do :; done' &
 *   for i in $(seq 16); do /tmp/cpu_timer_gap; done; kill %1 %2 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __thread long weight, signals;
static __thread double last_ms, longest_gap_ms;

static double thread_cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void on_timer(int sig, siginfo_t* si, void* uc) {
  (void)sig;
  (void)uc;
  const double now = thread_cpu_ms();
  if (now - last_ms > longest_gap_ms) longest_gap_ms = now - last_ms;
  last_ms = now;
  weight += 1 + (si->si_overrun > 0 ? si->si_overrun : 0);
  ++signals;
}

static void* burn(void* arg) {
  (void)arg;
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
  clockid_t cid;
  timer_t timer;
  pthread_getcpuclockid(pthread_self(), &cid);
  if (timer_create(cid, &sev, &timer) != 0) return NULL;
  const struct itimerspec its = {{0, 1000000}, {0, 1000000}};
  timer_settime(timer, 0, &its, NULL);
  const double end = thread_cpu_ms() + 250;
  volatile uint64_t x = 1;
  do {
    for (int i = 0; i < 100000; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
  } while (thread_cpu_ms() < end);
  const double used = thread_cpu_ms();
  timer_delete(timer);
  printf("cpu %.1f ms, weight %ld, signals %ld, last signal at %.1f ms, longest gap %.1f ms\n",
         used, weight, signals, last_ms, longest_gap_ms);
  return NULL;
}

int main(void) {
  struct sigaction sa = {.sa_sigaction = on_timer, .sa_flags = SA_SIGINFO | SA_RESTART};
  sigfillset(&sa.sa_mask);
  sigaction(SIGPROF, &sa, NULL);
  pthread_t a, b;
  pthread_create(&a, NULL, burn, NULL);
  pthread_create(&b, NULL, burn, NULL);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  return 0;
}
