#include "util/env.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "util/message.hpp"

namespace sprofil::util {

bool parse_hz(const char* value, uint64_t* interval_ns) {
  if (!value || *value < '0' || *value > '9') return false;
  uint64_t v = 0;
  for (const char* p = value; *p; ++p) {
    if (*p < '0' || *p > '9') return false;
    v = v * 10 + static_cast<uint64_t>(*p - '0');
    if (v > 1000000) return false;
  }
  if (v == 0) return false;
  *interval_ns = 1000000000ull / v;
  return true;
}

bool hz_from_env(uint64_t* interval_ns, const char** why) {
  const char* s = secure_getenv("SPROFIL_HZ");
  if (!s || !*s) return true;
  if (parse_hz(s, interval_ns)) return true;
  *why = "SPROFIL_HZ must be a whole number from 1 to 1000000";
  return false;
}

void hz_warn_once(const char* why) {
  static std::atomic<bool> said{false};
  if (secure_getenv("SPROFIL_QUIET") || said.exchange(true)) return;
  char line[160] = "sprofil: ";
  strncat(line, why, sizeof line - 40);
  strcat(line, "; using 1000 Hz\n");
  message(line, strlen(line));
}

}  // namespace sprofil::util
