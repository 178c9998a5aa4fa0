// The validation tests' fixture: every test starts and ends with face profiling off.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <numeric>
#include <vector>

#include "helpers.hpp"
#include "sprofil/hpux.h"
#include "sprofil/ultra64.h"

namespace sprofil::faces_test {

class FaceTest : public ::testing::Test {
 protected:
  void SetUp() override { off(); }
  void TearDown() override { off(); }
  static void off() {
    osProfileStop();
    hpux_sprofil(nullptr, 0, nullptr, PROF_USHORT);  // profcnt 0: the face channel off
  }
};

template <typename T>
uint64_t sum(const std::vector<T>& v) {
  return std::accumulate(v.begin(), v.end(), uint64_t{0});
}
template <typename T, size_t N>
uint64_t sum(const T (&v)[N]) {
  uint64_t s = 0;
  for (const T& x : v) s += x;
  return s;
}

// Expects a call to fail with errno e.
#define EXPECT_ERRNO(call, e) \
  do {                        \
    errno = 0;                \
    EXPECT_EQ((call), -1);    \
    EXPECT_EQ(errno, (e));    \
  } while (0)

}  // namespace sprofil::faces_test
