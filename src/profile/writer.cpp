#include "profile/writer.hpp"

#include "profile/output.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>

#include "format/layout.hpp"
#include "profile/reader.hpp"

namespace sprofil::profile {

namespace {

std::string num(uint64_t v) {
  return std::to_string(v);
}

uint64_t max_for_width(uint32_t width) {
  return width >= 8 ? UINT64_MAX : (uint64_t{1} << (8 * width)) - 1;
}

bool pwrite_all(int fd, const void* data, size_t len, uint64_t off, std::string* error) {
  auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    ssize_t n = ::pwrite(fd, p, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("write failed: ") + std::strerror(errno);
      return false;
    }
    p += n;
    off += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return true;
}

// Where a v1 image's bytes go: a file at their offsets, or (a packed run image) pages kept in
// memory.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual bool put(const void* data, size_t len, uint64_t off, std::string* error) = 0;
};

class FileSink final : public Sink {
 public:
  explicit FileSink(int fd) : fd_(fd) {}
  bool put(const void* data, size_t len, uint64_t off, std::string* error) override {
    return pwrite_all(fd_, data, len, off, error);
  }

 private:
  int fd_;
};

// The pages written, by index (a packed run image, before it is packed).
class PageSink final : public Sink {
 public:
  bool put(const void* data, size_t len, uint64_t off, std::string*) override {
    auto* p = static_cast<const uint8_t*>(data);
    while (len > 0) {
      const uint64_t index = off / SPROF_PAGE, at = off % SPROF_PAGE;
      const size_t n = static_cast<size_t>(std::min<uint64_t>(len, SPROF_PAGE - at));
      std::vector<uint8_t>& page = pages_[index];
      page.resize(SPROF_PAGE);
      std::memcpy(page.data() + at, p, n);
      p += n;
      off += n;
      len -= n;
    }
    return true;
  }
  const std::map<uint64_t, std::vector<uint8_t>>& pages() const { return pages_; }

