// The tool's usage errors, of every subcommand: a bad option or argument, found before anything
// runs, exits 2 with the problem on stderr and where to look (its --help), nothing on stdout;
// whatever CLI11's own code for it was (105 for a value out of range, 106 for a missing
// required option, 109 for an unknown one, 114 for an option without its value). --help and
// --version exit 0; record's own status stays the command's.
#include <string>
#include <vector>

#include "helpers.hpp"

namespace sprofil::record_test {
using namespace agent_test;  // tests/agent/helpers.hpp

namespace {

struct Usage {
  Args args;         // after `sprofil`
  std::string sub;   // the subcommand its message names ("": sprofil itself)
  std::string says;  // part of the message
  bool hint = true;  // "Run 'sprofil SUB --help' for more information."
};

// `sprofil ARGS...`, bounded: an error that is not caught would run the subcommand (top and
// serve until they are stopped); timeout(1) then ends it with 124.
Result tool(const Args& args) {
  Args a{"timeout", "20", kTool};
  a.insert(a.end(), args.begin(), args.end());
  return run(a);
}

void expect_usage_error(const Usage& u) {
  std::string line;
  for (const std::string& a : u.args) line += " " + a;
  SCOPED_TRACE("sprofil" + line);
  const Result r = tool(u.args);
  EXPECT_EQ(r.status, 2) << describe(r);
  EXPECT_EQ(r.out, "");
  const std::string prog = u.sub.empty() ? "sprofil" : "sprofil " + u.sub;
  EXPECT_EQ(r.err.rfind(prog + ": ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(u.says), std::string::npos) << r.err;
  if (u.hint) {
    EXPECT_NE(r.err.find("\nRun '" + prog + " --help' for more information.\n"), std::string::npos)
        << r.err;
  }
}

// Each kind of usage error CLI11 finds (an unknown option, an option without its value, a
// missing required option or argument, one argument too many, a value not among the choices)
// and the tool's own, for every subcommand.
TEST(Usage, EveryUsageErrorExitsTwo) {
  TempDir dir;
  const std::string out = dir / "p.sprof";
  const std::vector<Usage> table = {
      {{"--bogus"}, "", "--bogus"},
      {{"bogus"}, "", "bogus"},
      {{"record"}, "record", "no command to run"},
      {{"record", "--bogus", "/bin/true"}, "record", "--bogus"},
      {{"record", "-o"}, "record", "--output"},
      {{"record", "--clock", "bogus", "/bin/true"}, "record", "--clock: bogus"},
      // Not CLI11's: record's check of the output, before the command runs.
      {{"record", "-o", dir.path(), "--", "/bin/true"}, "record", "is a directory", false},
      {{"report", "--bogus"}, "report", "--bogus"},
      {{"report", "a.sprof", "b.sprof"}, "report", "b.sprof"},
      {{"report", "--by", "bogus"}, "report", "--by: bogus"},
      {{"report", "--format"}, "report", "--format"},
      // Not CLI11's: --inline splits --by line's rows only (it was ignored otherwise).
      {{"report", "--inline"}, "report", "--inline needs --by line"},
      {{"report", "--inline", "--by", "address"}, "report", "this is --by address"},
      {{"merge", "a.sprof"}, "merge", "--output is required"},
      {{"merge", "-o", out}, "merge", "profiles is required"},
      {{"merge", "--bogus", "-o", out, "a.sprof"}, "merge", "--bogus"},
      {{"diff", "a.sprof"}, "diff", "new is required"},
      {{"diff", "--by", "object2", "a.sprof", "b.sprof"}, "diff", "--by: object2"},
      {{"annotate", "--function"}, "annotate", "--function"},
      // An empty name annotated the hottest functions, as if none were given.
      {{"annotate", "--function", ""}, "annotate", "a function's name, not an empty one"},
      {{"annotate", "--format", "html"}, "annotate", "--format: html"},
      {{"fetch"}, "fetch", "target is required"},
      {{"fetch", "1", "--bogus"}, "fetch", "--bogus"},
      {{"gperf"}, "gperf", "give a PID or socket, or --serve"},
      {{"gperf", "--serve", "--dir"}, "gperf", "--dir"},
      {{"top"}, "top", "target is required"},
      {{"top", "1", "-q"}, "top", "-q"},
      {{"list", "extra"}, "list", "extra"},
      {{"serve", "--token-file"}, "serve", "--token-file"},
      {{"serve", "--listen", "localhost"}, "serve", "--listen: localhost: expected HOST:PORT"},
  };
  for (const Usage& u : table) expect_usage_error(u);
}

// Every numeric option takes only numbers of its range: not a negative number (CLI11 alone took
// --limit -1 as the largest size_t), not one past its type or range, not NaN, not text.
TEST(Usage, NumericOptionsRejectWhatIsOutOfRange) {
  const std::string big = "99999999999999999999999";  // past 64 bits
  const std::vector<Usage> table = {
      {{"record", "-F", "0", "/bin/true"}, "record", "--frequency: 0: out of range (1 to 1000000)"},
      {{"record", "-F", "-1", "/bin/true"}, "record", "--frequency: -1: not a whole number"},
      {{"record", "-F", "1000001", "/bin/true"}, "record", "1000001: out of range (1 to 1000000)"},
      {{"record", "-F", big, "/bin/true"}, "record", big + ": out of range (1 to 1000000)"},
      {{"record", "-F", "1e3", "/bin/true"}, "record", "1e3: not a whole number"},
      {{"report", "--limit", "-1"}, "report", "--limit: -1: not a whole number (0 or more)"},
      {{"report", "--limit", big}, "report", big + ": too large (at most 18446744073709551615)"},
      {{"report", "--limit", "ten"}, "report", "--limit: ten: not a whole number"},
      {{"report", "--min-percent", "-1"}, "report", "--min-percent: -1: out of range (0 to 100)"},
      {{"report", "--min-percent", "101"}, "report", "101: out of range (0 to 100)"},
      {{"report", "--min-percent", "nan"}, "report", "--min-percent: nan: not a number"},
      {{"report", "--pid", "-5"}, "report", "--pid: -5: not a whole number (1 or more)"},
      {{"report", "--pid", "0"}, "report", "--pid: 0: out of range (1 or more)"},
      {{"report", "--pid", "4294967296"}, "report", "4294967296: too large (at most 2147483647)"},
      {{"diff", "--limit", "-1", "a", "b"}, "diff", "--limit: -1: not a whole number"},
      {{"diff", "--alpha", "0.9", "a", "b"}, "diff", "--alpha: 0.9: out of range (1e-12 to 0.5)"},
      {{"diff", "--alpha", "nan", "a", "b"}, "diff", "--alpha: nan: not a number"},
      {{"annotate", "--top", "0"}, "annotate", "--top: 0: out of range (1 or more)"},
      {{"annotate", "--top", "-3"}, "annotate", "--top: -3: not a whole number"},
      {{"annotate", "--pid", "-1"}, "annotate", "--pid: -1: not a whole number"},
      {{"fetch", "1", "--timeout", "0"}, "fetch", "--timeout: 0: out of range (1 or more)"},
      {{"fetch", "1", "--timeout", "-5"}, "fetch", "--timeout: -5: not a whole number"},
      {{"fetch", "1", "--timeout", "2147483648"}, "fetch", "too large (at most 2147483647)"},
      {{"gperf", "--serve", "--count", "-1"}, "gperf", "--count: -1: not a whole number"},
      {{"gperf", "--serve", "--count", "4294967296"}, "gperf", "too large (at most 4294967295)"},
      {{"gperf", "1", "--limit", "-1"}, "gperf", "--limit: -1: not a whole number"},
      {{"top", "1", "--limit", "-1"}, "top", "--limit: -1: not a whole number"},
      {{"top", "1", "-n", "-1"}, "top", "--count: -1: not a whole number"},
      {{"top", "1", "-i", "0"}, "top", "--interval: 0: out of range (0.05 to 3600)"},
      {{"top", "1", "-i", "inf"}, "top", "--interval: inf: not a number"},
      {{"serve", "--listen", "127.0.0.1:65536"}, "serve", "127.0.0.1:65536: expected HOST:PORT"},
      {{"serve", "--listen", "127.0.0.1:-1"}, "serve", "127.0.0.1:-1: expected HOST:PORT"},
      {{"serve", "--listen", "127.0.0.1:0", "-1"}, "serve", "pids: -1: not a whole number"},
      {{"serve", "--listen", "127.0.0.1:0", "0"}, "serve", "pids: 0: out of range (1 or more)"},
  };
  for (const Usage& u : table) expect_usage_error(u);
}

// A number is read in decimal: CLI11 alone read -F 010 as octal (8 Hz).
TEST(Usage, NumbersAreDecimal) {
  TempDir dir;
  const std::string out = dir / "p.sprof";
  const Result r = agent_test::record(out, {"-F", "010"}, {"/bin/true"});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(read(out).requested_hz, 10u);
  EXPECT_NE(r.err.find(", 10 Hz requested)"), std::string::npos) << r.err;
}

// --help (of sprofil and of every subcommand) and --version: on stdout, status 0.
TEST(Usage, HelpAndVersionExitZero) {
  for (const char* sub : {"", "record", "report", "merge", "diff", "annotate", "fetch", "gperf",
                          "top", "list", "serve"}) {
    SCOPED_TRACE(sub);
    Args a;
    if (*sub != '\0') a.push_back(sub);
    a.push_back("--help");
    const Result r = tool(a);
    EXPECT_EQ(r.status, 0) << describe(r);
    EXPECT_NE(r.out.find("Usage: "), std::string::npos) << r.out;
    EXPECT_EQ(r.err, "");
  }
  const Result r = tool({"--version"});
  EXPECT_EQ(r.status, 0) << describe(r);
  EXPECT_EQ(r.out.rfind("sprofil ", 0), 0u) << r.out;
  EXPECT_EQ(r.err, "");
  // sprofil without a subcommand: its help, on stderr, and a usage error's status.
  const Result bare = tool({});
  EXPECT_EQ(bare.status, 2) << describe(bare);
  EXPECT_EQ(bare.out, "");
  EXPECT_NE(bare.err.find("Usage: "), std::string::npos) << bare.err;
}

// Only what stops the command from starting is a usage error: record's status is otherwise the
// command's, even one that is 2 or one of CLI11's codes, and 127 for a command not found.
TEST(Usage, RecordKeepsTheCommandsStatus) {
  TempDir dir;
  const std::string out = dir / "p.sprof";
  for (const int code : {2, 105}) {
    const Result r = agent_test::record(out, {}, {"sh", "-c", "exit " + std::to_string(code)});
    EXPECT_EQ(r.status, code) << describe(r);
    EXPECT_EQ(r.err.find("--help"), std::string::npos) << r.err;
  }
  const Result r = tool({"record", "-o", out, "sprofil-no-such-command-anywhere"});
  EXPECT_EQ(r.status, 127) << describe(r);
}

}  // namespace
}  // namespace sprofil::record_test
