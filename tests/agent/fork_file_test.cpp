// A forked child's profile file under the default (1-byte on a disk) bins: its page cache and,
// after a clean exit, its disk space follow the code the child hit, like the parent's. Before the
// fix the child's first store into its header page faulted in the device's readahead window of the
// new, fully reserved file (read_ahead_kb: 8 MB here, zero-filled page by page): that was most of a
// fork's cost, it grew with the reserved size (4x at 1-byte bins), and since SEEK_HOLE counts
// cached pages of reserved space as data, a clean exit kept them on disk (measured: the child of
// `agent_prog fork 0.1 0.3` at 4-byte bins, 6.3 MB resident and 6.4 MB on disk; now 48 KB and 52
// KB, as the parent's file).
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <vector>

#include "helpers.hpp"

namespace sprofil::agent_test {
namespace {

// Pages of `path` in the page cache (mincore over a read-only mapping, which faults nothing).
long resident_pages(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st {};
  long n = -1;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    void* m = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
      const size_t pages = (static_cast<size_t>(st.st_size) + 4095) / 4096;
      std::vector<unsigned char> v(pages);
      if (::mincore(m, static_cast<size_t>(st.st_size), v.data()) == 0) {
        n = 0;
        for (unsigned char c : v) n += c & 1;
      }
      ::munmap(m, static_cast<size_t>(st.st_size));
    }
  }
  ::close(fd);
  return n;
}

long disk_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<long>(st.st_blocks) * 512 : -1;
}

// Whether `dir` is a filesystem in memory, where the agent's default bins are 4 bytes.
bool in_memory(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

uint32_t bins_of_default_run(const std::string& out) {
  Result r = run({kProg, "burn", "0.05"}, {{"LD_PRELOAD", kRuntime},
                                           {"SPROFIL_OUTPUT", out},
                                           {"SPROFIL_QUIET", "1"},
                                           {"SPROFIL_BIN_BYTES", "\x01"}});
  EXPECT_EQ(r.status, 0) << describe(r);
  profile::Profile p = read(out);
  EXPECT_FALSE(p.regions.empty());
  uint32_t bins = 0;
  for (const auto& reg : p.regions) {
    if (bins == 0) bins = reg.bin_size;
    EXPECT_EQ(reg.bin_size, bins) << "one bin size for every region";
  }
  return bins;
}

// The default bin: 1 byte (exact) on a disk; 4 on a tmpfs, where the reserved counter space
// is memory (docs/agent.md, "Memory and disk").
TEST(DefaultBins, ExactOnDiskWiderInMemory) {
  TempDir dir;
  EXPECT_EQ(bins_of_default_run(dir / "d.sprof"), in_memory(dir.path()) ? 4u : 1u);
  if (!in_memory("/dev/shm")) GTEST_SKIP() << "/dev/shm is not a tmpfs here";
  char shm[] = "/dev/shm/sprofil_bins_XXXXXX";
  ASSERT_NE(::mkdtemp(shm), nullptr);
  const std::string f = std::string(shm) + "/m.sprof";
  EXPECT_EQ(bins_of_default_run(f), 4u);
  ::unlink(f.c_str());
  ::rmdir(shm);
}

TEST(ForkFile, ChildFileFollowsTheCodeHitNotTheCodeSize) {
  TempDir dir;
  const std::string out = dir / "f.sprof", truth = dir / "truth";
  // The agent alone (not `sprofil record`, which folds the child's file into the run's).
  Result r = run({kProg, "--truth", truth, "fork", "0.1", "0.3"},
                 {{"LD_PRELOAD", kRuntime}, {"SPROFIL_OUTPUT", out}, {"SPROFIL_QUIET", "1"}});
  ASSERT_EQ(r.status, 0) << describe(r);
  auto child = read_truth(truth + ".child");
  const std::string child_file = out + "." + std::to_string(static_cast<int>(child["child_pid"]));
  // Measured before the file is read (reading it brings its pages in).
  const long res = resident_pages(child_file);
  const long disk = disk_bytes(child_file);
  profile::Profile c = read(child_file);
  ASSERT_TRUE(c.flags & SPROF_F_CHILD);
  ASSERT_GT(c.delivered, 0u) << "the child got no sample: nothing to compare";
  uint64_t reserved = 0;
  for (const auto& reg : c.regions) {
    EXPECT_EQ(reg.bin_size, in_memory(dir.path()) ? 4u : 1u) << "the default bin";
    reserved += reg.nbins() * reg.counter_width;
  }
  // The child hit burn_child and a little of libc and the runtime: a few counter pages (and
  // their system-time pages), a page per record, the header: 12 pages here. 64 pages more
  // (256 KB) is a generous margin; the readahead window was 2048 pages (8 MB) on this machine.
  // (Where read_ahead_kb is under the margin, the kernel's 128 KB default, this test cannot
  // see the readahead, which was then cheap.)
  const long budget = 64 * 4096 + static_cast<long>(c.regions.size() + 1) * 4096;
  ASSERT_GT(reserved, 4u * static_cast<uint64_t>(budget)) << "the text is too small to tell";
  ASSERT_GE(res, 0);
  EXPECT_LE(res * 4096, budget) << "resident pages of the child's file: " << res;
  EXPECT_LE(disk, budget) << "bytes on disk of the child's finished file";
  // The parent's file, for the record: the same order of size.
  RecordProperty("child_resident_pages", std::to_string(res));
  RecordProperty("child_disk_bytes", std::to_string(disk));
  RecordProperty("parent_disk_bytes", std::to_string(disk_bytes(out)));
}

}  // namespace
}  // namespace sprofil::agent_test
