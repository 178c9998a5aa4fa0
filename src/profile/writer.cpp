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
#include <functional>

#include "profile/sprof_format.h"

namespace sprofil::profile {

namespace {

std::string num(uint64_t v) {
  return std::to_string(v);
}

void store_le(uint8_t* p, uint64_t v, uint32_t width) {
  for (uint32_t i = 0; i < width; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

template <typename T>
T to_le(T v) {
  uint8_t b[sizeof(T)];
  store_le(b, static_cast<uint64_t>(v), sizeof(T));
  T r;
  std::memcpy(&r, b, sizeof(T));
  return r;
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

// The layout of one region in the output file.
struct Planned {
  uint32_t width;
  uint64_t bytes;   // nbins * width
  uint64_t offset;  // of the record
  uint64_t record_size;
};

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
    const uint64_t span = r.end - r.start;
    const uint64_t nbins = span / r.bin_size + (span % r.bin_size != 0 ? 1 : 0);
    if (r.counts.size() != nbins) {
      *error = where + num(r.counts.size()) + " counts for " + num(nbins) + " bins";
      return false;
    }
    uint32_t width = r.counter_width;
    const uint64_t limit = max_for_width(width);
    if (std::any_of(r.counts.begin(), r.counts.end(), [&](uint64_t c) { return c > limit; }))
      width = 8;
    const uint64_t bytes = nbins * width;  // nbins <= counts.size(): no overflow in practice
    const uint64_t padded = (bytes + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
    out->push_back(Planned{width, bytes, off, SPROF_PAGE + padded});
    off += SPROF_PAGE + padded;
  }
  *total = off;
  return true;
}

// Writes the v1 image of `p` at file offset `base` (its internal offsets relative to base).
bool write_body(int fd, const Profile& p, const std::vector<Planned>& layout, uint64_t total,
                uint64_t base, std::string* error) {
  sprof_header h{};
  std::memcpy(h.magic, SPROF_MAGIC, sizeof h.magic);
  h.version = to_le<uint32_t>(SPROF_VERSION);
  h.header_size = to_le<uint32_t>(SPROF_PAGE);
  h.flags = to_le(p.flags);
  h.clock = to_le(static_cast<uint32_t>(p.clock));
  h.requested_hz = to_le(p.requested_hz);
  h.region_count = to_le(static_cast<uint32_t>(p.regions.size()));
  h.tick_ns = to_le(p.tick_ns);
  double milli = p.effective_hz * 1000.0;
  uint64_t milli_u = 0;
  if (std::isfinite(milli) && milli > 0)
    milli_u = milli >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(std::llround(milli));
  h.effective_hz_milli = to_le(milli_u);
  h.start_ns = to_le(p.start_ns);
  h.end_ns = to_le(p.end_ns);
  h.cpu_ns = to_le(p.cpu_ns);
  h.pid = to_le(p.pid);
  h.ppid = to_le(p.ppid);
  h.regions_end = to_le(total);
  h.overflow = to_le(p.overflow);
  h.delivered = to_le(p.delivered);
  h.lost = to_le(p.lost);
  size_t len = 0;
  for (const std::string& a : p.argv) {
    if (a.find('\0') != std::string::npos) {
      *error = "argument contains a NUL byte";
      return false;
    }
    if (a.size() + 1 > SPROF_CMDLINE_MAX - len) {
      *error = "command line longer than " + num(SPROF_CMDLINE_MAX) + " bytes";
      return false;
    }
    std::memcpy(h.cmdline + len, a.data(), a.size());
    len += a.size() + 1;  // the NUL is already there
  }
  h.cmdline_len = to_le(static_cast<uint32_t>(len));
  if (!pwrite_all(fd, &h, sizeof h, base, error)) return false;

  std::vector<uint8_t> buf;
  for (size_t k = 0; k < p.regions.size(); ++k) {
    const Region& r = p.regions[k];
    const Planned& l = layout[k];
    sprof_region rec{};
    rec.magic = to_le<uint32_t>(SPROF_REGION_MAGIC);
    rec.flags = to_le(r.flags);
    rec.record_size = to_le(l.record_size);
    rec.counters_offset = to_le(l.offset + SPROF_PAGE);
    rec.start = to_le(r.start);
    rec.end = to_le(r.end);
    rec.load_bias = to_le(r.load_bias);
    rec.file_offset = to_le(r.file_offset);
    rec.nbins = to_le(static_cast<uint64_t>(r.counts.size()));
    rec.bin_size = to_le(r.bin_size);
    rec.counter_width = to_le(l.width);
    rec.load_ns = to_le(r.load_ns);
    rec.unload_ns = to_le(r.unload_ns);
    rec.build_id_len = to_le(static_cast<uint32_t>(r.build_id.size()));
    rec.path_len = to_le(static_cast<uint32_t>(r.path.size()));
    std::copy(r.build_id.begin(), r.build_id.end(), rec.build_id);
    std::memcpy(rec.path, r.path.data(), r.path.size());
    if (!pwrite_all(fd, &rec, sizeof rec, base + l.offset, error)) return false;

    // Counters in chunks of whole pages; all-zero pages stay holes (ftruncate below).
    constexpr uint64_t kChunkBins = 1u << 16;
    const uint64_t nbins = r.counts.size();
    for (uint64_t first = 0; first < nbins; first += kChunkBins) {
      const uint64_t n = std::min(kChunkBins, nbins - first);
      buf.assign(n * l.width, 0);
      bool any = false;
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t c = r.counts[first + i];
        if (c) {
          any = true;
          store_le(buf.data() + i * l.width, c, l.width);
        }
      }
      if (!any) continue;
      // Write only the runs of pages holding a non-zero counter.
      const uint64_t at0 = base + l.offset + SPROF_PAGE + first * l.width;
      auto zero_page = [&](size_t at) {
        const size_t end = std::min<size_t>(at + SPROF_PAGE, buf.size());
        return std::all_of(buf.begin() + static_cast<ptrdiff_t>(at),
                           buf.begin() + static_cast<ptrdiff_t>(end),
                           [](uint8_t b) { return b == 0; });
      };
      for (size_t at = 0; at < buf.size();) {
        if (zero_page(at)) {
          at += SPROF_PAGE;
          continue;
        }
        size_t run_end = at + SPROF_PAGE;
        while (run_end < buf.size() && !zero_page(run_end)) run_end += SPROF_PAGE;
        run_end = std::min(run_end, buf.size());
        if (!pwrite_all(fd, buf.data() + at, run_end - at, at0 + at, error)) return false;
        at = run_end;
      }
    }
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

bool write_run(const Profile& p, const std::string& path, std::string* error) {
  if (p.processes.empty()) {
    *error = "a run profile needs at least one process";
    return false;
  }
  if (p.processes.size() > UINT32_MAX / SPROF_RUN_ENTRY) {
    *error = "too many processes: " + num(p.processes.size());
    return false;
  }
  for (const Region& r : p.regions)
    if (r.process >= p.processes.size()) {
      *error = "region " + r.path + " names process " + num(r.process) + " of " +
               num(p.processes.size());
      return false;
    }
  struct Image {
    Profile profile;
    std::vector<Planned> layout;
    uint64_t size = 0, offset = 0;
  };
  std::vector<Image> images(p.processes.size());
  const uint64_t table_bytes = p.processes.size() * uint64_t{SPROF_RUN_ENTRY};
  uint64_t off = SPROF_PAGE + (table_bytes + SPROF_PAGE - 1) / SPROF_PAGE * SPROF_PAGE;
  for (size_t i = 0; i < images.size(); ++i) {
    Image& im = images[i];
    im.profile = process_image(p, i);
    if (!plan(im.profile, &im.layout, &im.size, error)) {
      *error = "process " + num(i) + ": " + *error;
      return false;
    }
    // Even an image without regions takes two pages, as the reader expects.
    im.size = std::max<uint64_t>(im.size, 2 * SPROF_PAGE);
    im.offset = off;
    off += im.size;
  }
  const uint64_t total = off;

  sprof_run_header h{};
  std::memcpy(h.magic, SPROF_RUN_MAGIC, sizeof h.magic);
  h.version = to_le<uint32_t>(SPROF_RUN_VERSION);
  h.header_size = to_le<uint32_t>(SPROF_PAGE);
  h.process_count = to_le(static_cast<uint32_t>(p.processes.size()));
  h.table_offset = to_le<uint64_t>(SPROF_PAGE);
  h.run_cpu_ns = to_le(p.run_cpu_ns);
  h.dropped_processes = to_le(p.dropped_processes);
  h.start_ns = to_le(p.run_start_ns);
  h.end_ns = to_le(p.run_end_ns);
  h.exit_status = to_le(p.exit_status);
  size_t len = 0;
  for (const std::string& a : p.argv) {
    if (a.find('\0') != std::string::npos || a.size() + 1 > SPROF_CMDLINE_MAX - len) break;
    std::memcpy(h.cmdline + len, a.data(), a.size());
    len += a.size() + 1;
  }
  h.cmdline_len = to_le(static_cast<uint32_t>(len));
  std::vector<sprof_run_process> table(p.processes.size());
  for (size_t i = 0; i < table.size(); ++i) {
    const Process& pr = p.processes[i];
    sprof_run_process& e = table[i];
    std::memset(&e, 0, sizeof e);
    e.pid = to_le(pr.pid);
    e.ppid = to_le(pr.ppid);
    e.image_offset = to_le(images[i].offset);
    e.image_size = to_le(images[i].size);
    copy_name(e.comm, sizeof e.comm, pr.comm);
    copy_name(e.name, sizeof e.name, pr.name);
  }
  auto body = [&](int fd, std::string* err) {
    if (!pwrite_all(fd, &h, sizeof h, 0, err) ||
        !pwrite_all(fd, table.data(), table.size() * sizeof table[0], SPROF_PAGE, err))
      return false;
    for (const Image& im : images)
      if (!write_body(fd, im.profile, im.layout, im.size, im.offset, err)) return false;
    return set_size(fd, total, err);
  };
  return write_output(
      path, [&](int out_fd, std::string* err) { return seekable(out_fd, body, err); }, error);
}

}  // namespace

bool write_profile(const Profile& p, const std::string& path, std::string* error) {
  std::string scratch;
  if (!error) error = &scratch;
  if (p.run) return write_run(p, path, error);
  std::vector<Planned> layout;
  uint64_t total = 0;
  if (!plan(p, &layout, &total, error)) return false;
  return write_output(
      path,
      [&](int out_fd, std::string* e) {
        return seekable(
            out_fd,
            [&](int fd, std::string* e2) {
              return write_body(fd, p, layout, total, 0, e2) && set_size(fd, total, e2);
            },
            e);
      },
      error);
}

}  // namespace sprofil::profile
