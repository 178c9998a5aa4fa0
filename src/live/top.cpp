// `sprofil top`'s workflow (top.hpp): the fetch / wait-for-keys / redraw loop over two live
// snapshots, the terminal in raw mode while it runs, and the rendering of one view.
#include "live/top.hpp"

#include <poll.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "live/client.hpp"
#include "report/labels.hpp"
#include "symbolize/symbolize.hpp"

namespace sprofil::live {
namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The terminal `fd` in raw mode while top runs (restored at the end); off if it is not one.
class RawTerminal {
 public:
  explicit RawTerminal(int fd) : fd_(fd) {
    if (fd_ < 0 || !isatty(fd_) || tcgetattr(fd_, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    on_ = tcsetattr(fd_, TCSANOW, &raw) == 0;
  }
  ~RawTerminal() {
    if (on_) tcsetattr(fd_, TCSANOW, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  bool on() const { return on_; }
  int fd() const { return fd_; }

 private:
  int fd_;
  termios saved_{};
  bool on_ = false;
};

}  // namespace

void render_top_view(FILE* out, const profile::Profile& delta, const report::Table& table,
                     double secs, size_t limit, bool tty) {
  if (tty) std::fputs("\033[H\033[2J", out);
  std::fprintf(
      out,
      "sprofil top: pid %d  interval %.2f s  samples %llu (%.0f/s)  lost %llu  overflow %llu%s\n",
      delta.pid, secs, static_cast<unsigned long long>(table.total_samples),
      secs > 0 ? static_cast<double>(table.total_samples) / secs : 0.0,
      static_cast<unsigned long long>(delta.lost), static_cast<unsigned long long>(delta.overflow),
      tty ? "   [q quit, p pause, s sort]" : "");
  std::fprintf(out, "%9s %7s %15s  %s\n", "samples", "percent", "ci95 low-high",
               "function  object");
  // Names as the text report shows them: long C++ names short unless two would read alike,
  // and every name and path printable (a symbol or path cannot move the cursor).
  const std::set<std::string> full = report::names_short_alike(report::shown_names(table.rows));
  size_t shown = 0;
  for (const report::Row& r : table.rows) {
    if (limit && shown++ >= limit) break;
    std::fprintf(out, "%9.0f %7.2f %7.2f-%-7.2f  %s  %s\n", r.samples, r.percent, r.ci95_lo,
                 r.ci95_hi, report::label_of(r, report::By::kFunction, true, &full).c_str(),
                 report::printable(r.object).c_str());
  }
  if (!tty) std::fputs("\n", out);
}

int run_top(const TopOptions& o, FILE* out, int key_fd, std::string* error) {
  std::string socket, err;
  if (!socket_of(o.target, &socket, &err)) {
    *error = err;
    return 1;
  }
  profile::Profile prev;
  if (!fetch_profile(socket, &prev, &err)) {
    *error = err;
    return 1;
  }
  const bool tty = isatty(fileno(out));
  RawTerminal term(key_fd);
  symbolize::Symbolizer sym;
  report::Options opts;
  opts.short_names = true;
  bool paused = false, by_name = false;
  double last = now_s();
  for (unsigned n = 0; o.count == 0 || n < o.count;) {
    // Wait for the interval, reading keys on a terminal.
    const double until = last + o.interval;
    bool quit = false;
    while (!quit) {
      const double left = until - now_s();
      if (left <= 0) break;
      pollfd p{term.on() ? term.fd() : -1, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(left * 1000) + 1);
      if (r > 0 && (p.revents & POLLIN)) {
        char c = 0;
        if (read(term.fd(), &c, 1) == 1) {
          if (c == 'q' || c == 'Q') quit = true;
          if (c == 'p' || c == 'P') paused = !paused;
          if (c == 's' || c == 'S') by_name = !by_name;
        }
      }
    }
    if (quit) break;
    profile::Profile cur;
    const double t = now_s();
    if (!fetch_profile(socket, &cur, &err)) {
      std::fprintf(out, "sprofil top: pid %d is gone (%s)\n", prev.pid, err.c_str());
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
    render_top_view(out, d, table, secs, o.limit, tty);
    std::fflush(out);
    ++n;
  }
  return 0;
}

}  // namespace sprofil::live
