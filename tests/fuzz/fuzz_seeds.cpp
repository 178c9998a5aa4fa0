// Writes the fuzzer's seed corpus into DIR: a small v1 profile and a small run profile of two
// processes (packed, version 2, and in full, version 1), all through the real writer, and the
// crafted files of the reader's limits: one with a system-time array, one with counts near
// UINT64_MAX, and a 12 KB file whose region claims 2^40 bins (refused).
#include <cstdio>
#include <string>

#include <cstddef>

#include "format/sprof_format.h"
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
  r.add(3, 7);
  r.add(60, 70000);  // widened to 4 bytes
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
  if (!write_profile(run, dir + "/run.sprof", &err) ||
      !write_profile(run, dir + "/run_v2.sprof", &err, SPROF_RUN_VERSION_PAGES) ||
      !write_profile(run, dir + "/run_v1.sprof", &err, SPROF_RUN_VERSION_FULL)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  Profile sys = one(12, "sys");
  sys.regions[0].flags |= SPROF_R_SYSTEM;
  sys.regions[0].bins.clear();
  sys.regions[0].add(3, 7, 5);
  sys.regions[0].add(60, 70000, 69999);
  Profile big = one(13, "big");
  big.regions[0].counter_width = 8;
  big.regions[0].add(1, UINT64_MAX - 1);
  big.regions.push_back(big.regions[0]);
  big.regions[1].path = "/usr/lib/libbig.so";
  big.overflow = UINT64_MAX - 5;
  if (!write_profile(sys, dir + "/system.sprof", &err) ||
      !write_profile(big, dir + "/near_max.sprof", &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  // 12 KB: the header, one region record claiming 2^40 bins, one page of counters.
  Profile huge = one(14, "huge");
  huge.regions[0].bins.clear();
  huge.regions[0].add(0, 1);
  if (!write_profile(huge, dir + "/huge_claim.sprof", &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 1;
  }
  if (FILE* f = std::fopen((dir + "/huge_claim.sprof").c_str(), "r+b")) {
    const uint64_t end = 0x400000 + (uint64_t{1} << 42), nbins = uint64_t{1} << 40;
    std::fseek(f, long{SPROF_PAGE} + long(offsetof(sprof_region, end)), SEEK_SET);
    std::fwrite(&end, 8, 1, f);
    std::fseek(f, long{SPROF_PAGE} + long(offsetof(sprof_region, nbins)), SEEK_SET);
    std::fwrite(&nbins, 8, 1, f);
    std::fclose(f);
  }
  return 0;
}
