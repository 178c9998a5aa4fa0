// Each validation rule of the reader: the error names the problem and where it is.
#include "test_util.hpp"

namespace sprofil::profile_test {
namespace {

class ReaderErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    img_ = image_of(sample_profile());
    recs_ = record_offsets(img_);
    ASSERT_EQ(recs_.size(), 6u);
  }
  // Parses img_ and expects failure with every needle in the message.
  void expect_error(std::initializer_list<const char*> needles) {
    Profile p;
    std::string error;
    ASSERT_FALSE(parse_profile(img_.data(), img_.size(), &p, &error));
    for (const char* n : needles) EXPECT_NE(error.find(n), std::string::npos) << error;
  }
  template <typename T>
  void poke_region(size_t k, size_t field, T v) {
    poke<T>(img_, recs_[k] + field, v);
  }
  std::vector<uint8_t> img_;
  std::vector<size_t> recs_;
};

TEST_F(ReaderErrors, EmptyAndShortFiles) {
  img_.clear();
  expect_error({"empty file"});
  img_.assign(100, 0);
  expect_error({"shorter than the header", "100 bytes", "4096"});
  img_.assign(SPROF_PAGE - 1, 0);
  expect_error({"shorter than the header", "4095"});
}

TEST_F(ReaderErrors, Magic) {
  img_[0] = 'X';
  expect_error({"bad magic"});
  img_ = image_of(sample_profile());
  img_[7] = '!';  // the terminating NUL is part of the magic
  expect_error({"bad magic"});
}

TEST_F(ReaderErrors, Version) {
  poke<uint32_t>(img_, offsetof(sprof_header, version), 2);
  expect_error({"unsupported version 2", "reads version 1", "newer"});
  poke<uint32_t>(img_, offsetof(sprof_header, version), 0);
  expect_error({"unsupported version 0"});
}

TEST_F(ReaderErrors, HeaderSize) {
  poke<uint32_t>(img_, offsetof(sprof_header, header_size), 8192);
  expect_error({"bad header_size 8192"});
}

TEST_F(ReaderErrors, Clock) {
  poke<uint32_t>(img_, offsetof(sprof_header, clock), SPROF_CLOCK_COUNT);
  const std::string want = "bad clock value " + std::to_string(SPROF_CLOCK_COUNT);
  expect_error({want.c_str()});
}

TEST_F(ReaderErrors, CmdlineLen) {
  poke<uint32_t>(img_, offsetof(sprof_header, cmdline_len), SPROF_CMDLINE_MAX + 1);
  expect_error({"bad cmdline_len 3073"});
}

TEST_F(ReaderErrors, CmdlineWithoutFinalNulAndFullLength) {
  poke<uint32_t>(img_, offsetof(sprof_header, cmdline_len), 9);  // "./prog\0--"
  Profile p;
  std::string error;
  ASSERT_TRUE(parse_profile(img_.data(), img_.size(), &p, &error)) << error;
  EXPECT_EQ(p.argv, (std::vector<std::string>{"./prog", "--"}));
  poke<uint32_t>(img_, offsetof(sprof_header, cmdline_len), SPROF_CMDLINE_MAX);
  ASSERT_TRUE(parse_profile(img_.data(), img_.size(), &p, &error)) << error;
  EXPECT_EQ(p.argv.size(), 4u + (SPROF_CMDLINE_MAX - 24));  // each trailing NUL is an ""
}

TEST_F(ReaderErrors, RegionsEnd) {
  poke<uint64_t>(img_, offsetof(sprof_header, regions_end), img_.size() + 1);
  expect_error({"regions_end", "past the end of the file"});
  poke<uint64_t>(img_, offsetof(sprof_header, regions_end), recs_[5]);
  expect_error({"regions_end", "before the end"});
}

TEST_F(ReaderErrors, RegionCount) {
  poke<uint32_t>(img_, offsetof(sprof_header, region_count), 0xffffffffu);
  expect_error({"region_count 4294967295", "cannot fit"});
  // Fits the coarse bound but the records run past the end.
  poke<uint32_t>(img_, offsetof(sprof_header, region_count), 7);
  poke<uint64_t>(img_, offsetof(sprof_header, regions_end), img_.size());
  img_.resize(img_.size() + 2 * SPROF_PAGE, 0);
  expect_error({"region 6", "bad region magic"});
  img_.resize(img_.size() - SPROF_PAGE - 1);
  expect_error({"region 6", "record truncated"});
}

TEST_F(ReaderErrors, RegionMagic) {
  poke_region<uint32_t>(3, offsetof(sprof_region, magic), 0x12345678);
  expect_error({"region 3", "bad region magic", std::to_string(recs_[3]).c_str()});
}

