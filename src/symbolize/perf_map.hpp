// Names of JIT-compiled code from the perf map a JIT writes for its process, /tmp/perf-PID.map
// (the convention of perf and of the JITs that support it: node --perf-basic-prof, the JVM's
// -XX:+DumpPerfMapAtExit or perf-map-agent, LuaJIT, .NET's DOTNET_PerfMapEnabled): one line
// "START SIZE NAME" a function, START and SIZE hexadecimal, NAME the rest of the line.
//
// Record's default names a process's anonymous executable mappings by this file (a region
// with SPROF_R_JIT); the report reads it as perf report does: only a regular file (O_NOFOLLOW,
// O_NONBLOCK), owned by the user who reports or by root, of at most kMaxPerfMapBytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sprofil::symbolize {

// A region path that names a perf map: /tmp/perf-PID.map.
bool is_perf_map_path(const std::string& path);
// The perf map of process `pid` (inline: record names a JIT region by it, without this
// library).
inline std::string perf_map_path(long pid) {
  return "/tmp/perf-" + std::to_string(pid) + ".map";
}

constexpr uint64_t kMaxPerfMapBytes = uint64_t{256} << 20;

struct PerfMapSymbol {
  std::string name;
  uint64_t start = 0, end = 0;  // runtime addresses, [start, end)
};

// The symbols of the perf map at `path`, sorted by start and without overlaps: where a JIT
// reused an address range (its code collected, new code put there), the entry written last
// takes the range, and an older one keeps only what is before it. Lines that do not parse, and
// entries of size 0, are skipped and counted in *skipped. False, with *why, if the file cannot be
// read or is refused (not a regular file, another user's, too large).
bool read_perf_map(const std::string& path, std::vector<PerfMapSymbol>* out, uint64_t* skipped,
                   std::string* why);

}  // namespace sprofil::symbolize
