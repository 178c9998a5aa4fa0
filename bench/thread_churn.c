/* Starts N threads in turn, each a short loop (20,000 iterations), joined before the next:
 * what a program that runs many short tasks on new threads does. bench/thread_starts.sh. */
#include <pthread.h>
#include <stdlib.h>

static void* task(void* arg) {
  (void)arg;
  volatile long x = 0;
  for (long i = 0; i < 20000; i++) x += i;
  return NULL;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 100;
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, task, NULL) != 0) return 1;
    pthread_join(t, NULL);
  }
  return 0;
}
