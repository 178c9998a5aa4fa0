#include "subcommands.hpp"

namespace sprofil::tool {

std::span<const Subcommand> subcommands() {
  static const Subcommand kAll[] = {
      {"record", "Run a command and profile it (all threads, shared libraries, dlopen'd code)",
       setup_record},
      {"report", "Print or export a report of a .sprof profile", setup_report},
      {"merge", "Sum profiles of the same program (runs, fork children) into one file",
       setup_merge},
      {"diff", "Compare two profiles: each function's change with its interval and significance",
       setup_diff},
      {"annotate", "Source lines and disassembly of the hottest functions, with their samples",
       setup_annotate},
      {"fetch", "Copy a live snapshot of a running program to a .sprof file", setup_fetch},
      {"gperf", "Report a running program live, or receive its osProfileFlush (--serve)",
       setup_gperf},
      {"top", "A live view of a running program's hottest functions, like perf top", setup_top},
      {"list", "List the running processes of this user that serve live profiles", setup_list},
      {"serve", "Serve this user's live profiles over HTTP as Go's net/http/pprof does",
       setup_serve},
  };
  return kAll;
}

}  // namespace sprofil::tool
