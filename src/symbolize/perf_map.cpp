#include "symbolize/perf_map.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

namespace sprofil::symbolize {

bool is_perf_map_path(const std::string& path) {
  static const std::string kPrefix = "/tmp/perf-", kSuffix = ".map";
  if (path.size() <= kPrefix.size() + kSuffix.size() ||
      path.compare(0, kPrefix.size(), kPrefix) != 0 ||
      path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return false;
  for (size_t i = kPrefix.size(); i < path.size() - kSuffix.size(); ++i)
    if (path[i] < '0' || path[i] > '9') return false;
  return true;
}

namespace {

// "START SIZE NAME": false if the line is not one.
bool parse_line(const std::string& line, PerfMapSymbol* s) {
  const char* p = line.c_str();
  char* end = nullptr;
  errno = 0;
  const unsigned long long start = std::strtoull(p, &end, 16);
  if (end == p || *end != ' ' || errno != 0) return false;
  p = end + 1;
  const unsigned long long size = std::strtoull(p, &end, 16);
  if (end == p || *end != ' ' || errno != 0 || size == 0 || start + size < start) return false;
  p = end + 1;
  size_t n = std::strlen(p);
  while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ')) --n;
  if (n == 0) return false;
  s->name.assign(p, n);
  s->start = start;
  s->end = start + size;
  return true;
}

}  // namespace

bool read_perf_map(const std::string& path, std::vector<PerfMapSymbol>* out, uint64_t* skipped,
                   std::string* why) {
  out->clear();
  *skipped = 0;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    *why = errno == ELOOP ? "a symbolic link, not followed" : std::strerror(errno);
    return false;
  }
  struct stat st;
  bool ok = ::fstat(fd, &st) == 0;
  if (!ok) {
    *why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    *why = "not a regular file";
    ok = false;
  } else if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    // As perf report: another user could have put any names there.
    *why = "owned by uid " + std::to_string(st.st_uid) + ", not by this user or root";
    ok = false;
  } else if (uint64_t(st.st_size) > kMaxPerfMapBytes) {
    *why = "larger than " + std::to_string(kMaxPerfMapBytes >> 20) + " MiB";
    ok = false;
  }
  FILE* f = ok ? ::fdopen(fd, "re") : nullptr;
  if (f == nullptr) {
    if (ok) *why = std::strerror(errno);
    ::close(fd);
    return false;
  }
  // Entries in the order written: a later one over an earlier one's range wins. A line is
  // "START SIZE NAME" with its newline, if any, dropped; no more than kMaxPerfMapBytes are
  // read (a JIT may write more while it is read).
  std::vector<PerfMapSymbol> all;
  char* line = nullptr;
  size_t cap = 0;
  uint64_t total = 0;
  for (ssize_t n; total <= kMaxPerfMapBytes && (n = ::getline(&line, &cap, f)) > 0;) {
    total += uint64_t(n);
    std::string text(line, size_t(n));
    if (text.back() == '\n') text.pop_back();
    PerfMapSymbol sym;
    if (parse_line(text, &sym))
      all.push_back(std::move(sym));
    else if (!text.empty())
      ++*skipped;
  }
  std::free(line);
  const bool failed = ::ferror(f) != 0;
  if (failed) *why = std::strerror(errno);
  ::fclose(f);
  if (failed) return false;
  // Newest first, each entry takes what no newer one holds: a map of the ranges taken.
  std::map<uint64_t, uint64_t> taken;  // start -> end, disjoint
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    uint64_t at = it->start;
    while (at < it->end) {
      // The taken range at or after `at`, or the one that holds it.
      auto next = taken.upper_bound(at);
      if (next != taken.begin() && std::prev(next)->second > at) {
        at = std::prev(next)->second;
        continue;
      }
      const uint64_t stop = next != taken.end() ? std::min(next->first, it->end) : it->end;
      out->push_back(PerfMapSymbol{it->name, at, stop});
      // Taken ranges that touch are joined, so that an older entry over many newer ones
      // steps over each gap once, not over each newer entry.
      auto ins = taken.emplace(at, stop).first;
      if (ins != taken.begin() && std::prev(ins)->second == at) {
        std::prev(ins)->second = stop;
        ins = taken.erase(ins);
        --ins;
      }
      if (auto after = std::next(ins); after != taken.end() && after->first == ins->second) {
        ins->second = after->second;
        taken.erase(after);
      }
      at = stop;
    }
  }
  std::sort(out->begin(), out->end(),
            [](const PerfMapSymbol& a, const PerfMapSymbol& b) { return a.start < b.start; });
  return true;
}

}  // namespace sprofil::symbolize