 private:
  std::map<uint64_t, std::vector<uint8_t>> pages_;
};

// One region in the output file: its counter width (widened to 8 where a count needs it),
// where its record is, and its shape (layout.hpp).
struct Planned {
  uint32_t width;
  uint64_t offset;
  layout::RegionShape shape;
};

// Writes one counter array of `l.width`-byte counters at `at`: only the pages that hold a
// non-zero value (the rest stay holes, so the cost follows the non-zero bins).
bool write_array(Sink& out, const Region& r, const Planned& l, uint64_t at, bool system,
                 std::string* error) {
  std::vector<uint8_t> page(SPROF_PAGE);
  uint64_t current = UINT64_MAX;  // the page being filled
  auto flush = [&]() {
    if (current == UINT64_MAX) return true;
    const uint64_t from = current * SPROF_PAGE;
    const uint64_t len = std::min<uint64_t>(SPROF_PAGE, l.shape.nbins * l.width - from);
    return out.put(page.data(), len, at + from, error);
  };
  for (const Region::Bin& b : r.bins) {
    const uint64_t v = system ? b.system : b.count;
    if (v == 0) continue;
    const uint64_t byte = b.index * l.width;
    if (byte / SPROF_PAGE != current) {
      if (!flush()) return false;
      current = byte / SPROF_PAGE;
      std::fill(page.begin(), page.end(), 0);
    }
    layout::store_counter(page.data() + byte % SPROF_PAGE, v, l.width);
  }
  return flush();
}

bool plan(const Profile& p, std::vector<Planned>* out, uint64_t* total, std::string* error) {
  uint64_t off = SPROF_PAGE;
  if (p.regions.size() > UINT32_MAX) {
    *error = "too many regions: " + num(p.regions.size());
    return false;
  }
  for (size_t k = 0; k < p.regions.size(); ++k) {
    const Region& r = p.regions[k];
    const std::string where = "region " + num(k) + " (" + r.path + "): ";
    if (r.path.size() > SPROF_PATH_MAX) {
      *error = where + "path longer than " + num(SPROF_PATH_MAX) + " bytes";
      return false;
    }
    if (r.build_id.size() > SPROF_BUILD_ID_MAX) {
      *error = where + "build-id longer than " + num(SPROF_BUILD_ID_MAX) + " bytes";
      return false;
    }
    if (r.counter_width != 2 && r.counter_width != 4 && r.counter_width != 8) {
      *error = where + "bad counter_width " + num(r.counter_width);
      return false;
    }
    if (r.bin_size == 0) {
      *error = where + "bad bin_size 0";
      return false;
    }
    if (r.start >= r.end) {
      *error = where + "bad address range: start " + num(r.start) + " >= end " + num(r.end);
      return false;
    }
    const uint64_t nbins = r.nbins();
    for (size_t i = 0; i < r.bins.size(); ++i) {
      const Region::Bin& b = r.bins[i];
      if (b.index >= nbins || (i > 0 && r.bins[i - 1].index >= b.index) || b.count == 0 ||
          b.system > b.count) {
        *error = where + "bad bin " + num(b.index) + " (count " + num(b.count) + ", system " +
                 num(b.system) + ") of " + num(nbins) +
                 " bins (bins must be sorted, non-zero, system <= count)";
        return false;
      }
    }
    uint32_t width = r.counter_width;
    if (r.max_count() > max_for_width(width)) width = 8;
    if (!layout::fits(nbins, width)) {
      *error = where + num(nbins) + " bins are too many to write";
      return false;
    }
    const layout::RegionShape shape = layout::shape_of(nbins, width, r.has_system());
    if (off > UINT64_MAX - shape.record_size) {
      *error = where + "the file would exceed 2^64 bytes";
      return false;
    }
    out->push_back(Planned{width, off, shape});
    off += shape.record_size;
  }
  *total = off;
  return true;
}

// The header's command line, one rule for a process image and a run: the arguments in order,
// each NUL-terminated, up to the first one that holds a NUL byte (it would split) or does not
// fit in SPROF_CMDLINE_MAX, as the agent cuts /proc/self/cmdline. It describes the profile;
// the counts are never refused for it.
std::string packed_cmdline(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (a.find('\0') != std::string::npos || a.size() + 1 > SPROF_CMDLINE_MAX - out.size()) break;
    out.append(a.data(), a.size() + 1);
  }
  return out;
}

// Writes the v1 image of `p` at offset `base` of `out` (its internal offsets relative to base).
bool write_body(Sink& out, const Profile& p, const std::vector<Planned>& planned, uint64_t total,
                uint64_t base, std::string* error) {
  const std::string cmdline = packed_cmdline(p.argv);
  layout::HeaderInfo hi;
  hi.flags = p.flags;
  hi.clock = static_cast<uint32_t>(p.clock);
  hi.tick_ns = p.tick_ns;
  hi.start_ns = p.start_ns;
  hi.pid = p.pid;
  hi.ppid = p.ppid;
  hi.cmdline = cmdline.data();
  hi.cmdline_len = static_cast<uint32_t>(cmdline.size());
  hi.comm = p.comm.empty() ? nullptr : p.comm.c_str();
  sprof_header h;
  layout::fill_header(&h, hi);
  h.requested_hz = p.requested_hz;  // the profile's own, not derived from tick_ns
  h.region_count = static_cast<uint32_t>(p.regions.size());
  double milli = p.effective_hz * 1000.0;
  if (std::isfinite(milli) && milli > 0)
    h.effective_hz_milli =
        milli >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(std::llround(milli));
  h.end_ns = p.end_ns;
  h.cpu_ns = p.cpu_ns;
  h.regions_end = total;
  h.overflow = p.overflow;
  h.delivered = p.delivered;
  h.lost = p.lost;
  layout::header_le(&h);
  if (!out.put(&h, sizeof h, base, error)) return false;

  for (size_t k = 0; k < p.regions.size(); ++k) {
    const Region& r = p.regions[k];
    const Planned& l = planned[k];
    layout::RegionInfo ri;
    ri.flags = r.flags;
    ri.start = r.start;
    ri.end = r.end;
    ri.load_bias = r.load_bias;
    ri.file_offset = r.file_offset;
    ri.bin_size = r.bin_size;
    ri.counter_width = l.width;
    ri.load_ns = r.load_ns;
    ri.unload_ns = r.unload_ns;
    ri.build_id = r.build_id.data();
    ri.build_id_len = static_cast<uint32_t>(r.build_id.size());
    ri.path = r.path.data();
    ri.path_len = static_cast<uint32_t>(r.path.size());
    sprof_region rec;
    layout::fill_region(&rec, l.shape, l.offset, ri);
    layout::region_le(&rec);
    const uint64_t at = base + l.offset;
    if (!out.put(&rec, sizeof rec, at, error)) return false;
    if (!write_array(out, r, l, at + l.shape.counters_at, false, error)) return false;
    if (l.shape.system_at && !write_array(out, r, l, at + l.shape.system_at, true, error))
      return false;
  }
  return true;
}

