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
  };
  return kAll;
}

}  // namespace sprofil::tool
