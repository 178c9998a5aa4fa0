// The build-id cache's layout (buildid_cache.hpp).
#include "profile/buildid_cache.hpp"

#include <cstdlib>
#include <string_view>

namespace sprofil::profile {

std::string hex(const std::vector<uint8_t>& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

std::string buildid_cache_dir() {
  auto set = [](const char* name) {
    const char* v = secure_getenv(name);
    return v != nullptr && *v == '/' ? std::string(v) : std::string();
  };
  if (std::string d = set("SPROFIL_BUILDID_DIR"); !d.empty()) return d;
  if (std::string d = set("XDG_CACHE_HOME"); !d.empty()) return d + "/sprofil/build-id";
  if (std::string d = set("HOME"); !d.empty()) return d + "/.cache/sprofil/build-id";
  return {};
}

std::string buildid_cache_file(const std::vector<uint8_t>& build_id) {
  const std::string dir = buildid_cache_dir();
  if (dir.empty() || build_id.size() < 2) return {};
  const std::string h = hex(build_id);
  return dir + "/" + h.substr(0, 2) + "/" + h.substr(2);
}

bool buildid_cache_keeps(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;  // [vdso], perf maps' names, ...
  const std::string_view p(path);
  auto under = [&](std::string_view dir) {
    return p.size() > dir.size() && p.substr(0, dir.size()) == dir && p[dir.size()] == '/';
  };
  if (under("/usr/local")) return true;
  for (std::string_view system :
       {"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/nix/store"})
    if (under(system)) return false;
  return true;
}

}  // namespace sprofil::profile
