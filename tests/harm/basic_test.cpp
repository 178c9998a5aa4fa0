// A real program you did not write, natively and under every clock: a shell script that
// forks children, writes files, reads its own output back and exits with a status of its own.
#include "harness.hpp"

namespace sprofil::harm_test {
namespace {

TEST(NoHarm, ShellScriptWithChildrenAndFiles) {
  const char* script =
      "set -e; for i in 1 2 3 4 5; do echo line $i >> log.txt; seq 1 2000 | sort -r > s$i; done;"
      "cat log.txt; wc -l s1 >&2; ln -s log.txt link; mkdir d; cp s1 d/; exit 3";
  expect_no_harm({"/bin/sh", "-c", script});
}

}  // namespace
}  // namespace sprofil::harm_test
