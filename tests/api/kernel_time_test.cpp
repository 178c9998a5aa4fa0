// A session's samples with a kernel part over a heap that malloc() had handed out before:
// the session once built its table's regions in such memory without constructing them, and
// the first such sample wrote through the garbage in a region's (unset) system-time pointer.
#include <gtest/gtest.h>

#include <cstdint>

#include "../common/kernel_burn.hpp"
#include "sprofil/sprofil.h"

namespace sprofil::api_test {
namespace {

TEST(KernelTime, SamplesOverAReusedHeap) {
  if (!kInlineSyscall) GTEST_SKIP() << "no inline system call for this architecture here";
  poison_heap();
  sprofil_session* s = sprofil_create(nullptr);
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(sprofil_add_function(s, reinterpret_cast<const void*>(&burn_sys)), 0);
  ASSERT_EQ(sprofil_start(s), 0);
  burn_sys(200);
  ASSERT_EQ(sprofil_stop(s), 0);
  sprofil_snapshot* snap = sprofil_snapshot_take(s);
  ASSERT_NE(snap, nullptr);
  ASSERT_EQ(snap->nregions, 1u);
  uint64_t total = 0;
  for (size_t k = 0; k < snap->regions[0].nbins; ++k) total += snap->regions[0].counts[k];
  // 200 ms of CPU time at the default 1 kHz, most of it in the kernel: >= 100 samples.
  EXPECT_GE(total, 100u);
  sprofil_snapshot_free(snap);
  sprofil_destroy(s);
}

}  // namespace
}  // namespace sprofil::api_test
