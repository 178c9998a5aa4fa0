#include "report/labels.hpp"

#include <cinttypes>
#include <cmath>
#include <cstdio>

namespace sprofil::report {

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string command_of(const profile::Profile& p) {
  std::string s;
  for (const std::string& a : p.argv) {
    if (!s.empty()) s += ' ';
    s += a;
  }
  return s;
}

std::string hex_addr(uint64_t a) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%" PRIx64, a);
  return buf;
}

std::string clock_label(profile::Clock c) {
  return std::string(profile::clock_name(c)) + " (" + profile::clock_description(c) + ")";
}

std::string format_samples(double s) {
  char buf[64];
  if (std::fabs(s - std::round(s)) < 1e-9)
    std::snprintf(buf, sizeof buf, "%.0f", s);
  else
    std::snprintf(buf, sizeof buf, "%.2f", s);
  return buf;
}

std::string label_of(const Row& r, By by) {
  switch (by) {
    case By::kFunction:
    case By::kObject:
      return r.name;
    case By::kLine: {
      std::string s =
          (r.file.empty() ? std::string("??") : basename_of(r.file)) + ":" +
          std::to_string(r.line) + " " +
          (!r.frames.empty() && !r.frames[0].function.empty() ? r.frames[0].function : r.name);
      for (size_t i = 1; i < r.frames.size(); ++i) {
        s += " <- " +
             (r.frames[i].file.empty() ? std::string("??") : basename_of(r.frames[i].file)) + ":" +
             std::to_string(r.frames[i].line);
        if (!r.frames[i].function.empty()) s += " " + r.frames[i].function;
      }
      return s;
    }
    case By::kAddress:
      return hex_addr(r.address) + " " + r.name;
  }
  return r.name;
}

}  // namespace sprofil::report