bool set_size(int fd, uint64_t total, std::string* error) {
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
    *error = std::string("cannot set the file size: ") + std::strerror(errno);
    return false;
  }
  return true;
}

void copy_name(char* dst, size_t cap, const std::string& s) {
  std::memcpy(dst, s.data(), std::min(cap - 1, s.size()));
}

// Runs `body` on fd if it is a regular file; else (a device such as /dev/null, a FIFO) on a
// private memory file whose bytes are then written to fd in order: the layout needs pwrite.
bool seekable(int fd, const std::function<bool(int, std::string*)>& body, std::string* error) {
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return body(fd, error);
  const int mem = ::memfd_create("sprofil-profile", MFD_CLOEXEC);
  if (mem < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return false;
  }
  bool ok = body(mem, error);
  std::vector<char> buf(1 << 16);
  for (off_t off = 0; ok;) {
    const ssize_t n = ::pread(mem, buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::string("read back: ") + std::strerror(errno);
      ok = false;
    }
    if (n <= 0) break;
    ok = write_all(fd, std::string_view(buf.data(), static_cast<size_t>(n)), error);
    off += n;
  }
  ::close(mem);
  return ok;
}

// A packed image's stored bytes: the units that write_body wrote and that hold data, and the
// extents that say where they go. Version 2 stores each page written, whole; version 3 each
// 8-byte unit that is not zero, and a lone zero unit between two stored ones too (its 8 bytes
// cost less than the 16 of one more extent).
struct Packed {
  std::vector<sprof_run_extent> extents;
  std::string units;
};

Packed pack(const PageSink& pages, uint64_t unit) {
  static_assert(SPROF_RUN_UNIT == sizeof(uint64_t), "a version 3 unit is one u64");
  Packed out;
  auto store = [&](uint64_t index, const uint8_t* bytes) {
    std::vector<sprof_run_extent>& x = out.extents;
    const uint64_t end = x.empty() ? 0 : x.back().first + x.back().count;
    if (!x.empty() && index == end) {
      ++x.back().count;
    } else if (!x.empty() && unit != SPROF_PAGE && index == end + 1) {
      x.back().count += 2;
      out.units.append(unit, '\0');
    } else {
      x.push_back(sprof_run_extent{index, 1});
    }
    out.units.append(reinterpret_cast<const char*>(bytes), unit);
  };
  for (const auto& [index, page] : pages.pages()) {
    if (unit == SPROF_PAGE) {
      store(index, page.data());
      continue;
    }
    // Eight units at a time: most of a page (a record's path, a page of counters) is zeros.
    constexpr uint64_t kBlock = 8;
    for (uint64_t k = 0; k < SPROF_PAGE / unit; k += kBlock) {
      uint64_t u[kBlock];
      std::memcpy(u, page.data() + k * unit, sizeof u);
      uint64_t any = 0;
      for (uint64_t v : u) any |= v;
      if (any == 0) continue;
      for (uint64_t j = 0; j < kBlock; ++j)
        if (u[j] != 0) store(index * (SPROF_PAGE / unit) + k + j, page.data() + (k + j) * unit);
    }
  }
  return out;
}

// Where a run container goes: out(body, error) runs body on the output's fd; `seek` tells
// that body writes at offsets (pwrite) rather than in order.
using Body = std::function<bool(int fd, std::string*)>;
using Output = std::function<bool(const Body& body, bool seek, std::string*)>;

