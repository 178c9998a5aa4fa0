// A real program you did not write, natively and under every clock: a shell script that
// forks children, writes files, reads its own output back and exits with a status of its own.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "harness.hpp"

namespace sprofil::harm_test {
namespace {

TEST(NoHarm, ShellScriptWithChildrenAndFiles) {
  const char* script =
      "set -e; for i in 1 2 3 4 5; do echo line $i >> log.txt; seq 1 2000 | sort -r > s$i; done;"
      "cat log.txt; wc -l s1 >&2; ln -s log.txt link; mkdir d; cp s1 d/; exit 3";
  expect_no_harm({"/bin/sh", "-c", script});
}

// A background job that outlives the run (record ends with its command) and starts a program
// after it. Natively nothing is printed. Under record the agent in that program finds the run's
// directory gone, and used to print "sprofil: not profiling: cannot create ...: No such file or
// directory" into the program's stderr (the harness leaves out sprofil's lines, so this test
// reads the job's stderr itself: every line of it is the program's).
TEST(NoHarm, JobThatOutlivesTheRunPrintsNothing) {
  std::vector<std::string> clocks_here{"auto", "cpu"};
  for (const std::string& clock : clocks_here) {
    SCOPED_TRACE(clock);
    TempDir dir;
    const std::string done = dir / "done", err = dir / "job.err";
    const std::string script = "(sleep 0.3; /bin/true; /bin/sh -c 'echo job' > '" + done +
                               ".tmp'; mv '" + done + ".tmp' '" + done + "') 2> '" + err +
                               "' & echo started";
    const Result r =
        agent_test::record(dir / "p.sprof", {"--clock", clock}, {"/bin/sh", "-c", script});
    ASSERT_EQ(r.status, 0) << agent_test::describe(r);
    EXPECT_EQ(r.out, "started\n");
    // The job ends about 0.3 s after the run; waited for up to 20 s.
    for (int i = 0; i < 200 && !std::filesystem::exists(done); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(std::filesystem::exists(done)) << "the background job did not finish";
    std::ifstream in(err);
    const std::string job_err((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
    EXPECT_EQ(job_err, "");
  }
}

}  // namespace
}  // namespace sprofil::harm_test
