// Helpers shared by the report and interop tests: the real symbol table and segments of a
// built binary (through nm and readelf, independent of the code under test), and synthetic
// Profiles whose counts sit at chosen addresses.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../common/process.hpp"
#include "format/sprof_format.h"
#include "profile/profile.hpp"

namespace sprofil::report_test {

// A scratch directory for the test process (each test is one under ctest), removed at its
// exit: the runs a test records and what it writes.
inline const std::string& temp_dir() {
  static const testproc::TempDir dir("sprofil_report");
  return dir.path();
}

inline std::string run(const std::string& cmd, int* status = nullptr) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  int rc = pclose(f);
  if (status != nullptr) *status = rc;
  return out;
}

// How a test strips a copy of a program (strip_copy): of every symbol but the dynamic ones,
// with its call-frame table kept (as `strip -s` leaves it, and as Debian ships its programs:
// its functions are named fun_<address>), or of that table too (its code is "[unknown]").
enum class Strip { kSymbols, kSymbolsAndFrames };

// `prog` stripped as `how` into temp_dir()/name: its path, or "" with *log saying why.
inline std::string strip_copy(const std::string& prog, const std::string& name, Strip how,
                              std::string* log) {
  const std::string copy = temp_dir() + "/" + name;
  const char* frames = how == Strip::kSymbolsAndFrames ? " -R .eh_frame_hdr -R .eh_frame" : "";
  int status = 0;
  *log = run(std::string("strip -s") + frames + " -o '" + copy + "' '" + prog + "' 2>&1", &status);
  return status == 0 ? copy : "";
}

struct NmSymbol {
  std::string name;  // demangled (nm -C)
  uint64_t addr = 0, size = 0;
};

// Defined text symbols with a size, by demangled name (link-time addresses).
inline std::map<std::string, NmSymbol> nm_functions(const std::string& path) {
  std::map<std::string, NmSymbol> out;
  std::istringstream in(run("nm -C -S --defined-only '" + path + "'"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string addr, size, type;
    if (!(ls >> addr >> size >> type)) continue;
    if (type != "T" && type != "t" && type != "W" && type != "w") continue;
    std::string name;
    std::getline(ls, name);
    name.erase(0, name.find_first_not_of(' '));
    NmSymbol s;
    s.name = name;
    s.addr = std::stoull(addr, nullptr, 16);
    s.size = std::stoull(size, nullptr, 16);
    if (s.size > 0) out[name] = s;
  }
  return out;
}

struct Segment {
  uint64_t offset = 0, vaddr = 0, memsz = 0;
};

// The executable PT_LOAD segment.
inline Segment exec_segment(const std::string& path) {
  std::istringstream in(run("readelf -lW '" + path + "'"));
  std::string line;
  Segment seg;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string type, off, va, pa, fsz, msz;
    if (!(ls >> type >> off >> va >> pa >> fsz >> msz) || type != "LOAD") continue;
    if (line.find(" R E ") == std::string::npos && line.find("RWE") == std::string::npos) continue;
    seg.offset = std::stoull(off, nullptr, 16);
    seg.vaddr = std::stoull(va, nullptr, 16);
    seg.memsz = std::stoull(msz, nullptr, 16);
  }
  return seg;
}

inline bool is_pie(const std::string& path) {
  return run("readelf -hW '" + path + "'").find("DYN (") != std::string::npos;
}

inline std::vector<uint8_t> build_id(const std::string& path) {
  std::string notes = run("readelf -nW '" + path + "'");
  size_t at = notes.find("Build ID: ");
  std::vector<uint8_t> id;
  if (at == std::string::npos) return id;
  std::istringstream ls(notes.substr(at + 10));
  std::string h;
  ls >> h;
  for (size_t i = 0; i + 1 < h.size(); i += 2)
    id.push_back(uint8_t(std::stoul(h.substr(i, 2), nullptr, 16)));
  return id;
}

// A region over the executable segment of `path`, loaded with `bias`, empty counts.
inline profile::Region text_region(const std::string& path, uint64_t bias, uint32_t bin_size,
                                   uint32_t flags = 0) {
  Segment seg = exec_segment(path);
  profile::Region r;
  r.path = path;
  r.build_id = build_id(path);
  r.flags = flags;
  r.load_bias = bias;
  r.start = seg.vaddr + bias;
  r.end = r.start + seg.memsz;
  r.file_offset = seg.offset;
  r.bin_size = bin_size;
  r.counter_width = 8;
  return r;
}

// Adds `n` samples at runtime address `addr` of region `r`.
inline void add_at(profile::Region* r, uint64_t addr, uint64_t n) {
  ASSERT_GE(addr, r->start);
  ASSERT_LT(addr, r->end);
  r->add((addr - r->start) / r->bin_size, n);
}

// The bin containing `addr` lies entirely inside [lo, hi).
inline bool bin_inside(const profile::Region& r, uint64_t addr, uint64_t lo, uint64_t hi) {
  uint64_t b = r.start + (addr - r.start) / r.bin_size * r.bin_size;
  return b >= lo && b + r.bin_size <= hi;
}

inline profile::Profile base_profile(uint64_t tick_ns) {
  profile::Profile p;
  p.flags = SPROF_F_FINISHED;
  p.clock = profile::Clock::kCpu;
  p.requested_hz = uint32_t(1000000000ull / tick_ns);
  p.effective_hz = double(p.requested_hz);
  p.tick_ns = tick_ns;
  p.argv = {"testprog", "1000"};
  return p;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// The line number of the source line containing `marker`.
inline int marker_line(const std::string& source, const std::string& marker) {
  std::istringstream in(read_file(source));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n)
    if (line.find(marker) != std::string::npos) return n;
  return 0;
}

}  // namespace sprofil::report_test
