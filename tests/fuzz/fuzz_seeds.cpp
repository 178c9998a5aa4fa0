// Writes the fuzzer's seed corpus into DIR: a small v1 profile and a small run profile of two
// processes, both through the real writer.
#include <cstdio>
#include <string>

#include "profile/writer.hpp"

using namespace sprofil::profile;

static Profile one(int32_t pid, const char* prog) {
  Profile p;
  p.clock = Clock::kCpu;
  p.requested_hz = 1000;
  p.tick_ns = 1000000;
  p.pid = pid;
  p.ppid = 1;
  p.argv = {prog, "-x"};
  p.flags = 1;
  Region r;
  r.path = std::string("/usr/bin/") + prog;
  r.flags = 1;
  r.start = 0x400000;
  r.end = 0x400000 + 256;
  r.bin_size = 4;
  r.counter_width = 2;
  r.counts.assign(64, 0);
  r.counts[3] = 7;
  r.counts[60] = 70000;  // widened to 4 bytes
  p.regions.push_back(r);
  p.delivered = 70007;
  return p;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::string err;
  if (!write_profile(one(10, "prog"), dir + "/v1.sprof", &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  Profile run = combine_processes({one(10, "sh"), one(11, "prog")}, {"", ".11"});
  run.run_cpu_ns = 123456789;
  run.dropped_processes = 3;
  if (!write_profile(run, dir + "/run.sprof", &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  return 0;
}
