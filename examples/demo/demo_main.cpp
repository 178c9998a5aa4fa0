// sprofil-demo: a program whose split of CPU time is known by construction.
//
// The main thread takes turns, in 20 ms slices, burning CPU in the executable
// (demo_main_compute), in a linked shared library (demo_lib_compute) and in a dlopen'd plugin
// (demo_plugin_compute), while a second thread burns in demo_worker_compute. Each function
// burns thread CPU time it measures itself; with --truth FILE the program writes what each
// function really used ("name seconds" lines, plus "process_cpu seconds" for the whole
// process), which the tests compare with the profile.
//
// Usage: sprofil-demo [--scale S] [--truth FILE] [--plugin PATH]
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "burn.hpp"

SPROFIL_BURN(demo_main_compute)
SPROFIL_BURN(demo_worker_compute)
extern "C" double demo_lib_compute(double seconds);

namespace {

struct Share {
  const char* name;
  double fraction;  // of the main thread's work
  double used = 0;  // measured
};

double g_worker_seconds = 0, g_worker_used = 0;

void* worker(void*) {
  const double t0 = burn_thread_cpu();
  double left = g_worker_seconds;
  while (left > 0) {
    const double slice = left < 0.02 ? left : 0.02;
    demo_worker_compute(slice);
    left -= slice;
  }
  g_worker_used = burn_thread_cpu() - t0;
  return nullptr;
}

std::string default_plugin() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "sprofil_demo_plugin.so";
  self[n] = '\0';
  std::string dir(self);
  dir.erase(dir.rfind('/'));
  return dir + "/../lib/sprofil_demo_plugin.so";
}

}  // namespace

int main(int argc, char** argv) {
  double scale = 1.0;
  const char* truth = nullptr;
  std::string plugin_path = default_plugin();
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--scale") && i + 1 < argc)
      scale = atof(argv[++i]);
    else if (!strcmp(argv[i], "--truth") && i + 1 < argc)
      truth = argv[++i];
    else if (!strcmp(argv[i], "--plugin") && i + 1 < argc)
      plugin_path = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--scale S] [--truth FILE] [--plugin PATH]\n", argv[0]);
      return 2;
    }
  }
  void* plugin = dlopen(plugin_path.c_str(), RTLD_NOW);
  if (!plugin) {
    fprintf(stderr, "sprofil-demo: %s\n", dlerror());
    return 1;
  }
  auto plugin_compute = reinterpret_cast<double (*)(double)>(dlsym(plugin, "demo_plugin_compute"));

  // Main thread: 1.6 s x scale, split 50/30/20; worker: 0.4 s x scale.
  Share shares[] = {
      {"demo_main_compute", 0.5}, {"demo_lib_compute", 0.3}, {"demo_plugin_compute", 0.2}};
  double (*fns[])(double) = {demo_main_compute, demo_lib_compute, plugin_compute};
  const double main_seconds = 1.6 * scale;
  g_worker_seconds = 0.4 * scale;
  pthread_t tid;
  pthread_create(&tid, nullptr, worker, nullptr);

  const double slice = 0.02;
  double done[3] = {0, 0, 0};
  for (bool more = true; more;) {
    more = false;
    for (int k = 0; k < 3; ++k) {
      const double want = shares[k].fraction * main_seconds;
      if (done[k] >= want) continue;
      const double s = want - done[k] < slice ? want - done[k] : slice;
      const double t0 = burn_thread_cpu();
      fns[k](s);
      shares[k].used += burn_thread_cpu() - t0;
      done[k] += s;
      more = true;
    }
  }
  pthread_join(tid, nullptr);
  dlclose(plugin);

  const double total = burn_process_cpu();
  printf("sprofil-demo: burned %.2f s of CPU: main %.2f, lib %.2f, plugin %.2f, worker %.2f\n",
         total, shares[0].used, shares[1].used, shares[2].used, g_worker_used);
  const BurnTruth lines[] = {{shares[0].name, shares[0].used},
                             {shares[1].name, shares[1].used},
                             {shares[2].name, shares[2].used},
                             {"demo_worker_compute", g_worker_used},
                             {"process_cpu", total}};
  return truth && !burn_write_truth(truth, lines) ? 1 : 0;
}
