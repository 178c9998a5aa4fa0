// A shared library linked into agent_prog whose constructor registers a pthread_atfork child
// handler before the preloaded agent registers its own (an object's dependencies are
// initialised first, and child handlers run in the order they were registered).
// agent_early_hold_child() makes it hold the next forked child, before the agent's handler
// hands the child's event over to the record parent, until the forking process has ended and
// 50 ms more: the record parent has then seen that end first, as it may under load.
#include <pthread.h>
#include <unistd.h>

namespace {

pid_t g_hold_from = 0;  // the forking process, or 0: hold no child

void hold_child() {
  const pid_t from = g_hold_from;
  g_hold_from = 0;
  if (from == 0) return;
  for (int i = 0; i < 5000 && getppid() == from; ++i) usleep(1000);
  usleep(50000);
}

__attribute__((constructor)) void register_hold() {
  pthread_atfork(nullptr, nullptr, hold_child);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) void agent_early_hold_child() {
  g_hold_from = getpid();
}
