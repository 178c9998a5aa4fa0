// A shared library linked into agent_prog whose constructor starts threads before the agent
// (whose constructor runs after its dependencies') exists, through libc's own pthread_create
// (not the runtime's interposed one): the agent must find them in /proc/self/task. The
// threads wait for agent_early_go(), then each burns the same CPU time in its own function.
#include <dlfcn.h>
#include <pthread.h>

#include <cstdlib>

#include "burn.hpp"

SPROFIL_BURN(burn_early_0)
SPROFIL_BURN(burn_early_1)
SPROFIL_BURN(burn_early_2)
SPROFIL_BURN(burn_early_3)

namespace {

using create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
double (*const g_fns[])(double) = {burn_early_0, burn_early_1, burn_early_2, burn_early_3};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
double g_seconds = -1;  // < 0: not yet
pthread_t g_threads[4];
double g_used[4];
int g_n = 0;
bool g_before_agent = false;

void* early_thread(void* p) {
  const auto k = reinterpret_cast<long>(p);
  pthread_mutex_lock(&g_mu);
  while (g_seconds < 0) pthread_cond_wait(&g_cv, &g_mu);
  const double s = g_seconds;
  pthread_mutex_unlock(&g_mu);
  g_used[k] = g_fns[k](s);
  return nullptr;
}

__attribute__((constructor)) void start_early_threads() {
  const char* n = getenv("AGENT_EARLY_THREADS");
  if (!n) return;
  g_before_agent = getenv("SPROFIL_OUTPUT") && !getenv("SPROFIL_STARTED");
  auto real_create = reinterpret_cast<create_fn>(dlsym(RTLD_NEXT, "pthread_create"));
  for (long k = 0; k < atoi(n) && k < 4; ++k)
    if (real_create(&g_threads[g_n], nullptr, early_thread, reinterpret_cast<void*>(k)) == 0) ++g_n;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int agent_early_count(bool* before_agent) {
  *before_agent = g_before_agent;
  return g_n;
}

extern "C" __attribute__((visibility("default"))) void agent_early_go(double seconds) {
  pthread_mutex_lock(&g_mu);
  g_seconds = seconds;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);
}

extern "C" __attribute__((visibility("default"))) double agent_early_join(int k) {
  pthread_join(g_threads[k], nullptr);
  return g_used[k];
}
