#include "profile/reader.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "format/layout.hpp"

namespace sprofil::profile {

namespace {

// Where the bytes come from: a memory image or a file read with pread.
class Source {
 public:
  explicit Source(uint64_t size) : size_(size) {}
  virtual ~Source() = default;
  uint64_t size() const { return size_; }
  // Reads [off, off + len), which the caller has checked lies inside size().
  virtual bool read(uint64_t off, void* dst, size_t len, std::string* error) = 0;
  // True when [off, off + len) is known to read as zeros (a file hole): no need to read it.
  virtual bool is_hole(uint64_t /*off*/, uint64_t /*len*/) { return false; }
  // Where the hole that is_hole() just found at off ends, as far as known (at least off): a
  // long hole is then stepped over at once, not a chunk at a time.
  virtual uint64_t hole_end(uint64_t off) { return off; }
  // At most how many region records it can hold: each is a page of data (in a packed image of
  // version 3, kMinStoredRecord stored bytes), so a packed image that claims a huge size with
  // little data cannot claim many records.
  virtual uint64_t max_records() { return size_ / SPROF_PAGE; }

 private:
  uint64_t size_;
};

class MemorySource final : public Source {
 public:
  MemorySource(const uint8_t* data, size_t size) : Source(size), data_(data) {}
  bool read(uint64_t off, void* dst, size_t len, std::string* error) override {
    if (off > size() || len > size() - off) {
      *error = "read past the end at offset " + std::to_string(off);
      return false;
    }
    if (len) std::memcpy(dst, data_ + off, len);
    return true;
  }

 private:
  const uint8_t* data_;
};

class FileSource final : public Source {
 public:
  FileSource(int fd, uint64_t size) : Source(size), fd_(fd) {}
  bool read(uint64_t off, void* dst, size_t len, std::string* error) override {
    auto* p = static_cast<uint8_t*>(dst);
    while (len > 0) {
      ssize_t n = ::pread(fd_, p, len, static_cast<off_t>(off));
      if (n < 0) {
        if (errno == EINTR) continue;
        *error = "read error at offset " + std::to_string(off) + ": " + std::strerror(errno);
        return false;
      }
      if (n == 0) {
        *error = "file shrank while reading: nothing at offset " + std::to_string(off);
        return false;
      }
      p += n;
      off += static_cast<uint64_t>(n);
      len -= static_cast<size_t>(n);
    }
    return true;
  }

  // Each answer of the file system is kept: a hole [from, data) or data [from, hole), so the
  // counters of a large sparse region cost a seek per extent, not one per chunk. On ext4 a
  // SEEK_DATA over the agent's reserved (unwritten) extents scans the page cache and took
  // 15 us here: one per 64 KB chunk was 53,000 seeks and 0.8 s for a shell loop of 100
  // processes under `sprofil record` (bench/process_loop.sh).
  bool is_hole(uint64_t off, uint64_t len) override {
    if (!seek_data_works_ || off > static_cast<uint64_t>(INT64_MAX)) return false;
    if (off >= from_ && off < to_) return !data_ ? to_ - off >= len : false;
    const off_t data = ::lseek(fd_, static_cast<off_t>(off), SEEK_DATA);
    if (data < 0) {
      if (errno != ENXIO) {  // e.g. a file system without SEEK_DATA
        seek_data_works_ = false;
        return false;
      }
      remember(off, UINT64_MAX, false);  // no data from off to the end of the file
      return true;
    }
    if (static_cast<uint64_t>(data) > off) {
      remember(off, static_cast<uint64_t>(data), false);
      return static_cast<uint64_t>(data) - off >= len;
    }
    const off_t hole = ::lseek(fd_, static_cast<off_t>(off), SEEK_HOLE);
    if (hole > data) remember(off, static_cast<uint64_t>(hole), true);
    return false;
  }
  uint64_t hole_end(uint64_t off) override {
    return !data_ && off >= from_ && off < to_ ? std::min(to_, size()) : off;
  }

