// The plugins of dlcycle_prog.cpp, one source built into several modules: each defines its
// own burn function, DLCYCLE_FN. The module built with DLCYCLE_INNER (the "outer" one) loads
// that other module from its constructor and burns CPU in it there, before the outer
// dlopen returns: its samples count only if the constructor's own dlopen registered it. The one
// built with DLCYCLE_NEEDS (the "user" one) calls into another module it is linked with.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "burn.hpp"

SPROFIL_BURN(DLCYCLE_FN)

#ifdef DLCYCLE_NEEDS
// The "user" module burns in the module it needs (DT_NEEDED), which a dlopen of it loads too.
extern "C" double DLCYCLE_NEEDS(double);
extern "C" __attribute__((visibility("default"))) double dlcycle_needed(double seconds) {
  return DLCYCLE_NEEDS(seconds);
}
#endif

#ifdef DLCYCLE_INNER
// The inner module's CPU burnt in the constructor (main reads it with dlsym), -1 on failure.
extern "C" {
__attribute__((visibility("default"))) double dlcycle_ctor_seconds = -1;
}

namespace {
__attribute__((constructor)) void load_inner() {
  Dl_info self{};
  if (!dladdr(reinterpret_cast<void*>(&load_inner), &self) || !self.dli_fname) return;
  char path[4096];
  snprintf(path, sizeof path, "%s", self.dli_fname);
  char* slash = strrchr(path, '/');
  if (!slash) return;
  snprintf(slash + 1, sizeof path - static_cast<size_t>(slash + 1 - path), "%s", DLCYCLE_INNER);
  void* h = dlopen(path, RTLD_NOW);  // never closed: it stays loaded to the end
  auto* fn = h ? reinterpret_cast<double (*)(double)>(dlsym(h, "dlcycle_inner")) : nullptr;
  if (fn) dlcycle_ctor_seconds = fn(0.3);
}
}  // namespace
#endif
