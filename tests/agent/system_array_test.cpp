// The system-time array, file side: with SPROFIL_SYSTEM=1 the agent lays out
// every region record with a second counter array where the clock splits system time (the
// perf clock), and none where it does not (the cpu clock). The records are parsed here
// directly through sprof_format.h (the host reader learns the array separately). A
// page-fault-heavy program (tests/agent/agent_faults.cpp) is run with the agent alone
// (LD_PRELOAD + SPROFIL_OUTPUT), once plain and once forking a child (FILE.PID: the fork
// remapping of the larger records).
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "helpers.hpp"

namespace sprofil::agent_test {
namespace {

const std::string kFaults = AGENT_FAULTS;

struct RawRegion {
  sprof_region rec;
  std::vector<uint32_t> counts, system;  // system empty without SPROF_R_SYSTEM
};
struct RawProfile {
  sprof_header hdr;
  std::vector<RawRegion> regions;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint64_t padded(uint64_t n) {
  return (n + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
}

// Parses and checks the layout of every committed record (failures are test failures).
RawProfile parse(const std::string& path) {
  RawProfile p{};
  const std::string data = read_file(path);
  EXPECT_GE(data.size(), SPROF_PAGE) << path;
  if (data.size() < SPROF_PAGE) return p;
  memcpy(&p.hdr, data.data(), sizeof p.hdr);
  EXPECT_EQ(memcmp(p.hdr.magic, SPROF_MAGIC, 8), 0);
  uint64_t off = SPROF_PAGE;
  for (uint32_t k = 0; k < p.hdr.region_count; ++k) {
    SCOPED_TRACE(path + " region " + std::to_string(k));
    EXPECT_LE(off + SPROF_PAGE, data.size());
    if (off + SPROF_PAGE > data.size()) break;
    RawRegion r{};
    memcpy(&r.rec, data.data() + off, sizeof r.rec);
    EXPECT_EQ(r.rec.magic, SPROF_REGION_MAGIC);
    EXPECT_EQ(r.rec.counter_width, 4u);
    EXPECT_EQ(r.rec.counters_offset, off + SPROF_PAGE);
    const uint64_t bytes = padded(r.rec.nbins * r.rec.counter_width);
    const bool sys = (r.rec.flags & SPROF_R_SYSTEM) != 0;
    EXPECT_EQ(r.rec.record_size, SPROF_PAGE + bytes * (sys ? 2 : 1));
    if (sys) {
      EXPECT_EQ(r.rec.system_offset % SPROF_PAGE, 0u);
      EXPECT_EQ(r.rec.system_offset, off + SPROF_PAGE + bytes);
    } else {
      EXPECT_EQ(r.rec.system_offset, 0u);
    }
    EXPECT_LE(off + r.rec.record_size, data.size());
    if (off + r.rec.record_size > data.size()) break;
    r.counts.resize(r.rec.nbins);
    memcpy(r.counts.data(), data.data() + r.rec.counters_offset, r.rec.nbins * 4);
    if (sys) {
      r.system.resize(r.rec.nbins);
      memcpy(r.system.data(), data.data() + r.rec.system_offset, r.rec.nbins * 4);
      for (uint64_t b = 0; b < r.rec.nbins; ++b)
        EXPECT_LE(r.system[b], r.counts[b]) << "bin " << b << ": system part above the count";
    }
    off += r.rec.record_size;
    p.regions.push_back(std::move(r));
  }
  EXPECT_EQ(p.hdr.regions_end, off);
  return p;
}

// "name lo hi" lines written by agent_faults.
std::map<std::string, std::pair<uint64_t, uint64_t>> read_extents(const std::string& path) {
  std::map<std::string, std::pair<uint64_t, uint64_t>> m;
  std::ifstream in(path);
  std::string name;
  uint64_t lo, hi;
  while (in >> name >> lo >> hi) m[name] = {lo, hi};
  return m;
}

struct Sums {
  uint64_t count = 0, system = 0;
};

// The counts of the main program's bins that fall in [lo, hi).
Sums sum_in(const RawProfile& p, uint64_t lo, uint64_t hi) {
  Sums s;
  for (const RawRegion& r : p.regions) {
    if (!(r.rec.flags & SPROF_R_MAIN)) continue;
    for (uint64_t b = 0; b < r.rec.nbins; ++b) {
      const uint64_t pc = r.rec.start + b * r.rec.bin_size;
      if (pc < lo || pc >= hi) continue;
      s.count += r.counts[b];
      if (!r.system.empty()) s.system += r.system[b];
    }
  }
  return s;
}

uint64_t total_system(const RawProfile& p) {
  uint64_t n = 0;
  for (const RawRegion& r : p.regions)
    for (uint32_t v : r.system) n += v;
  return n;
}

struct FaultsRun {
  Result result;
  std::string file;
  std::vector<std::string> names;  // every file the run wrote in its directory
  std::map<std::string, std::pair<uint64_t, uint64_t>> extents;
};

FaultsRun run_faults(const TempDir& dir, const std::string& clock, const std::string& system,
                     bool fork) {
  FaultsRun run;
  run.file = dir / "p.sprof";
  // 12 rounds: 0.1 s or more in each function here (6 gave fault_work 48-60 samples, against
  // the tests' bound of 50).
  Args argv{kFaults, dir / "truth", "12"};
  if (fork) argv.push_back("fork");
  run.result = ::sprofil::agent_test::run(argv, {{"LD_PRELOAD", kRuntime},
                                                 {"SPROFIL_OUTPUT", run.file},
                                                 {"SPROFIL_CLOCK", clock},
                                                 {"SPROFIL_HZ", "1000"},
                                                 {"SPROFIL_SYSTEM", system},
                                                 {"SPROFIL_STARTED", "\x01"}});
  for (const std::string& n : list_dir(dir.path()))
    if (n.rfind("p.sprof", 0) == 0) run.names.push_back(n);
  run.extents = read_extents(dir / "truth");
  return run;
}

TEST(SystemArray, PerfClockLaysOutAndFillsTheSystemArray) {
  if (int e = perf_probe()) GTEST_SKIP() << "perf events denied here: " << strerror(e);
  TempDir dir;
  const FaultsRun fr = run_faults(dir, "perf", "1", false);
  ASSERT_EQ(fr.result.status, 0) << describe(fr.result);
  ASSERT_EQ(fr.extents.size(), 2u);
  const RawProfile p = parse(fr.file);
  ASSERT_FALSE(p.regions.empty());
  for (const RawRegion& r : p.regions)
    EXPECT_TRUE(r.rec.flags & SPROF_R_SYSTEM) << std::string(r.rec.path, r.rec.path_len);
  const auto [flo, fhi] = fr.extents.at("fault_work");
  const auto [clo, chi] = fr.extents.at("compute_work");
  const Sums fault = sum_in(p, flo, fhi), compute = sum_in(p, clo, chi);
  // Both functions ran for a good share of a second at 1000 Hz: each has many samples.
  EXPECT_GT(fault.count, 50u);
  EXPECT_GT(compute.count, 50u);
  // Where the handler passes the kernel part (the perf clock's system weight), the page
  // faults' time lands in fault_work's bins: a larger share of fault_work's count than of
  // compute_work's (which makes no system call). How exactly the clock splits a sample is
  // the clock's business (tests/clock); this checks that the agent's arrays take the split
  // where it belongs. Before the clock layer passes a
  // system part, every system count is 0.
  const uint64_t all_system = total_system(p);
  if (all_system > 0) {
    EXPECT_GT(fault.system, 0u);
    EXPECT_GT(fault.system * compute.count, compute.system * fault.count)
        << "fault_work " << fault.system << "/" << fault.count << ", compute_work "
        << compute.system << "/" << compute.count;
  } else {
    RecordProperty("system_counts", "none: the clock does not pass a system part yet");
  }
}

TEST(SystemArray, ForkedChildGetsTheSameLayoutFromZero) {
  if (int e = perf_probe()) GTEST_SKIP() << "perf events denied here: " << strerror(e);
  TempDir dir;
  const FaultsRun fr = run_faults(dir, "perf", "1", true);
  ASSERT_EQ(fr.result.status, 0) << describe(fr.result);
  ASSERT_EQ(fr.names.size(), 2u) << "the parent's p.sprof and the child's p.sprof.PID";
  const auto [clo, chi] = fr.extents.at("compute_work");
  for (const std::string& name : fr.names) {
    SCOPED_TRACE(name);
    const RawProfile p = parse(dir / name);
    ASSERT_FALSE(p.regions.empty());
    EXPECT_EQ(name != "p.sprof", (p.hdr.flags & SPROF_F_CHILD) != 0);
    for (const RawRegion& r : p.regions) EXPECT_TRUE(r.rec.flags & SPROF_R_SYSTEM);
    // Each process did the same work once: its own counts, not the other's added in (the
    // child starts from zero). 12 rounds of 20M xorshift steps: well over 50 ms of CPU.
    EXPECT_GT(sum_in(p, clo, chi).count, 50u);
  }
}

// Under a file-size limit the records that do not fit live in anonymous memory and are
// written at exit where they fit (finish.cpp): with their system arrays, at their new offsets.
// prlimit (util-linux) sets the limit and execs the program, whose image writes p.sprof.PID.
TEST(SystemArray, SpilledRecordsKeepTheLayout) {
  if (int e = perf_probe()) GTEST_SKIP() << "perf events denied here: " << strerror(e);
  if (access("/usr/bin/prlimit", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/prlimit";
  TempDir dir;
  constexpr uint64_t kLimit = 1 << 20;  // the program's own record fits, libc's does not
  const Result r = ::sprofil::agent_test::run(
      {"/usr/bin/prlimit", "--fsize=" + std::to_string(kLimit), kFaults, dir / "truth", "2"},
      {{"LD_PRELOAD", kRuntime},
       {"SPROFIL_OUTPUT", dir / "p.sprof"},
       {"SPROFIL_CLOCK", "perf"},
       {"SPROFIL_SYSTEM", "1"},
       {"SPROFIL_STARTED", "\x01"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  EXPECT_NE(r.err.find("cannot grow"), std::string::npos) << r.err;
  std::string image;
  for (const std::string& n : list_dir(dir.path()))
    if (n.rfind("p.sprof.", 0) == 0) image = n;
  ASSERT_FALSE(image.empty()) << "the exec'd program's file";
  EXPECT_LE(std::filesystem::file_size(dir / image), kLimit);
  const RawProfile p = parse(dir / image);  // every committed record, spilled ones included
  ASSERT_FALSE(p.regions.empty());
  for (const RawRegion& reg : p.regions) EXPECT_TRUE(reg.rec.flags & SPROF_R_SYSTEM);
  const auto extents = read_extents(dir / "truth");
  ASSERT_EQ(extents.count("compute_work"), 1u);
  EXPECT_GT(sum_in(p, extents.at("compute_work").first, extents.at("compute_work").second).count,
            10u);
}

// The itimer clock (one process-wide timer whose signal lands in any thread) cannot tell a
// thread's system time: its records have no system array.
TEST(SystemArray, ItimerClockHasNoSystemArray) {
  TempDir dir;
  const FaultsRun fr = run_faults(dir, "itimer", "1", false);
  ASSERT_EQ(fr.result.status, 0) << describe(fr.result);
  const RawProfile p = parse(fr.file);
  ASSERT_FALSE(p.regions.empty());
  for (const RawRegion& r : p.regions) {
    EXPECT_FALSE(r.rec.flags & SPROF_R_SYSTEM);
    EXPECT_TRUE(r.system.empty());
  }
  EXPECT_EQ(total_system(p), 0u);
}

// On by default: a perf-clock profile with no SPROFIL_SYSTEM has the array, and the host
// reader takes it with its system counts.
TEST(SystemArray, OnByDefaultAndTheReaderTakesIt) {
  if (int e = perf_probe()) GTEST_SKIP() << "perf events denied here: " << strerror(e);
  TempDir dir;
  const FaultsRun fr = run_faults(dir, "perf", "\x01", false);  // SPROFIL_SYSTEM unset
  ASSERT_EQ(fr.result.status, 0) << describe(fr.result);
  const RawProfile p = parse(fr.file);
  ASSERT_FALSE(p.regions.empty());
  for (const RawRegion& r : p.regions) EXPECT_TRUE(r.rec.flags & SPROF_R_SYSTEM);
  read(fr.file);  // the host reader takes it
}

}  // namespace
}  // namespace sprofil::agent_test