 private:
  void remember(uint64_t from, uint64_t to, bool data) {
    from_ = from;
    to_ = to;
    data_ = data;
  }
  int fd_;
  bool seek_data_works_ = true;
  uint64_t from_ = 0, to_ = 0;  // the last extent seen: [from_, to_), data or hole
  bool data_ = false;
};

// [base, base + size) of another source: one process's image inside a run profile.
class SubSource final : public Source {
 public:
  SubSource(Source& parent, uint64_t base, uint64_t size)
      : Source(size), parent_(parent), base_(base) {}
  bool read(uint64_t off, void* dst, size_t len, std::string* error) override {
    if (off > size() || len > size() - off) {
      *error = "read past the end of the image at offset " + std::to_string(off);
      return false;
    }
    return parent_.read(base_ + off, dst, len, error);
  }
  bool is_hole(uint64_t off, uint64_t len) override { return parent_.is_hole(base_ + off, len); }
  uint64_t hole_end(uint64_t off) override {
    return std::min(parent_.hole_end(base_ + off) - base_, size());
  }

 private:
  Source& parent_;
  uint64_t base_;
};

// A packed image of a version 2 or 3 run profile (sprof_format.h): its units that hold data
// (pages in version 2, SPROF_RUN_UNIT bytes in version 3) are stored at `base` of the parent,
// in the order of `extents` (checked: sorted, not overlapping, inside the image); every other
// byte reads as zero.
class PackedSource final : public Source {
 public:
  PackedSource(Source& parent, uint64_t base, uint64_t size, uint64_t unit,
               std::vector<sprof_run_extent> extents)
      : Source(size), parent_(parent), base_(base), unit_(unit), extents_(std::move(extents)) {
    uint64_t at = 0;
    for (const sprof_run_extent& x : extents_) {
      stored_at_.push_back(at);
      at += x.count;
    }
    max_records_ = unit_ == SPROF_PAGE ? at : at * unit_ / layout::kMinStoredRecord;
  }
  bool read(uint64_t off, void* dst, size_t len, std::string* error) override {
    if (off > size() || len > size() - off) {
      *error = "read past the end of the image at offset " + std::to_string(off);
      return false;
    }
    auto* p = static_cast<uint8_t*>(dst);
    while (len > 0) {
      const uint64_t unit = off / unit_;
      size_t i = first_at_or_after(unit);
      uint64_t n;
      if (i < extents_.size() && extents_[i].first <= unit) {  // stored
        const uint64_t end = (extents_[i].first + extents_[i].count) * unit_;
        n = std::min<uint64_t>(len, end - off);
        const uint64_t from =
            base_ + (stored_at_[i] + unit - extents_[i].first) * unit_ + off % unit_;
        if (!parent_.read(from, p, static_cast<size_t>(n), error)) return false;
      } else {  // zeros up to the next stored unit
        const uint64_t end = i < extents_.size() ? extents_[i].first * unit_ : size();
        n = std::min<uint64_t>(len, end - off);
        std::memset(p, 0, static_cast<size_t>(n));
      }
      p += n;
      off += n;
      len -= static_cast<size_t>(n);
    }
    return true;
  }
  bool is_hole(uint64_t off, uint64_t len) override { return hole_end(off) - off >= len; }
  uint64_t hole_end(uint64_t off) override {
    if (off >= size()) return off;
    const size_t i = first_at_or_after(off / unit_);
    if (i < extents_.size() && extents_[i].first * unit_ <= off) return off;  // stored
    return i < extents_.size() ? extents_[i].first * unit_ : size();
  }
  uint64_t max_records() override { return max_records_; }

