// `sprofil top PID|SOCKET`: option parsing; the workflow (the live view: fetch, keys, redraw) is
// src/live/top (live::run_top), its views on stdout and its keys from stdin.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "live/top.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {

Run setup_top(CLI::App& sub) {
  auto o = std::make_shared<live::TopOptions>();
  add_live_target(sub, o->target)->required();
  sub.add_option("-i,--interval", o->interval, "Seconds between views")
      ->check(real_number(0.05, 3600))
      ->capture_default_str();
  sub.add_option("-n,--count", o->count, "Stop after N views (0: until the program exits)")
      ->transform(whole_number<unsigned>());
  add_limit(sub, o->limit, "Rows per view (0 = all)")->capture_default_str();
  return [o] {
    std::string err;
    const int status = live::run_top(*o, stdout, STDIN_FILENO, &err);
    if (status != 0) say("top", err);
    return status;
  };
}

}  // namespace sprofil::tool