bool write_run(const Profile& p, const Output& output, uint32_t version, std::string* error) {
  if (p.processes.empty()) {
    *error = "a run profile needs at least one process";
    return false;
  }
  if (p.processes.size() > UINT32_MAX / SPROF_RUN_ENTRY) {
    *error = "too many processes: " + num(p.processes.size());
    return false;
  }
  if (version < SPROF_RUN_VERSION_FULL || version > SPROF_RUN_VERSION) {
    *error = "cannot write run profile version " + num(version);
    return false;
  }
  const bool packed = version != SPROF_RUN_VERSION_FULL;
  for (const Region& r : p.regions)
    if (r.process >= p.processes.size()) {
      *error = "region " + r.path + " names process " + num(r.process) + " of " +
               num(p.processes.size());
      return false;
    }
  struct Image {
    Profile profile;
    std::vector<Planned> planned;
    uint64_t size = 0, offset = 0;
    Packed packed;        // packed: its stored units and their extents
    uint64_t stored = 0;  // the bytes at offset (packed: the extent table and the units)
  };
  std::vector<Image> images(p.processes.size());
  std::vector<Profile> profiles = process_images(p);
  const uint64_t table_bytes = p.processes.size() * uint64_t{SPROF_RUN_ENTRY};
  uint64_t off = SPROF_PAGE + layout::page_round(table_bytes);
  for (size_t i = 0; i < images.size(); ++i) {
    Image& im = images[i];
    im.profile = std::move(profiles[i]);
    if (!plan(im.profile, &im.planned, &im.size, error)) {
      *error = "process " + num(i) + ": " + *error;
      return false;
    }
    // Even an image without regions takes two pages, as the reader expects.
    im.size = std::max<uint64_t>(im.size, layout::kMinImage);
    im.offset = off;
    im.stored = im.size;
    if (packed) {
      // What the image writes: its header, its records and the pages of counters that hold a
      // count, of which the units with data are stored. The rest is zero and not stored.
      PageSink pages;
      if (!write_body(pages, im.profile, im.planned, im.size, 0, error)) return false;
      im.packed = pack(pages, layout::run_unit(version));
      im.stored =
          layout::run_table_bytes(version, im.packed.extents.size()) + im.packed.units.size();
    }
    off += im.stored;
  }
  const uint64_t total = off;

  sprof_run_header h{.version = version,
                     .header_size = SPROF_PAGE,
                     .process_count = static_cast<uint32_t>(p.processes.size()),
                     .table_offset = SPROF_PAGE,
                     .run_cpu_ns = p.run_cpu_ns,
                     .dropped_processes = p.dropped_processes,
                     .start_ns = p.run_start_ns,
                     .end_ns = p.run_end_ns,
                     .exit_status = p.exit_status,
                     .throttled = p.throttled,
                     .cmdline = {},
                     .unsampled_threads = p.unsampled_threads,
                     .unsampled_thread_ticks = p.unsampled_thread_ticks,
                     .unsampled_processes = p.unsampled_processes,
                     .unsampled_process_ticks = p.unsampled_process_ticks};
  std::memcpy(h.magic, SPROF_RUN_MAGIC, sizeof h.magic);
  const std::string cmdline = packed_cmdline(p.argv);
  std::memcpy(h.cmdline, cmdline.data(), cmdline.size());
  h.cmdline_len = static_cast<uint32_t>(cmdline.size());
  layout::run_header_le(&h);
  std::vector<sprof_run_process> table(p.processes.size());
  for (size_t i = 0; i < table.size(); ++i) {
    const Process& pr = p.processes[i];
    sprof_run_process& e = table[i];
    std::memset(&e, 0, sizeof e);
    e.pid = pr.pid;
    e.ppid = pr.ppid;
    e.image_offset = images[i].offset;
    e.image_size = images[i].size;
    if (packed) {
      e.stored_size = images[i].stored;
      e.extent_count = static_cast<uint32_t>(images[i].packed.extents.size());
    }
    copy_name(e.comm, sizeof e.comm, pr.comm);
    copy_name(e.name, sizeof e.name, pr.name);
    layout::run_process_le(&e);
  }
  if (!packed) {
    auto body = [&](int fd, std::string* err) {
      FileSink out(fd);
      if (!pwrite_all(fd, &h, sizeof h, 0, err) ||
          !pwrite_all(fd, table.data(), table.size() * sizeof table[0], SPROF_PAGE, err))
        return false;
      for (const Image& im : images)
        if (!write_body(out, im.profile, im.planned, im.size, im.offset, err)) return false;
      return set_size(fd, total, err);
    };
    return output(body, true, error);
  }
  // Packed: written in order.
  auto body = [&](int fd, std::string* err) {
    auto write_padded = [&](const void* data, size_t len, uint64_t padded) {
      std::string bytes(static_cast<const char*>(data), len);
      bytes.resize(static_cast<size_t>(padded), '\0');
      return write_all(fd, bytes, err);
    };
    if (!write_padded(&h, sizeof h, SPROF_PAGE) ||
        !write_padded(table.data(), table.size() * sizeof table[0],
                      layout::page_round(table.size() * sizeof table[0])))
      return false;
    for (Image& im : images) {
      std::vector<sprof_run_extent> ext = im.packed.extents;
      for (sprof_run_extent& x : ext) layout::run_extent_le(&x);
      if (!write_padded(ext.data(), ext.size() * sizeof ext[0],
                        layout::run_table_bytes(version, ext.size())) ||
          !write_all(fd, im.packed.units, err))
        return false;
    }
    return true;
  };
  return output(body, false, error);
}

}  // namespace

