/* scale-objects: a program with many shared objects. Linked against K copies of one tiny
 * object (DT_NEEDED, the loader maps them all before main); with --dlopen DIR M it also
 * dlopens M more copies from DIR at run time and calls into each; with --iters N it then
 * burns N iterations in its own code (the samples' lookups run with every object present)
 * and prints that phase's process CPU time on stderr ("work_cpu_s S").
 * Usage: scale-objects [--dlopen DIR M] [--iters N] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static volatile double g_sink;

__attribute__((noinline)) static double scale_main_work(long iters) {
  double x = 1.0;
  for (long i = 0; i < iters; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

int main(int argc, char** argv) {
  long iters = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--dlopen") == 0 && i + 2 < argc) {
      const char* dir = argv[++i];
      const int m = atoi(argv[++i]);
      char path[4096];
      for (int k = 0; k < m; ++k) {
        snprintf(path, sizeof path, "%s/libdl%05d.so", dir, k);
        void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
          fprintf(stderr, "%s\n", dlerror());
          return 1;
        }
        double (*f)(double) = (double (*)(double))dlsym(h, "scale_obj_fn");
        if (!f) return 1;
        g_sink = f((double)k);
      }
    } else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
      iters = atol(argv[++i]);
    }
  }
  struct rusage a, b;
  getrusage(RUSAGE_SELF, &a);
  g_sink = scale_main_work(iters);
  getrusage(RUSAGE_SELF, &b);
  const double cpu =
      (b.ru_utime.tv_sec - a.ru_utime.tv_sec) + (b.ru_stime.tv_sec - a.ru_stime.tv_sec) +
      ((b.ru_utime.tv_usec - a.ru_utime.tv_usec) + (b.ru_stime.tv_usec - a.ru_stime.tv_usec)) / 1e6;
  if (iters > 0) fprintf(stderr, "work_cpu_s %.6f\n", cpu);
  return 0;
}
