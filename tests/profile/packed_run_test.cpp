// Run profiles of version 3: each process's image stored packed (only its 8-byte units that
// hold data, after a table of extents), versions 2 (packed by pages) and 1 (each image in full)
// still read, and the reader's answers to packed images that lie about their extents or their
// size.
#include <sys/mman.h>
#include <sys/stat.h>

#include <functional>

#include "format/layout.hpp"
#include "test_util.hpp"

namespace sprofil::profile_test {
namespace {

// Two processes, each with a 64 MiB text region at 1-byte bins and 4-byte counters (256 MiB of
// counters, as `sprofil record` writes a large library) in which three bins were hit, far
// apart, and the small regions of sample_profile().
Profile large_run() {
  std::vector<Profile> parts;
  for (int32_t pid : {100, 101}) {
    Profile p = sample_profile();
    p.pid = pid;
    Region big;
    big.path = "/usr/lib/libhuge.so";
    big.start = 0x7f5000000000;
    big.end = big.start + (uint64_t{64} << 20);
    big.load_bias = big.start;
    big.bin_size = 1;
    big.counter_width = 4;
    big.add(10, 5);
    big.add(uint64_t{32} << 20, 7);
    big.add((uint64_t{64} << 20) - 1, 9);
    p.regions.push_back(big);
    parts.push_back(p);
  }
  return combine_processes(std::move(parts), {"", ".101"});
}

off_t size_of(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

void expect_same(const Profile& a, const Profile& b) {
  ASSERT_EQ(a.regions.size(), b.regions.size());
  for (size_t k = 0; k < a.regions.size(); ++k) {
    EXPECT_EQ(a.regions[k].path, b.regions[k].path);
    EXPECT_EQ(a.regions[k].start, b.regions[k].start);
    EXPECT_EQ(a.regions[k].process, b.regions[k].process);
    EXPECT_EQ(a.regions[k].bins, b.regions[k].bins) << a.regions[k].path;
  }
  ASSERT_EQ(a.processes.size(), b.processes.size());
  for (size_t i = 0; i < a.processes.size(); ++i) {
    EXPECT_EQ(a.processes[i].pid, b.processes[i].pid);
    EXPECT_EQ(a.processes[i].name, b.processes[i].name);
    EXPECT_EQ(a.processes[i].delivered, b.processes[i].delivered);
  }
  EXPECT_EQ(a.total_samples(), b.total_samples());
}

// A file packed by pages (version 2) holds the header, the table and, per process, one page of
// extents and the pages with data: the header, seven records and the counter pages hit. Its
// size is its data; version 1 of the same run is 512 MiB of mostly holes. Both read back the
// same counts.
TEST(PackedRun, VersionTwoStoresOnlyThePagesWithDataAndReadsBackTheSame) {
  TempDir dir;
  const Profile run = large_run();
  std::string error;
  ASSERT_TRUE(write_profile(run, dir.file("v2.sprof"), &error, SPROF_RUN_VERSION_PAGES)) << error;
  ASSERT_TRUE(write_profile(run, dir.file("v1.sprof"), &error, SPROF_RUN_VERSION_FULL)) << error;
  Profile one;
  ASSERT_TRUE(read_profile(dir.file("v2.sprof"), &one, &error)) << error;
  Profile full;
  ASSERT_TRUE(read_profile(dir.file("v1.sprof"), &full, &error)) << error;
  expect_same(one, run);
  expect_same(full, run);
  EXPECT_GT(size_of(dir.file("v1.sprof")), off_t{512} << 20);
  // Per process: the extent table (one page), the header, 7 records and the counter pages
  // that hold a count (sample_profile's six regions: every page of their small arrays; the
  // large region: 3).
  uint64_t counter_pages = 3;
  for (size_t k = 0; k < 6; ++k) {
    const Region& r = run.regions[k];
    counter_pages += sprofil::layout::page_round(r.nbins() * r.counter_width) / SPROF_PAGE *
                     (r.has_system() ? 2 : 1);
  }
  const uint64_t per_process = (1 + 1 + 7 + counter_pages) * SPROF_PAGE;
  EXPECT_EQ(static_cast<uint64_t>(size_of(dir.file("v2.sprof"))), 2 * SPROF_PAGE + 2 * per_process);
  // The version is the packed one, and the entry says what it stores and how large the image is.
  const std::vector<uint8_t> img = slurp(dir.file("v2.sprof"));
  EXPECT_EQ(peek<uint32_t>(img, offsetof(sprof_run_header, version)), SPROF_RUN_VERSION_PAGES);
  EXPECT_EQ(peek<uint64_t>(img, SPROF_PAGE + offsetof(sprof_run_process, stored_size)),
            per_process);
  EXPECT_GT(peek<uint64_t>(img, SPROF_PAGE + offsetof(sprof_run_process, image_size)),
            uint64_t{256} << 20);
}

// Version 3 (what the tools write) stores an image's 8-byte units that hold data: the same run
// reads back the same as from version 2, in fewer bytes; where a process has a few samples in
// each of its objects (a short process, as `sprofil record` sees most), in a tenth of them or
// less. The file is the
// header, the table and the images one after the other (each its extent table and its units);
// every extent begins and ends on a unit that is not zero, holds a zero unit only alone between
// two that are not, and is not followed by another a unit later (it would have been one).
TEST(PackedRun, VersionThreeStoresOnlyTheUnitsWithDataAndReadsBackTheSame) {
  const Profile run = large_run();
  const std::vector<uint8_t> v3 = image_of(run), v2 = image_of(run, SPROF_RUN_VERSION_PAGES);
  ASSERT_EQ(peek<uint32_t>(v3, offsetof(sprof_run_header, version)), SPROF_RUN_VERSION);
  Profile back;
  std::string error;
  ASSERT_TRUE(parse_profile(v3.data(), v3.size(), &back, &error)) << error;
  expect_same(back, run);
  for (size_t k = 0; k < run.regions.size(); ++k)
    EXPECT_EQ(back.regions[k].build_id, run.regions[k].build_id);
  EXPECT_LT(v3.size(), v2.size());
  std::vector<Profile> few;
  for (int32_t pid : {300, 301, 302}) {
    Profile p = sample_profile();
    p.pid = pid;
    for (Region& r : p.regions) {
      r.bins.clear();
      r.add(1, 1);
      r.add(r.nbins() - 1, 2);
    }
    few.push_back(p);
  }
  const Profile short_run = combine_processes(few, {"", ".301", ".302"});
  const std::vector<uint8_t> short3 = image_of(short_run),
                             short2 = image_of(short_run, SPROF_RUN_VERSION_PAGES);
  Profile short_back;
  ASSERT_TRUE(parse_profile(short3.data(), short3.size(), &short_back, &error)) << error;
  expect_same(short_back, short_run);
  EXPECT_LE(short3.size() * 10, short2.size()) << short3.size() << " against " << short2.size();
  uint64_t end = 2 * SPROF_PAGE;
  for (size_t i = 0; i < run.processes.size(); ++i) {
    const size_t entry = SPROF_PAGE + i * SPROF_RUN_ENTRY;
    const uint64_t at = peek<uint64_t>(v3, entry + offsetof(sprof_run_process, image_offset));
    const uint64_t stored = peek<uint64_t>(v3, entry + offsetof(sprof_run_process, stored_size));
    const uint32_t n = peek<uint32_t>(v3, entry + offsetof(sprof_run_process, extent_count));
    EXPECT_EQ(at, end) << "process " << i;
    end = at + stored;
    uint64_t unit_at = at + n * uint64_t{SPROF_RUN_EXTENT}, units = 0, prev_end = 0;
    for (uint32_t k = 0; k < n; ++k) {
      const uint64_t first = peek<uint64_t>(v3, static_cast<size_t>(at + 16 * k));
      const uint64_t count = peek<uint64_t>(v3, static_cast<size_t>(at + 16 * k + 8));
      EXPECT_TRUE(k == 0 || first > prev_end + 1) << "process " << i << " extent " << k;
      prev_end = first + count;
      for (uint64_t u = 0; u < count; ++u) {
        const bool zero = peek<uint64_t>(v3, static_cast<size_t>(unit_at + 8 * u)) == 0;
        const bool inside = u > 0 && u + 1 < count &&
                            peek<uint64_t>(v3, static_cast<size_t>(unit_at + 8 * (u - 1))) != 0 &&
                            peek<uint64_t>(v3, static_cast<size_t>(unit_at + 8 * (u + 1))) != 0;
        EXPECT_TRUE(!zero || inside) << "process " << i << " extent " << k << " unit " << u;
      }
      unit_at += 8 * count;
      units += count;
    }
    EXPECT_EQ(stored, n * uint64_t{SPROF_RUN_EXTENT} + units * SPROF_RUN_UNIT) << "process " << i;
  }
  EXPECT_EQ(end, v3.size());
}

// The run header's throttle count (once reserved1, at 72), its threads that ended before their
// first sample (at 3152, after the command line, once reserved) and its processes whose program
// did (at 3168, once reserved) are written and read back
// in both versions, at their offsets and little-endian; 0 where the writer counted none.
TEST(PackedRun, ThrottleAndShortThreadCountsAreKeptInTheRunHeader) {
  TempDir dir;
  Profile run = large_run();
  run.throttled = 0x0102030405;
  run.unsampled_threads = 1494;
  run.unsampled_thread_ticks = 907;
  run.unsampled_processes = 301;
  run.unsampled_process_ticks = 46;
  std::string error;
  for (const uint32_t version :
       {SPROF_RUN_VERSION, SPROF_RUN_VERSION_PAGES, SPROF_RUN_VERSION_FULL}) {
    const std::string file = dir.file("t" + std::to_string(version) + ".sprof");
    ASSERT_TRUE(write_profile(run, file, &error, version)) << error;
    const std::vector<uint8_t> img = slurp(file);
    EXPECT_EQ(offsetof(sprof_run_header, throttled), 72u);
    EXPECT_EQ(img[72], 0x05);
    EXPECT_EQ(img[76], 0x01);
    Profile back;
    ASSERT_TRUE(read_profile(file, &back, &error)) << error;
    EXPECT_EQ(back.throttled, run.throttled) << "version " << version;
    EXPECT_EQ(back.unsampled_threads, 1494u);
    EXPECT_EQ(back.unsampled_thread_ticks, 907u);
    EXPECT_EQ(back.unsampled_processes, 301u);
    EXPECT_EQ(back.unsampled_process_ticks, 46u);
    EXPECT_EQ(peek<uint64_t>(img, 3152), 1494u);
    EXPECT_EQ(peek<uint64_t>(img, 3168), 301u);
    EXPECT_EQ(peek<uint64_t>(img, 3176), 46u);
  }
  run.throttled = 0;
  ASSERT_TRUE(write_profile(run, dir.file("none.sprof"), &error)) << error;
  Profile back;
  ASSERT_TRUE(read_profile(dir.file("none.sprof"), &back, &error)) << error;
  EXPECT_EQ(back.throttled, 0u);
}

// A copy that fills the holes of a version 1 run (as an upload or an archive does) reads the
// same as the sparse one: the zeros are zeros wherever they are stored.
TEST(PackedRun, VersionOneWithItsHolesWrittenOutReadsTheSame) {
  TempDir dir;
  Profile run = combine_processes({sample_profile(), sample_profile()}, {"", ".2"});
  std::string error;
  ASSERT_TRUE(write_profile(run, dir.file("v1.sprof"), &error, SPROF_RUN_VERSION_FULL)) << error;
  std::vector<uint8_t> dense = slurp(dir.file("v1.sprof"));
  Profile q;
  ASSERT_TRUE(parse_profile(dense.data(), dense.size(), &q, &error)) << error;
  expect_same(q, run);
}

struct Mutation {
  const char* what;
  std::function<void(std::vector<uint8_t>&)> apply;
  std::vector<std::string> needles;
};

// Every lie of a packed entry is refused with a message naming the process and the fault,
// whatever it is: nothing is read outside the entry's stored bytes. In both packed versions
// (their units: a page, 8 bytes).
TEST(PackedRun, EntriesThatLieAboutTheirExtentsAreRefused) {
  for (const uint32_t version : {SPROF_RUN_VERSION, SPROF_RUN_VERSION_PAGES}) {
    SCOPED_TRACE("version " + std::to_string(version));
    const uint64_t unit = sprofil::layout::run_unit(version);
    const std::vector<uint8_t> good = image_of(large_run(), version);
    const size_t e0 = SPROF_PAGE, e1 = SPROF_PAGE + SPROF_RUN_ENTRY;
    const uint64_t at0 = peek<uint64_t>(good, e0 + offsetof(sprof_run_process, image_offset));
    const uint64_t stored0 = peek<uint64_t>(good, e0 + offsetof(sprof_run_process, stored_size));
    const uint32_t n0 = peek<uint32_t>(good, e0 + offsetof(sprof_run_process, extent_count));
    ASSERT_GE(n0, 3u);
    const size_t x1 = static_cast<size_t>(at0) + sizeof(sprof_run_extent);  // extent 1
    const std::vector<Mutation> cases = {
        {"no extents",
         [&](auto& img) { poke<uint32_t>(img, e0 + 80, 0); },
         {"process 0", "bad extent_count 0"}},
        {"more extents than the stored bytes hold",
         [&](auto& img) { poke<uint32_t>(img, e0 + 80, 0xffffffffu); },
         {"process 0", "bad extent_count 4294967295"}},
        {"extent 1 overlaps extent 0",
         [&](auto& img) { poke<uint64_t>(img, x1, 0); },
         {"process 0", "bad extent 1", "must be sorted"}},
        {"an empty extent",
         [&](auto& img) { poke<uint64_t>(img, x1 + 8, 0); },
         {"process 0", "bad extent 1"}},
        {"an extent past the image",
         [&](auto& img) { poke<uint64_t>(img, e0 + 16, uint64_t{2} * SPROF_PAGE); },
         {"process 0", "bad extent"}},
        {"fewer stored bytes than the extents' units",
         [&](auto& img) { poke<uint64_t>(img, e0 + 72, stored0 - unit); },
         {"process 0", "the extents hold", "the entry stores"}},
        {"stored bytes past the end of the file",
         [&](auto& img) { poke<uint64_t>(img, e1 + 72, uint64_t{1} << 40); },
         {"process 1", "bad image at offset", "stored in 1099511627776 bytes"}},
        {"stored bytes not in units",
         [&](auto& img) { poke<uint64_t>(img, e0 + 72, stored0 + 1); },
         {"process 0", "bad image"}},
        {"an image not at a unit",
         [&](auto& img) { poke<uint64_t>(img, e1 + 8, peek<uint64_t>(img, e1 + 8) + 4); },
         {"process 1", "bad image"}},
        {"image_size not in pages",
         [&](auto& img) {
           poke<uint64_t>(img, e0 + 16,
                          peek<uint64_t>(img, e0 + offsetof(sprof_run_process, image_size)) - 1);
         },
         {"process 0", "bad image"}},
    };
    for (const Mutation& m : cases) {
      std::vector<uint8_t> img = good;
      m.apply(img);
      Profile q;
      std::string error;
      EXPECT_FALSE(parse_profile(img.data(), img.size(), &q, &error)) << m.what;
      for (const std::string& n : m.needles)
        EXPECT_NE(error.find(n), std::string::npos) << m.what << ": " << error;
    }
  }
}

// A packed image may claim any size; what it stores bounds what it costs. An image that claims
// 2^60 bytes reads as what it stores (the rest zeros: a long hole is stepped over at once), and
// a header that claims 2^32-1 records in it is refused by the bytes it stores, before anything
// is allocated (a page a record in version 2; in version 3 the six units a record cannot leave
// zero).
TEST(PackedRun, ImageClaimingAHugeSizeCostsWhatItStores) {
  for (const uint32_t version : {SPROF_RUN_VERSION, SPROF_RUN_VERSION_PAGES}) {
    SCOPED_TRACE("version " + std::to_string(version));
    std::vector<uint8_t> img = image_of(large_run(), version);
    const size_t e0 = SPROF_PAGE;
    poke<uint64_t>(img, e0 + offsetof(sprof_run_process, image_size), uint64_t{1} << 60);
    Profile q;
    std::string error;
    ASSERT_TRUE(parse_profile(img.data(), img.size(), &q, &error)) << error;
    EXPECT_EQ(q.total_samples(), large_run().total_samples());
    // The first stored bytes after the extent table are the image's header.
    const uint64_t at0 = peek<uint64_t>(img, e0 + offsetof(sprof_run_process, image_offset));
    const uint32_t n0 = peek<uint32_t>(img, e0 + offsetof(sprof_run_process, extent_count));
    const size_t header = static_cast<size_t>(at0 + sprofil::layout::run_table_bytes(version, n0));
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(img.data() + header), 7), "SPROFIL");
    poke<uint32_t>(img, header + offsetof(sprof_header, region_count), 0xffffffffu);
    EXPECT_FALSE(parse_profile(img.data(), img.size(), &q, &error));
    EXPECT_NE(error.find("process 0"), std::string::npos) << error;
    EXPECT_NE(error.find("region_count 4294967295 cannot fit"), std::string::npos) << error;
  }
}

// A region's path with a NUL in it is no file's name, and is refused in every version: a
// version 3 image stores every byte of its paths, so its records' memory is bounded by the
// bytes it stores (a path of 3,840 zeros would cost 3,840 bytes for none stored).
TEST(PackedRun, APathWithANulIsRefused) {
  Profile run = large_run();
  run.regions[1].path = std::string("/usr/lib/lib\0c.so", 17);
  for (const uint32_t version :
       {SPROF_RUN_VERSION, SPROF_RUN_VERSION_PAGES, SPROF_RUN_VERSION_FULL}) {
    const std::vector<uint8_t> img = image_of(run, version);
    Profile q;
    std::string error;
    EXPECT_FALSE(parse_profile(img.data(), img.size(), &q, &error)) << "version " << version;
    EXPECT_NE(error.find("path holds a NUL byte at 12"), std::string::npos) << error;
  }
}

// A run's CPU time and rate are the sum and the CPU-weighted mean of its processes' (TallySum).
// A process image without samples and without CPU time (one that record, sampling from
// outside, kept with no sample: a shell that forked and exec'd within a period) leaves both
// known; one with samples but no CPU time (unknown) makes the run's CPU unknown (0).
// The bytes of p as write_profile_fd writes them into a memfd.
std::vector<uint8_t> fd_bytes(const Profile& p) {
  const int fd = memfd_create("sprofil-test", MFD_CLOEXEC);
  std::string error;
  EXPECT_TRUE(write_profile_fd(p, fd, &error)) << error;
  struct stat st {};
  ::fstat(fd, &st);
  std::vector<uint8_t> out(static_cast<size_t>(st.st_size));
  EXPECT_EQ(::pread(fd, out.data(), out.size(), 0), st.st_size);
  ::close(fd);
  return out;
}

// `sprofil record --live` answers with a packed run profile of the one process, which the client
// takes for that process's own profile (process_image): every header field and every bin, the
// system parts with them, come back as a v1 image of it would give them, in fewer bytes where
// most counters are zero.
TEST(PackedRun, OneProcessRunWrittenToAnFdIsThatProcesssProfile) {
  Profile p = large_run();
  p = process_image(p, 1);
  p.flags = SPROF_F_FINISHED | SPROF_F_CHILD;
  p.regions[1].flags |= SPROF_R_SYSTEM;
  p.regions[1].bins.front().system = 1;
  const std::vector<uint8_t> packed = fd_bytes(combine_processes({p}, {}));
  const std::vector<uint8_t> dense = fd_bytes(p);
  Profile run, v1;
  std::string error;
  ASSERT_TRUE(parse_profile(packed.data(), packed.size(), &run, &error)) << error;
  ASSERT_TRUE(parse_profile(dense.data(), dense.size(), &v1, &error)) << error;
  EXPECT_TRUE(run.run);
  EXPECT_FALSE(v1.run);
  ASSERT_EQ(run.processes.size(), 1u);
  expect_same_profile(process_image(run, 0), v1);
  EXPECT_EQ(v1.pid, p.pid);
  EXPECT_EQ(v1.flags, p.flags);
  // The dense image holds every counter of the 64 MiB region; the packed one, its 3 pages.
  EXPECT_GT(dense.size(), size_t{256} << 20);
  EXPECT_LT(packed.size(), size_t{1} << 20);
}

TEST(RunSum, AnEmptyImageLeavesTheRunsCpuAndRateKnown) {
  Profile empty = sample_profile();
  empty.regions.clear();
  empty.cpu_ns = 0;
  empty.effective_hz = 0;
  empty.delivered = empty.overflow = empty.lost = 0;
  const Profile a = sample_profile();
  Profile run = combine_processes({empty, a}, {"", ".2"});
  EXPECT_EQ(run.cpu_ns, a.cpu_ns);
  EXPECT_DOUBLE_EQ(run.effective_hz, a.effective_hz);
  EXPECT_EQ(run.delivered, a.delivered);
  Profile unknown = sample_profile();
  unknown.cpu_ns = 0;
  run = combine_processes({unknown, a}, {"", ".2"});
  EXPECT_EQ(run.cpu_ns, 0u);
  EXPECT_EQ(run.effective_hz, 0);
}

}  // namespace
}  // namespace sprofil::profile_test
