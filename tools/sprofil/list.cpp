// `sprofil list`: the processes of this user that serve live profiles.
#include <cstdio>
#include <string>

#include "live/client.hpp"
#include "report/labels.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {

Run setup_list(CLI::App&) {
  return [] {
    std::string err;
    const std::vector<live::Target> targets = live::list_targets(&err);
    if (!err.empty()) {
      return fail("list", err);
    }
    std::printf("%8s  %s\n", "PID", "COMMAND");
    // A command line as the text report shows one: it cannot move the cursor (printable).
    for (const live::Target& t : targets)
      std::printf("%8d  %s\n", t.pid, report::printable(t.command).c_str());
    return 0;
  };
}

}  // namespace sprofil::tool
