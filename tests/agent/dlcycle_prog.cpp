// Many dlopen/dlclose cycles, then CPU burnt in each plugin (dlcycle_plugin.cpp) with a known
// split (dlcycle_test.cpp compares the profile with it):
//   dlcycle_prog DIR TRUTH CYCLES
// 1. CYCLES rounds of: open a, open b, close a, close b (a churn of loads and unloads);
//    meanwhile a second thread opens and closes c as often (scans that race with these);
// 2. burns in a, closes it, opens it again (the loader usually maps it at the same address),
//    burns in a again, closes it: two loads of a, one record;
// 3. opens b and burns in it (b stays loaded);
// 4. opens "outer", whose constructor opens "inner" and burns in it before the outer dlopen
//    returns, then burns in inner again from main;
// 5. burns in its own code, and churns a once more (its counts must not change);
// 6. opens "user", which needs "dep" (DT_NEEDED: one dlopen, two new objects, the first scan
//    after the churn's unloads), and burns in dep through user.
// TRUTH gets "name seconds" lines: each function's thread CPU time, process_cpu, and
// a_same_address (1 if a's second load was at the first one's address).
#include <dlfcn.h>
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "burn.hpp"

SPROFIL_BURN(dlcycle_main)

namespace {

std::string g_dir;
int g_cycles = 0;

void* open_or_die(const std::string& name, int flags = RTLD_NOW) {
  void* h = dlopen((g_dir + "/" + name).c_str(), flags);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", name.c_str(), dlerror());
    exit(2);
  }
  return h;
}

double burn_in(void* h, const char* fn, double seconds) {
  auto* f = reinterpret_cast<double (*)(double)>(dlsym(h, fn));
  if (!f) {
    fprintf(stderr, "dlsym %s: %s\n", fn, dlerror());
    exit(2);
  }
  return f(seconds);
}

void* churn_c(void*) {
  for (int i = 0; i < g_cycles; ++i) {
    void* h = open_or_die("libdlcycle_c.so");
    burn_in(h, "dlcycle_c", 0);
    dlclose(h);
  }
  return nullptr;
}

uintptr_t base_of(void* h, const char* fn) {
  Dl_info info{};
  return dladdr(dlsym(h, fn), &info) ? reinterpret_cast<uintptr_t>(info.dli_fbase) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: dlcycle_prog DIR TRUTH CYCLES\n");
    return 2;
  }
  g_dir = argv[1];
  g_cycles = atoi(argv[3]);
  pthread_t t;
  if (pthread_create(&t, nullptr, churn_c, nullptr) != 0) return 2;
  double a_s = 0, b_s = 0, inner_s = 0, main_s = 0;
  for (int i = 0; i < g_cycles; ++i) {
    void* a = open_or_die("libdlcycle_a.so");
    void* b = open_or_die("libdlcycle_b.so");
    a_s += burn_in(a, "dlcycle_a", 0);  // one round of its loop (~0.3 ms)
    dlclose(a);
    b_s += burn_in(b, "dlcycle_b", 0);
    dlclose(b);
  }
  pthread_join(t, nullptr);

  void* a = open_or_die("libdlcycle_a.so");
  const uintptr_t first = base_of(a, "dlcycle_a");
  a_s += burn_in(a, "dlcycle_a", 0.3);
  dlclose(a);
  a = open_or_die("libdlcycle_a.so");
  const uintptr_t second = base_of(a, "dlcycle_a");
  a_s += burn_in(a, "dlcycle_a", 0.3);
  dlclose(a);

  void* b = open_or_die("libdlcycle_b.so");
  b_s += burn_in(b, "dlcycle_b", 0.3);

  void* outer = open_or_die("libdlcycle_outer.so");
  auto* ctor = static_cast<double*>(dlsym(outer, "dlcycle_ctor_seconds"));
  if (!ctor || *ctor < 0) {
    fprintf(stderr, "the outer constructor did not burn in inner\n");
    return 2;
  }
  inner_s += *ctor;
  void* inner = open_or_die("libdlcycle_inner.so", RTLD_NOW | RTLD_NOLOAD);
  inner_s += burn_in(inner, "dlcycle_inner", 0.2);
  dlclose(inner);  // the constructor's reference keeps it loaded

  main_s += dlcycle_main(0.3);
  for (int i = 0; i < g_cycles; ++i) dlclose(open_or_die("libdlcycle_a.so"));
  const double dep_s = burn_in(open_or_die("libdlcycle_user.so"), "dlcycle_needed", 0.2);

  FILE* f = fopen(argv[2], "w");
  if (!f) return 2;
  fprintf(f, "dlcycle_a %.6f\ndlcycle_b %.6f\ndlcycle_inner %.6f\ndlcycle_main %.6f\n", a_s, b_s,
          inner_s, main_s);
  fprintf(f, "dlcycle_dep %.6f\n", dep_s);
  fprintf(f, "process_cpu %.6f\na_same_address %d\n", burn_process_cpu(), first == second);
  fclose(f);
  printf("done\n");
  return 0;
}
