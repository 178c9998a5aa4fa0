// `sprofil gperf --serve`'s workflow (gperf_server.hpp): choosing the socket, the PushServer
// loop, and each flush parsed, written and reported.
#include "live/gperf_server.hpp"

#include <cstdint>
#include <vector>

#include "live/client.hpp"
#include "live/live.hpp"
#include "profile/profile.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"

namespace sprofil::live {

int serve_gperf(const GperfServeOptions& o, const volatile sig_atomic_t* stop, FILE* out,
                FILE* log) {
  std::string socket = o.socket, err;
  if (socket.empty()) {
    char buf[256];
    if (!gperf_socket(buf, sizeof buf)) {
      std::fprintf(log, "sprofil gperf: no socket place (the per-user directory is unsafe?)\n");
      return 1;
    }
    socket = buf;
  }
  PushServer server;
  if (!server.open(socket, &err)) {
    std::fprintf(log, "sprofil gperf: %s\n", err.c_str());
    return 1;
  }
  std::fprintf(log, "sprofil gperf: serving on %s, files in %s (Ctrl-C stops)\n", socket.c_str(),
               o.dir.c_str());
  unsigned n = 0;
  while (!*stop && (o.count == 0 || n < o.count)) {
    std::vector<uint8_t> image;
    int pid = 0;
    const int r = server.receive(&image, &pid, &err, 200);
    if (r < 0) {
      std::fprintf(log, "sprofil gperf: %s\n", err.c_str());
      return 1;
    }
    if (r == 0) {
      if (!err.empty()) std::fprintf(log, "sprofil gperf: %s\n", err.c_str());
      continue;
    }
    profile::Profile p;
    if (!profile::parse_profile(image.data(), image.size(), &p, &err)) {
      std::fprintf(log, "sprofil gperf: a bad flush from pid %d: %s\n", pid, err.c_str());
      continue;
    }
    ++n;
    const std::string file =
        o.dir + "/gperf." + std::to_string(p.pid) + "." + std::to_string(n) + ".sprof";
    if (!profile::write_profile(p, file, &err)) {
      std::fprintf(log, "sprofil gperf: %s: %s\n", file.c_str(), err.c_str());
      continue;
    }
    std::fprintf(out, "flush %u: pid %d, %llu samples (%llu overflow), %zu segments -> %s\n", n,
                 p.pid, static_cast<unsigned long long>(p.total_samples()),
                 static_cast<unsigned long long>(p.overflow), p.regions.size(), file.c_str());
    std::fflush(out);
  }
  server.close();
  return 0;
}

}  // namespace sprofil::live