 private:
  // The first extent that ends after `unit` (it holds `unit`, or lies after it).
  size_t first_at_or_after(uint64_t unit) const {
    auto it = std::upper_bound(
        extents_.begin(), extents_.end(), unit,
        [](uint64_t u, const sprof_run_extent& x) { return u < x.first + x.count; });
    return static_cast<size_t>(it - extents_.begin());
  }
  Source& parent_;
  uint64_t base_;
  uint64_t unit_;
  std::vector<sprof_run_extent> extents_;
  std::vector<uint64_t> stored_at_;  // each extent's first unit among the stored units
  uint64_t max_records_ = 0;
};

std::string num(uint64_t v) {
  return std::to_string(v);
}

std::string samples(uint64_t n) {
  return num(n) + (n == 1 ? " sample" : " samples");
}

// Reads the header `h` at offset 0 and turns it to the machine's byte order with `to_host`;
// `shorter` begins the error when the source is too short to hold it.
template <typename H>
bool read_header(Source& src, H* h, const char* shorter, void (*to_host)(H*), std::string* error) {
  if (src.size() < sizeof(H)) {
    *error = std::string(shorter) + ": " + num(src.size()) + " bytes, need " + num(sizeof(H));
    return false;
  }
  if (!src.read(0, h, sizeof(H), error)) return false;
  to_host(h);
  return true;
}

// Whether the 64 bytes at p are all zero.
bool zero64(const uint8_t* p) {
  uint64_t v[8];
  std::memcpy(v, p, sizeof v);
  return (v[0] | v[1] | v[2] | v[3] | v[4] | v[5] | v[6] | v[7]) == 0;
}

// Reads and checks region record `k` at `off`; on success fills *out and sets *next to the
// offset just past the record.
// `live`: the profile did not finish (still running, or killed), so its counters may be read
// mid-update: a system part read after its count may exceed it by the samples in between, and
// is clamped to the count. In a finished profile that is corruption, and an error.
bool read_region(Source& src, uint32_t k, uint64_t off, bool live, Region* out, uint64_t* next,
                 std::string* error) {
  const uint64_t size = src.size();
  std::string where = "region " + num(k);
  if (off % SPROF_PAGE != 0) {
    *error = where + ": record offset " + num(off) + " is not 4096-aligned";
    return false;
  }
  if (off > size || size - off < SPROF_PAGE) {
    *error = where + ": record truncated: need " + num(SPROF_PAGE) + " bytes at offset " +
             num(off) + ", file has " + num(size);
    return false;
  }
  sprof_region r;
  if (!src.read(off, &r, sizeof r, error)) {
    *error = where + ": " + *error;
    return false;
  }
  layout::region_le(&r);
  if (r.magic != SPROF_REGION_MAGIC) {
    *error = where + ": bad region magic at offset " + num(off);
    return false;
  }
  if (r.path_len > SPROF_PATH_MAX) {
    *error = where + ": bad path_len " + num(r.path_len) + " (max " + num(SPROF_PATH_MAX) + ")";
    return false;
  }
  std::string path(r.path, r.path_len);
  // (A path is a file's name: a NUL in it is not one, and a packed image stores every byte of
  // a path, which bounds the memory its records take by the bytes it stores.)
  if (path.find('\0') != std::string::npos) {
    *error = where + ": path holds a NUL byte at " + num(path.find('\0'));
    return false;
  }
  where += " (" + path + ")";
  auto fail = [&](const std::string& what) {
    *error = where + ": " + what;
    return false;
  };
  if (r.build_id_len > SPROF_BUILD_ID_MAX)
    return fail("bad build_id_len " + num(r.build_id_len) + " (max " + num(SPROF_BUILD_ID_MAX) +
                ")");
  if (r.counter_width != 2 && r.counter_width != 4 && r.counter_width != 8)
    return fail("bad counter_width " + num(r.counter_width) + " (must be 2, 4 or 8)");
  if (r.bin_size == 0) return fail("bad bin_size 0");
  if (r.start >= r.end)
    return fail("bad address range: start " + num(r.start) + " >= end " + num(r.end));
  const uint64_t span = r.end - r.start;
  const uint64_t want_bins = layout::nbins_for(span, r.bin_size);
  if (r.nbins != want_bins)
    return fail("bad nbins " + num(r.nbins) + " (range of " + num(span) + " bytes in bins of " +
                num(r.bin_size) + " needs " + num(want_bins) + ")");
  if (r.nbins > UINT64_MAX / r.counter_width)
    return fail("nbins " + num(r.nbins) + " x counter_width " + num(r.counter_width) +
                " overflows");
  const uint64_t bytes = r.nbins * r.counter_width;
  if (!layout::fits(r.nbins, r.counter_width))
    return fail("counters too large: " + num(bytes) + " bytes");
  const bool system = (r.flags & SPROF_R_SYSTEM) != 0;
  const layout::RegionShape shape = layout::shape_of(r.nbins, r.counter_width, system);
  const uint64_t padded = shape.array_bytes;
  if (r.record_size < SPROF_PAGE || r.record_size % SPROF_PAGE != 0)
    return fail("bad record_size " + num(r.record_size) + " (must be a multiple of 4096, >= 4096)");
  if (off > UINT64_MAX - SPROF_PAGE || r.counters_offset != off + SPROF_PAGE)
    return fail("bad counters_offset " + num(r.counters_offset) + " (expected " +
                num(off + SPROF_PAGE) + ")");
  // Sizes are checked against the file before anything is read or allocated: a region that
  // claims more counters than the file holds is an error, whatever it claims.
  if (size - off - SPROF_PAGE < padded)
    return fail("counters truncated: need " + num(padded) + " bytes at offset " +
                num(r.counters_offset) + ", file has " + num(size) + " (the region claims " +
                num(r.nbins) + " counters of " + num(r.counter_width) +
                " bytes, more than the file holds)");
  const uint64_t system_offset = r.system_offset;
  if (!system) {
    if (r.record_size != shape.record_size)
      return fail("bad record_size " + num(r.record_size) + " (" + num(r.nbins) + " counters of " +
                  num(r.counter_width) + " bytes need " + num(shape.record_size) + ")");
  } else {
    // The system array: 4096-aligned, after the counters, inside the record and the file.
    if (system_offset % SPROF_PAGE != 0 || system_offset < r.counters_offset + padded ||
        system_offset - off > r.record_size || r.record_size - (system_offset - off) < padded)
      return fail("bad system_offset " + num(system_offset) + " (must be 4096-aligned, after the " +
                  num(padded) + " bytes of counters at " + num(r.counters_offset) +
                  " and inside the record of " + num(r.record_size) + " bytes at " + num(off) +
                  ")");
  }
  if (r.record_size > size - off)
    return fail("record truncated: record_size " + num(r.record_size) + " at offset " + num(off) +
                ", file has " + num(size));

  out->path = std::move(path);
  out->build_id.assign(r.build_id, r.build_id + r.build_id_len);
  out->flags = r.flags;
  out->start = r.start;
  out->end = r.end;
  out->load_bias = r.load_bias;
  out->file_offset = r.file_offset;
  out->bin_size = r.bin_size;
  out->counter_width = r.counter_width;
  out->load_ns = r.load_ns;
  out->unload_ns = r.unload_ns;
  out->bins.clear();

  // Stream the counters through a bounded buffer, keeping only the non-zero bins; holes of a
  // sparse file are skipped without reading. Memory follows the non-zero bins. The chunk is
  // what one sample's page of counters costs to read and scan when the rest is a hole: with
  // 1-byte bins a short process's few samples touch a few pages of megabytes of counters, and
  // 1 MB chunks made `sprofil record` of a shell loop (2,000 processes) spend 24 s of CPU
  // reading zeros at the end; 64 KB chunks cost one lseek each where the file is sparse.
  constexpr uint64_t kChunk = 1u << 16;  // a multiple of every counter width
  std::vector<uint8_t> buf(std::min<uint64_t>(kChunk, bytes));
  std::vector<uint8_t> sys;
  if (system) sys.resize(buf.size());
  const uint32_t w = r.counter_width;
  uint64_t done = 0;
  while (done < bytes) {
    const uint64_t n = std::min<uint64_t>(kChunk, bytes - done);
    const bool sys_hole = !system || src.is_hole(system_offset + done, n);
    if (src.is_hole(r.counters_offset + done, n)) {  // sparse counters: all zero
      if (sys_hole) {  // the whole of both holes at once (whole chunks: counters stay aligned)
        uint64_t to = src.hole_end(r.counters_offset + done) - r.counters_offset;
        if (system) to = std::min(to, src.hole_end(system_offset + done) - system_offset);
        done = std::max(done + n, std::min(bytes, to - to % kChunk));
        continue;
      }
      {  // system parts of bins without a count?
        if (!src.read(system_offset + done, sys.data(), n, error)) return fail(*error);
        for (uint64_t i = 0; i < n / w && !live; ++i)
          if (const uint64_t s = layout::load_counter(sys.data() + w * i, w); s != 0)
            return fail("bin " + num(done / w + i) + ": system count " + num(s) +
                        " exceeds its count 0");
      }
      done += n;
      continue;
    }
    if (!src.read(r.counters_offset + done, buf.data(), n, error)) return fail(*error);
    if (!sys_hole && !src.read(system_offset + done, sys.data(), n, error)) return fail(*error);
    const uint64_t first = done / w;
    for (uint64_t i = 0; i < n / w; ++i) {
      // Most of a page with data is still zero: 64 bytes of zero counters (and system parts)
      // are skipped at once.
      if ((w * i) % 64 == 0 && n - w * i >= 64 && zero64(buf.data() + w * i) &&
          (sys_hole || zero64(sys.data() + w * i))) {
        i += 64 / w - 1;
        continue;
      }
      const uint64_t c = layout::load_counter(buf.data() + w * i, w);
      uint64_t s = sys_hole ? 0 : layout::load_counter(sys.data() + w * i, w);
      if (s > c && live) s = c;
      if (s > c)
        return fail("bin " + num(first + i) + ": system count " + num(s) + " exceeds its count " +
                    num(c));
      if (c != 0) out->bins.push_back(Region::Bin{first + i, c, s});
    }
    done += n;
  }
  *next = off + r.record_size;
  return true;
}

bool parse_run(Source& src, Profile* out, std::string* error);

// The first 8 bytes: a v1 profile, a run profile, or neither.
enum class Kind { kV1, kRun, kNone };
Kind kind_of(Source& src) {
  char magic[8];
  std::string ignored;
  if (src.size() < sizeof magic || !src.read(0, magic, sizeof magic, &ignored)) return Kind::kNone;
  if (std::memcmp(magic, SPROF_MAGIC, sizeof magic) == 0) return Kind::kV1;
  if (std::memcmp(magic, SPROF_RUN_MAGIC, sizeof magic) == 0) return Kind::kRun;
  return Kind::kNone;
}

bool parse_v1(Source& src, Profile* out, std::string* error);

bool parse(Source& src, Profile* out, std::string* error) {
  if (src.size() == 0) {
    *error = "empty file (not a sprofil profile)";
    return false;
  }
  switch (kind_of(src)) {
    case Kind::kRun:
      return parse_run(src, out, error);
    case Kind::kV1:
      return parse_v1(src, out, error);
    case Kind::kNone:
      break;
  }
  *error = "bad magic: not a sprofil profile (no SPROFIL or SPRFRUN at offset 0";
  if (src.size() < sizeof(sprof_header))
    *error +=
        "; " + num(src.size()) + " bytes, shorter than the header of " + num(sizeof(sprof_header));
  *error += ")";
  return false;
}

bool parse_v1(Source& src, Profile* out, std::string* error) {
  sprof_header h;
  if (!read_header(src, &h, "file is shorter than the header", layout::header_le, error))
    return false;
  const uint64_t size = src.size();
  if (std::memcmp(h.magic, SPROF_MAGIC, sizeof h.magic) != 0) {
    *error = "bad magic: not a .sprof profile";
    return false;
  }
  if (h.version != SPROF_VERSION) {
    *error = h.version > SPROF_VERSION
                 ? "unsupported version " + num(h.version) + " (this sprofil reads version " +
                       num(SPROF_VERSION) + "; a newer sprofil is needed)"
                 : "unsupported version " + num(h.version) + " (this sprofil reads version " +
                       num(SPROF_VERSION) + ")";
    return false;
  }
  if (h.header_size != SPROF_PAGE) {
    *error = "bad header_size " + num(h.header_size) + " (expected " + num(SPROF_PAGE) + ")";
    return false;
  }
  if (h.clock >= SPROF_CLOCK_COUNT) {
    *error = "bad clock value " + num(h.clock);
    return false;
  }
  if (h.cmdline_len > SPROF_CMDLINE_MAX) {
    *error = "bad cmdline_len " + num(h.cmdline_len) + " (max " + num(SPROF_CMDLINE_MAX) + ")";
    return false;
  }
  if (h.regions_end > size) {
    *error = "regions_end " + num(h.regions_end) + " is past the end of the file (" + num(size) +
             " bytes)";
    return false;
  }
  // Each record takes at least two pages of the image and is itself data (Source::max_records).
  const uint64_t max_regions =
      std::min((size - SPROF_PAGE) / layout::kMinRecord, src.max_records());
  if (h.region_count > max_regions) {
    *error = "region_count " + num(h.region_count) + " cannot fit in a file of " + num(size) +
             " bytes (at most " + num(max_regions) + ")";
    return false;
  }

  Profile p;
  p.version = h.version;
  p.flags = h.flags;
  p.clock = static_cast<Clock>(h.clock);
  p.requested_hz = h.requested_hz;
  p.tick_ns = h.tick_ns;
  p.effective_hz = static_cast<double>(h.effective_hz_milli) / 1000.0;
  p.start_ns = h.start_ns;
  p.end_ns = h.end_ns;
  p.cpu_ns = h.cpu_ns;
  p.start_cpu_ns = h.start_cpu_ns;
  p.pid = h.pid;
  p.ppid = h.ppid;
  p.overflow = h.overflow;
  p.delivered = h.delivered;
  p.lost = h.lost;
  p.comm.assign(h.comm, strnlen(h.comm, sizeof h.comm));
  std::string_view cmd(h.cmdline, h.cmdline_len);
  while (!cmd.empty()) {
    size_t nul = cmd.find('\0');
    if (nul == std::string_view::npos) {  // last argument without its NUL: keep it
      p.argv.emplace_back(cmd);
      break;
    }
    p.argv.emplace_back(cmd.substr(0, nul));
    cmd.remove_prefix(nul + 1);
  }

  p.regions.resize(h.region_count);
  uint64_t off = h.header_size;
  for (uint32_t k = 0; k < h.region_count; ++k) {
    if (!read_region(src, k, off, (h.flags & SPROF_F_FINISHED) == 0, &p.regions[k], &off, error))
      return false;
  }
  if (h.region_count > 0 && h.regions_end < off) {
    *error = "regions_end " + num(h.regions_end) + " is before the end of the " +
             num(h.region_count) + " committed region records (" + num(off) + ")";
    return false;
  }
  // A process killed (SIGKILL) while its handler recorded a sample: the counts hold it, the
  // delivered tally (raised last: engine.cpp, Table::record) not yet.
  if ((h.flags & SPROF_F_FINISHED) == 0) {
    const uint64_t held = sat_add(p.total_samples(), p.lost);
    if (held > p.delivered) p.delivered = held;
  }
  p.processes.push_back(process_of(p));
  *out = std::move(p);
  return true;
}

// Reads and checks a packed entry's extent table (version 2 or 3): it and the units it counts
// fill the entry's stored bytes exactly; the extents are sorted, do not overlap and lie inside
// the image.
bool read_extents(Source& src, uint32_t version, const sprof_run_process& e,
                  const std::string& where, std::vector<sprof_run_extent>* out,
                  std::string* error) {
  const uint64_t unit = layout::run_unit(version);
  const uint64_t table = layout::run_table_bytes(version, e.extent_count);
  if (e.extent_count == 0 || table > e.stored_size) {
    *error = where + ": bad extent_count " + num(e.extent_count) + " for " + num(e.stored_size) +
             " stored bytes";
    return false;
  }
  out->resize(e.extent_count);
  if (!src.read(e.image_offset, out->data(), out->size() * sizeof(sprof_run_extent), error)) {
    *error = where + ": " + *error;
    return false;
  }
  const uint64_t image_units = e.image_size / unit;
  const std::string units = unit == SPROF_PAGE ? "pages" : "units";
  uint64_t next = 0, stored = 0;
  for (size_t k = 0; k < out->size(); ++k) {
    sprof_run_extent& x = (*out)[k];
    layout::run_extent_le(&x);
    if (x.count == 0 || x.first < next || x.first >= image_units ||
        x.count > image_units - x.first) {
      *error = where + ": bad extent " + num(k) + " (" + units + " " + num(x.first) + " to " +
               num(x.first + x.count) + " of an image of " + num(image_units) + " " + units +
               "; extents must be sorted, not overlap and not be empty)";
      return false;
    }
    next = x.first + x.count;
    stored += x.count;  // at most image_units: no overflow
  }
  if (stored != (e.stored_size - table) / unit) {
    *error = where + ": the extents hold " + num(stored) + " " + units + ", the entry stores " +
             num((e.stored_size - table) / unit);
    return false;
  }
  return true;
}

bool parse_run(Source& src, Profile* out, std::string* error) {
  const uint64_t size = src.size();
  sprof_run_header h;
  if (!read_header(src, &h, "run profile shorter than its header", layout::run_header_le, error))
    return false;
  if (h.version == 0 || h.version > SPROF_RUN_VERSION) {
    *error = "unsupported run profile version " + num(h.version) + " (this sprofil reads " +
             num(SPROF_RUN_VERSION_FULL) + " to " + num(SPROF_RUN_VERSION) +
             (h.version > SPROF_RUN_VERSION ? "; a newer sprofil is needed)" : ")");
    return false;
  }
  const bool packed = h.version != SPROF_RUN_VERSION_FULL;
  // An entry's alignment and the least it stores: an image of two pages (version 1), its
  // extent table's page and a page (version 2), an extent and a unit (version 3).
  const uint64_t align = packed ? layout::run_unit(h.version) : SPROF_PAGE;
  const uint64_t least = packed
                             ? layout::run_table_bytes(h.version, 1) + layout::run_unit(h.version)
                             : layout::kMinImage;
  if (h.header_size != SPROF_PAGE || h.table_offset != SPROF_PAGE) {
    *error = "bad run header: header_size " + num(h.header_size) + ", table_offset " +
             num(h.table_offset) + " (both must be 4096)";
    return false;
  }
  if (h.process_count == 0) {
    *error = "run profile holds no process";
    return false;
  }
  // Each process needs its table entry and the least an image stores.
  const uint64_t table_bytes = uint64_t{h.process_count} * SPROF_RUN_ENTRY;
  const uint64_t table_end = SPROF_PAGE + layout::page_round(table_bytes);
  if (table_end > size || (size - table_end) / least < h.process_count) {
    *error = "process_count " + num(h.process_count) + " cannot fit in a file of " + num(size) +
             " bytes";
    return false;
  }
  std::vector<Profile> parts(h.process_count);
  std::vector<std::string> names(h.process_count);
  std::vector<std::string> comms(h.process_count);
  uint64_t images_end = 0;
  for (uint32_t i = 0; i < h.process_count; ++i) {
    sprof_run_process e;
    const std::string where = "process " + num(i);
    if (!src.read(SPROF_PAGE + uint64_t{i} * SPROF_RUN_ENTRY, &e, sizeof e, error)) {
      *error = where + ": " + *error;
      return false;
    }
    layout::run_process_le(&e);
    // What the entry takes of the file: the image (version 1), or its extent table and stored
    // units (versions 2 and 3).
    const uint64_t stored = packed ? e.stored_size : e.image_size;
    if (e.image_offset % align != 0 || e.image_offset < table_end || e.image_offset > size ||
        stored > size - e.image_offset || stored % align != 0 || e.image_size % SPROF_PAGE != 0 ||
        e.image_size < layout::kMinImage) {
      *error = where + ": bad image at offset " + num(e.image_offset) + ", size " +
               num(e.image_size) + (packed ? ", stored in " + num(stored) + " bytes" : "") +
               " (file has " + num(size) + " bytes)";
      return false;
    }
    // Images follow one another without overlap (as the writer lays them out): a table that
    // pointed many entries at one image would multiply its memory.
    if (e.image_offset < images_end) {
      *error = where + ": image at offset " + num(e.image_offset) +
               " overlaps the previous process's image (which ends at " + num(images_end) + ")";
      return false;
    }
    images_end = e.image_offset + stored;
    std::vector<sprof_run_extent> extents;
    if (packed && !read_extents(src, h.version, e, where, &extents, error)) return false;
    SubSource sub(src, e.image_offset, e.image_size);
    const uint64_t units_at = e.image_offset + layout::run_table_bytes(h.version, extents.size());
    PackedSource pack(src, units_at, e.image_size, layout::run_unit(h.version), std::move(extents));
    Source& image = packed ? static_cast<Source&>(pack) : sub;
    if (kind_of(image) != Kind::kV1 || !parse_v1(image, &parts[i], error)) {
      if (kind_of(image) != Kind::kV1) *error = "no v1 image (bad magic)";
      *error = where + " (pid " + std::to_string(e.pid) + "): " + *error;
      return false;
    }
    if (parts[i].pid != e.pid || parts[i].ppid != e.ppid) {
      *error = where + ": the table says pid " + std::to_string(e.pid) + ", its image pid " +
               std::to_string(parts[i].pid);
      return false;
    }
    names[i].assign(e.name, strnlen(e.name, sizeof e.name));
    comms[i].assign(e.comm, strnlen(e.comm, sizeof e.comm));
  }
  Profile p = combine_processes(std::move(parts), names);
  for (uint32_t i = 0; i < h.process_count; ++i) p.processes[i].comm = comms[i];
  p.run_cpu_ns = h.run_cpu_ns;
  p.dropped_processes = h.dropped_processes;
  p.run_start_ns = h.start_ns;
  p.run_end_ns = h.end_ns;
  p.exit_status = h.exit_status;
  p.throttled = h.throttled;
  p.unsampled_threads = h.unsampled_threads;
  p.unsampled_thread_ticks = h.unsampled_thread_ticks;
  p.unsampled_processes = h.unsampled_processes;
  p.unsampled_process_ticks = h.unsampled_process_ticks;
  *out = std::move(p);
  (void)samples;
  return true;
}

}  // namespace

bool parse_profile(const uint8_t* data, size_t size, Profile* out, std::string* error) {
  std::string scratch;
  if (!error) error = &scratch;
  if (!data && size != 0) {
    *error = "no data";
    return false;
  }
  MemorySource src(data, size);
  return parse(src, out, error);
}

namespace {

// The profile file at `path` opened for reading: a regular file (O_NONBLOCK: opening a FIFO
// must not wait for a writer; anything not regular is refused), its size in *size. -1 with
// *error where it is not.
int open_regular(const std::string& path, int flags, uint64_t* size, std::string* error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | flags);
  if (fd < 0) {
    *error = std::string("cannot open: ") + std::strerror(errno);
    return -1;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    *error = std::string("cannot stat: ") + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = S_ISDIR(st.st_mode)    ? "not a regular file (a directory)"
             : S_ISFIFO(st.st_mode) ? "not a regular file (a FIFO; profiles are regular files)"
                                    : "not a regular file (profiles are regular files)";
    ::close(fd);
    return -1;
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

bool read_profile(const std::string& path, Profile* out, std::string* error) {
  std::string scratch;
  if (!error) error = &scratch;
  uint64_t size = 0;
  const int fd = open_regular(path, 0, &size, error);
  if (fd < 0) return false;
  // No readahead: the counters are read a chunk at a time where the file has data, and most
  // of a profile's pages are reserved but unwritten (the agent's posix_fallocate). A read
  // made the kernel read ahead up to the device's read_ahead_kb (8 MB here) past it, zeroing
  // page after page of those extents: `sprofil record` of a shell loop spent 10-20 ms of
  // system time per process at the end of the run in that memset (bench/process_loop.sh).
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  FileSource src(fd, size);
  bool ok = parse(src, out, error);
  ::close(fd);
  return ok;
}

bool starts_as_profile(const std::string& path) {
  std::string ignored;
  uint64_t size = 0;
  const int fd = open_regular(path, O_NOFOLLOW, &size, &ignored);
  if (fd < 0) return false;
  FileSource src(fd, size);
  const bool yes = kind_of(src) != Kind::kNone;
  ::close(fd);
  return yes;
}

}  // namespace sprofil::profile
