// A plugin that agent_fds and agent_dlchurn dlopen: some code of its own to be sampled in.
extern "C" __attribute__((visibility("default"))) long agent_plugin_work(long n) {
  volatile long acc = 0;
  for (long i = 0; i < n; ++i) acc = acc + (i ^ (acc >> 3));
  return acc;
}
