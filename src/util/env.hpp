// Environment settings shared by the faces and the agent.
#pragma once

#include <cstdint>
#include <cstdlib>

namespace sprofil::util {

// SPROFIL_HZ: samples per second and thread. The one rule, for every reader: unset or empty
// means the default (1000 Hz, *interval_ns untouched); otherwise it must be a decimal integer
// from 1 to 1000000 with nothing after it, and sets *interval_ns = 1e9 / value. Anything else
// (0, negative, "1k", "100abc", too large) is rejected: returns false with *interval_ns
// untouched and *why set to a sentence for the user. The agent then does not profile; the
// faces say it once on stderr and keep the default.
bool hz_from_env(uint64_t* interval_ns, const char** why);

// For readers that cannot refuse (the faces): one line on stderr, once per process (unless
// SPROFIL_QUIET): "sprofil: <why>; using 1000 Hz".
void hz_warn_once(const char* why);

// The parsing alone (for tests): value is the setting's text.
bool parse_hz(const char* value, uint64_t* interval_ns);

// SPROFIL_BIN_BYTES's value: bytes of text per counter, a power of two from 1 to 65536. The one
// rule, for the agent (agent/env.cpp) and for record sampling from outside (record/agentless.cpp).
inline bool parse_bin_bytes(const char* value, uint32_t* bytes) {
  const long v = atol(value);
  if (v <= 0 || v > 65536 || (v & (v - 1))) return false;
  *bytes = static_cast<uint32_t>(v);
  return true;
}

}  // namespace sprofil::util
