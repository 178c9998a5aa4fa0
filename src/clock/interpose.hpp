// The next definition of an interposed libc function (dlsym RTLD_NEXT), looked up once.
#pragma once

#include <dlfcn.h>

#include <atomic>

namespace sprofil::rt {

template <class F>
F real_fn(std::atomic<F>& cache, const char* name) {
  F f = cache.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    cache.store(f, std::memory_order_release);
  }
  return f;
}

}  // namespace sprofil::rt
