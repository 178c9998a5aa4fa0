// `sprofil top PID|SOCKET`: a live view like `perf top` (docs/live.md). Every interval, the
// functions with the most samples in that interval (the delta of two live snapshots), their
// share with its 95% interval, the sample rate and the lost samples. On a terminal the screen
// is redrawn and keys act (q quits, p pauses, s switches the sort between samples and name);
// otherwise one block of lines per interval, for logs. Ends when the program exits.
#include <poll.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "live/client.hpp"
#include "report/report.hpp"
#include "subcommands.hpp"
#include "symbolize/symbolize.hpp"

namespace sprofil::tool {
namespace {

struct TopArgs {
  std::string target;
  double interval = 1.0;
  unsigned count = 0;  // 0: until the program exits or q
  size_t limit = 20;
};

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The terminal in raw mode while top runs (restored at the end).
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    on_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (on_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  bool on() const { return on_; }

 private:
  termios saved_{};
  bool on_ = false;
};

int run_top(const TopArgs& a) {
  std::string socket, err;
  if (!live::socket_of(a.target, &socket, &err)) {
    return fail("top", err);
  }
  profile::Profile prev;
  if (!live::fetch_profile(socket, &prev, &err)) {
    return fail("top", err);
  }
  const bool tty = isatty(STDOUT_FILENO);
  RawTerminal term;
  symbolize::Symbolizer sym;
  report::Options opts;
  opts.short_names = true;
  bool paused = false, by_name = false;
  double last = now_s();
  for (unsigned n = 0; a.count == 0 || n < a.count;) {
    // Wait for the interval, reading keys on a terminal.
    const double until = last + a.interval;
    bool quit = false;
    while (!quit) {
      const double left = until - now_s();
      if (left <= 0) break;
      pollfd p{term.on() ? STDIN_FILENO : -1, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(left * 1000) + 1);
      if (r > 0 && (p.revents & POLLIN)) {
        char c = 0;
        if (read(STDIN_FILENO, &c, 1) == 1) {
          if (c == 'q' || c == 'Q') quit = true;
          if (c == 'p' || c == 'P') paused = !paused;
          if (c == 's' || c == 'S') by_name = !by_name;
        }
      }
    }
    if (quit) break;
    profile::Profile cur;
    const double t = now_s();
    if (!live::fetch_profile(socket, &cur, &err)) {
      std::printf("sprofil top: pid %d is gone (%s)\n", prev.pid, err.c_str());
      return 0;
    }
    const double secs = t - last;
    last = t;
    if (paused) {
      prev = std::move(cur);
      continue;
    }
    const profile::Profile d = profile::delta(prev, cur);
    prev = std::move(cur);
    report::Table table = report::aggregate(d, sym, opts);
    if (by_name)
      std::sort(table.rows.begin(), table.rows.end(),
                [](const report::Row& x, const report::Row& y) { return x.name < y.name; });
    if (tty) std::fputs("\033[H\033[2J", stdout);
    std::printf(
        "sprofil top: pid %d  interval %.2f s  samples %llu (%.0f/s)  lost %llu  overflow %llu%s\n",
        d.pid, secs, static_cast<unsigned long long>(table.total_samples),
        secs > 0 ? static_cast<double>(table.total_samples) / secs : 0.0,
        static_cast<unsigned long long>(d.lost), static_cast<unsigned long long>(d.overflow),
        tty ? "   [q quit, p pause, s sort]" : "");
    std::printf("%9s %7s %15s  %s\n", "samples", "percent", "ci95 low-high", "function  object");
    size_t shown = 0;
    for (const report::Row& r : table.rows) {
      if (a.limit && shown++ >= a.limit) break;
      std::printf("%9.0f %7.2f %7.2f-%-7.2f  %s  %s\n", r.samples, r.percent, r.ci95_lo, r.ci95_hi,
                  r.name.c_str(), r.object.c_str());
    }
    if (!tty) std::printf("\n");
    std::fflush(stdout);
    ++n;
  }
  return 0;
}

}  // namespace

Run setup_top(CLI::App& sub) {
  auto a = std::make_shared<TopArgs>();
  add_live_target(sub, a->target)->required();
  sub.add_option("-i,--interval", a->interval, "Seconds between views")
      ->check(CLI::Range(0.05, 3600.0))
      ->capture_default_str();
  sub.add_option("-n,--count", a->count, "Stop after N views (0: until the program exits)");
  add_limit(sub, a->limit, "Rows per view (0 = all)")->capture_default_str();
  return [a] { return run_top(*a); };
}

}  // namespace sprofil::tool
