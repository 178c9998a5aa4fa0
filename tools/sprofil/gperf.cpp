// `sprofil gperf`: the Nintendo 64 seed's host tool (docs/live.md); option parsing and calls.
//   sprofil gperf PID|SOCKET     copies the histograms from the running program (live client)
//                                and prints the report `sprofil report` prints (--format, --by,
//                                -o)
//   sprofil gperf --serve        server mode: keeps each osProfileFlush as a .sprof in --dir;
//                                the workflow is src/live/gperf_server (live::serve_gperf), the
//                                tool sets up Ctrl-C / SIGTERM to stop it
#include <signal.h>

#include <cstdio>
#include <memory>
#include <string>

#include "live/client.hpp"
#include "live/gperf_server.hpp"
#include "report/report.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

struct GperfArgs {
  std::string target;
  bool serve = false;
  live::GperfServeOptions serve_opts;  // --dir, --socket, --count
  ReportRequest request;
};

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

// Ctrl-C and SIGTERM stop the server (live::serve_gperf looks at g_stop), which then removes
// its socket and exits 0.
int serve(const GperfArgs& a) {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return live::serve_gperf(a.serve_opts, &g_stop, stdout, stderr);
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
  sub.add_option("--dir", a->serve_opts.dir, "--serve: where the flushes are kept")
      ->capture_default_str();
  sub.add_option("--socket", a->serve_opts.socket,
                 "--serve: the socket (default $SPROFIL_GPERF_SOCKET, else gperf.sock in the "
                 "per-user directory)");
  sub.add_option("--count", a->serve_opts.count, "--serve: stop after N flushes (0: until Ctrl-C)")
      ->transform(whole_number<unsigned>());
  add_report_request(sub, a->request, false);
  return [a] {
    if (a->serve) return serve(*a);
    if (a->target.empty()) {
      return usage_error("gperf", "give a PID or socket, or --serve");
    }
    return report_live(*a);
  };
}

}  // namespace sprofil::tool