bool may_write_profile_at(const std::string& path, std::string* why) {
  struct stat st;
  if (named_descriptor(path) >= 0 || ::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return true;
  if (st.st_uid != ::geteuid() && ::geteuid() != 0) {
    // A sticky directory (/tmp) lets no one but the file's owner (or the directory's) replace
    // it: the rename at the end would fail, after the whole run.
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    struct stat d;
    if (::stat(parent.empty() ? "." : parent.c_str(), &d) == 0 && (d.st_mode & S_ISVTX) &&
        d.st_uid != ::geteuid()) {
      *why =
          "is another user's file in a sticky directory: it cannot be replaced (name another "
          "file)";
      return false;
    }
  }
  if (st.st_size == 0 || starts_as_profile(path)) return true;
  *why = "exists and is not a sprofil profile: not replacing it (remove it, or name another file)";
  return false;
}

bool write_profile(const Profile& p, const std::string& path, std::string* error,
                   uint32_t run_version) {
  std::string scratch;
  if (!error) error = &scratch;
  if (std::string why; !may_write_profile_at(path, &why)) {
    *error = why;
    errno = EEXIST;
    return false;
  }
  if (p.run) {
    const Output to_path = [&](const Body& body, bool seek, std::string* err) {
      if (!seek) return write_output(path, body, err);
      return write_output(
          path, [&](int fd, std::string* e) { return seekable(fd, body, e); }, err);
    };
    return write_run(p, to_path, run_version, error);
  }
  std::vector<Planned> planned;
  uint64_t total = 0;
  if (!plan(p, &planned, &total, error)) return false;
  return write_output(
      path,
      [&](int out_fd, std::string* e) {
        return seekable(
            out_fd,
            [&](int fd, std::string* e2) {
              FileSink out(fd);
              return write_body(out, p, planned, total, 0, e2) && set_size(fd, total, e2);
            },
            e);
      },
      error);
}

bool write_profile_fd(const Profile& p, int fd, std::string* error) {
  std::string scratch;
  if (!error) error = &scratch;
  if (p.run)
    return write_run(
        p, [&](const Body& body, bool, std::string* err) { return body(fd, err); },
        SPROF_RUN_VERSION, error);
  std::vector<Planned> planned;
  uint64_t total = 0;
  if (!plan(p, &planned, &total, error)) return false;
  FileSink out(fd);
  return write_body(out, p, planned, total, 0, error) && set_size(fd, total, error);
}

}  // namespace sprofil::profile
