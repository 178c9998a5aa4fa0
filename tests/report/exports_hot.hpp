// An always-inlined step for tests/report/exports_prog.cpp, which inlines it at two call sites
// of main: rows of --by line --inline with one function, file and line and two chains.
#pragma once

static inline __attribute__((always_inline)) unsigned long hot_step(unsigned long x) {
  return x * 6364136223846793005ul + 1442695040888963407ul;  // MARK:hot-step
}
