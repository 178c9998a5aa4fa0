// The workflow of `sprofil top PID|SOCKET` (docs/live.md), a live view like `perf top`: every
// interval, the delta of two live snapshots of a running program (profile::delta), aggregated
// by function (report::aggregate) and rendered as one view (render_top_view). On a terminal
// the screen is redrawn and keys act (q quits, p pauses, s switches the sort between samples
// and name); otherwise one block of lines per interval, for logs. Ends when the program exits.
// Nothing here writes to the terminal but through the FILE* and the key descriptor it is given.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

#include "profile/profile.hpp"
#include "report/report.hpp"

namespace sprofil::live {

struct TopOptions {
  std::string target;     // a pid or a live socket's path (socket_of)
  double interval = 1.0;  // seconds between views
  unsigned count = 0;     // views to show; 0: until the program exits or q
  size_t limit = 20;      // rows per view (0 = all)
};

// One view of `table`, the aggregate of `delta` (the counts of `secs` seconds): the header line
// "sprofil top: pid P  interval S s  samples N (R/s)  lost L  overflow O" (on a terminal,
// `tty`, followed by the keys' help), the column titles and at most `limit` rows (0 = all),
// each "samples percent ci95low-ci95high  function  object". On a terminal the screen is
// cleared first; otherwise the view ends with an empty line.
void render_top_view(FILE* out, const profile::Profile& delta, const report::Table& table,
                     double secs, size_t limit, bool tty);

// Runs the view on o.target: the views go to `out` (redrawn in place when it is a terminal),
// the keys are read from `key_fd` when it is a terminal (in raw mode while top runs, restored
// at the end; -1: no keys). Returns the exit status: 0 when top ends (o.count views, q, or the
// program gone: "sprofil top: pid P is gone (why)" on `out`), 1 when the target cannot be
// reached at the start, with why in *error for the caller to say.
int run_top(const TopOptions& o, FILE* out, int key_fd, std::string* error);

}  // namespace sprofil::live