TEST_F(ReaderErrors, PathLen) {
  poke_region<uint32_t>(2, offsetof(sprof_region, path_len), SPROF_PATH_MAX + 1);
  expect_error({"region 2", "bad path_len 3841"});
}

TEST_F(ReaderErrors, BuildIdLen) {
  poke_region<uint32_t>(1, offsetof(sprof_region, build_id_len), 65);
  expect_error({"region 1 (/usr/lib/libc.so.6)", "bad build_id_len 65"});
}

TEST_F(ReaderErrors, CounterWidth) {
  for (uint32_t w : {0u, 1u, 3u, 16u, 0xffffffffu}) {
    img_ = image_of(sample_profile());
    poke_region<uint32_t>(1, offsetof(sprof_region, counter_width), w);
    expect_error({"region 1 (/usr/lib/libc.so.6)", "bad counter_width"});
  }
}

TEST_F(ReaderErrors, BinSize) {
  poke_region<uint32_t>(4, offsetof(sprof_region, bin_size), 0);
  expect_error({"region 4 (/usr/lib/libm.so.6)", "bad bin_size 0"});
}

TEST_F(ReaderErrors, AddressRange) {
  const uint64_t start = peek<uint64_t>(img_, recs_[0] + offsetof(sprof_region, start));
  poke_region<uint64_t>(0, offsetof(sprof_region, end), start);
  expect_error({"region 0 (/usr/bin/prog)", "bad address range"});
}

TEST_F(ReaderErrors, Nbins) {
  poke_region<uint64_t>(0, offsetof(sprof_region, nbins), 2499);
  expect_error({"region 0 (/usr/bin/prog)", "bad nbins 2499", "needs 2500"});
}

TEST_F(ReaderErrors, NbinsTimesWidthOverflows) {
  // A huge range in 1-byte bins with 8-byte counters: nbins * 8 overflows 64 bits.
  poke_region<uint64_t>(2, offsetof(sprof_region, start), 0);
  poke_region<uint64_t>(2, offsetof(sprof_region, end), 0xffffffffffffffffull);
  poke_region<uint32_t>(2, offsetof(sprof_region, bin_size), 1);
  poke_region<uint64_t>(2, offsetof(sprof_region, nbins), 0xffffffffffffffffull);
  expect_error({"region 2 ([vdso])", "overflows"});
}

TEST_F(ReaderErrors, RecordSize) {
  poke_region<uint64_t>(1, offsetof(sprof_region, record_size), 4097);
  expect_error({"region 1 (/usr/lib/libc.so.6)", "bad record_size 4097", "multiple of 4096"});
  img_ = image_of(sample_profile());
  poke_region<uint64_t>(1, offsetof(sprof_region, record_size), 0);
  expect_error({"bad record_size 0"});
  img_ = image_of(sample_profile());
  poke_region<uint64_t>(1, offsetof(sprof_region, record_size), 5 * SPROF_PAGE);
  expect_error({"bad record_size 20480", "need 16384"});
}

TEST_F(ReaderErrors, CountersOffset) {
  poke_region<uint64_t>(1, offsetof(sprof_region, counters_offset), recs_[1]);
  expect_error({"region 1", "bad counters_offset", std::to_string(recs_[1] + 4096).c_str()});
}

TEST_F(ReaderErrors, TruncatedCountersNameRegionAndSizes) {
  // Cut the file inside region 1's counters (records 0: 3 pages at 4096, 1: 4 pages at 16384).
  ASSERT_EQ(recs_[1], 4u * SPROF_PAGE);
  poke<uint32_t>(img_, offsetof(sprof_header, region_count), 2);
  poke<uint64_t>(img_, offsetof(sprof_header, regions_end), 0);
  img_.resize(recs_[1] + SPROF_PAGE + 9000);
  expect_error(
      {"region 1 (/usr/lib/libc.so.6): counters truncated: need 12288 bytes at offset "
       "20480, file has 29480"});
}

TEST(ReaderFile, MissingFileAndDirectory) {
  Profile p;
  std::string error;
  EXPECT_FALSE(read_profile("/nonexistent/dir/x.sprof", &p, &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos) << error;
  EXPECT_NE(error.find("No such file"), std::string::npos) << error;
  EXPECT_FALSE(read_profile("/", &p, &error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos) << error;
}

TEST(ReaderFile, TruncatedFileOnDisk) {
  TempDir dir;
  std::vector<uint8_t> img = image_of(sample_profile());
  img.resize(img.size() - 1);
  spit(dir.file("t.sprof"), img);
  Profile p;
  std::string error;
  EXPECT_FALSE(read_profile(dir.file("t.sprof"), &p, &error));
  EXPECT_NE(error.find("regions_end"), std::string::npos) << error;
}

}  // namespace
}  // namespace sprofil::profile_test
