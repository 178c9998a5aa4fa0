// The FILE, FILE.PID, FILE.PID.N naming rule (src/format/profile_name.hpp): what the agent
// writes, src/record reads back, and nothing else is taken for a profile of the run.
#include <gtest/gtest.h>

#include <string>

#include "format/profile_name.hpp"

namespace sprofil::record_test {
namespace {

using sprofil::naming::parse_profile_suffix;
using sprofil::naming::profile_name;

TEST(ProfileName, WhatTheAgentWritesParsesBack) {
  struct Case {
    int pid, k;
    const char* name;
  } cases[] = {{0, 0, "p.sprof"},
               {1234, 0, "p.sprof.1234"},
               {1234, 7, "p.sprof.1234.7"},
               {2147483647, 999, "p.sprof.2147483647.999"}};
  for (const Case& c : cases) {
    char out[64];
    ASSERT_TRUE(profile_name(out, sizeof out, "p.sprof", c.pid, c.k));
    EXPECT_STREQ(out, c.name);
    int pid = -1, k = -1;
    ASSERT_TRUE(parse_profile_suffix(out + 7, &pid, &k)) << out;
    EXPECT_EQ(pid, c.pid);
    EXPECT_EQ(k, c.k);
  }
}

TEST(ProfileName, TooLongDoesNotFit) {
  char out[8];
  volatile size_t size = sizeof out;  // not a constant: the point is the run-time check
  EXPECT_FALSE(profile_name(out, size, "p.sprof", 1234, 0));
  EXPECT_TRUE(profile_name(out, size, "p.spro", 0, 0));
}

TEST(ProfileName, AnythingElseIsNotAProfileOfTheRun) {
  for (const char* s : {".", ".x", ".12x", ".012", ".12.", ".12.0", ".12.03", "..12", ".12.3.4",
                        "-12", ".+12", ".99999999999", ".12.99999999999", "~", ".tmp"}) {
    int pid = -1, k = -1;
    EXPECT_FALSE(parse_profile_suffix(s, &pid, &k)) << "'" << s << "'";
  }
}

}  // namespace

}  // namespace sprofil::record_test
