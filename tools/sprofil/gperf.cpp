// `sprofil gperf`: the Nintendo 64 seed's host tool (docs/live.md).
//   sprofil gperf PID|SOCKET     copies the histograms from the running program and prints the
//                                report `sprofil report` prints (--format, --by, -o)
//   sprofil gperf --serve        server mode: keeps each osProfileFlush as a .sprof in --dir
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "live/client.hpp"
#include "live/live.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"
#include "report/report.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

struct GperfArgs {
  std::string target;
  bool serve = false;
  std::string dir = ".";
  std::string socket;  // --serve: default $SPROFIL_GPERF_SOCKET or <per-user dir>/gperf.sock
  unsigned count = 0;  // --serve: stop after this many flushes (0: until Ctrl-C)
  ReportRequest request;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

int serve(const GperfArgs& a) {
  std::string socket = a.socket, err;
  if (socket.empty()) {
    char buf[256];
    if (!live::gperf_socket(buf, sizeof buf)) {
      std::fprintf(stderr, "sprofil gperf: no socket place (the per-user directory is unsafe?)\n");
      return 1;
    }
    socket = buf;
  }
  live::PushServer server;
  if (!server.open(socket, &err)) {
    return fail("gperf", err);
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::fprintf(stderr, "sprofil gperf: serving on %s, files in %s (Ctrl-C stops)\n", socket.c_str(),
               a.dir.c_str());
  unsigned n = 0;
  while (!g_stop && (a.count == 0 || n < a.count)) {
    std::vector<uint8_t> image;
    int pid = 0;
    const int r = server.receive(&image, &pid, &err, 200);
    if (r < 0) {
      return fail("gperf", err);
    }
    if (r == 0) {
      if (!err.empty()) std::fprintf(stderr, "sprofil gperf: %s\n", err.c_str());
      continue;
    }
    profile::Profile p;
    if (!profile::parse_profile(image.data(), image.size(), &p, &err)) {
      std::fprintf(stderr, "sprofil gperf: a bad flush from pid %d: %s\n", pid, err.c_str());
      continue;
    }
    ++n;
    const std::string file =
        a.dir + "/gperf." + std::to_string(p.pid) + "." + std::to_string(n) + ".sprof";
    if (!profile::write_profile(p, file, &err)) {
      std::fprintf(stderr, "sprofil gperf: %s: %s\n", file.c_str(), err.c_str());
      continue;
    }
    std::printf("flush %u: pid %d, %llu samples (%llu overflow), %zu segments -> %s\n", n, p.pid,
                static_cast<unsigned long long>(p.total_samples()),
                static_cast<unsigned long long>(p.overflow), p.regions.size(), file.c_str());
    std::fflush(stdout);
  }
  server.close();
  return 0;
}

int report_live(const GperfArgs& a) {
  std::string socket, err;
  profile::Profile p;
  if (!live::socket_of(a.target, &socket, &err) || !live::fetch_profile(socket, &p, &err)) {
    return fail("gperf", err);
  }
  report::Options opts = a.request.options();
  opts.source = "pid " + std::to_string(p.pid) + " (live)";
  return write_report("gperf", p, a.request, opts);
}

}  // namespace

Run setup_gperf(CLI::App& sub) {
  auto a = std::make_shared<GperfArgs>();
  add_live_target(sub, a->target);
  sub.add_flag("--serve", a->serve, "Server mode: receive every osProfileFlush");
  sub.add_option("--dir", a->dir, "--serve: where the flushes are kept")->capture_default_str();
  sub.add_option("--socket", a->socket,
                 "--serve: the socket (default $SPROFIL_GPERF_SOCKET, else gperf.sock in the "
                 "per-user directory)");
  sub.add_option("--count", a->count, "--serve: stop after N flushes (0: until Ctrl-C)");
  add_report_request(sub, a->request, false);
  return [a] {
    if (a->serve) return serve(*a);
    if (a->target.empty()) {
      std::fprintf(stderr, "sprofil gperf: give a PID or socket, or --serve\n");
      return 2;
    }
    return report_live(*a);
  };
}

}  // namespace sprofil::tool
