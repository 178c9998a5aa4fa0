#include "subcommands.hpp"

#include <cstdio>

#include "profile/output.hpp"

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

void say(const char* cmd, const std::string& message) {
  std::fprintf(stderr, "sprofil %s: %s\n", cmd, message.c_str());
}

int fail(const char* cmd, const std::string& message) {
  say(cmd, message);
  return 1;
}

int write_text(const char* cmd, const std::string& out, const std::string& text, int status) {
  std::string err;
  if (!profile::write_output(out.empty() ? "-" : out, text, &err)) return fail(cmd, err);
  return status;
}

CLI::Option* add_choice(CLI::App& sub, const std::string& name, std::string& value,
                        const std::string& help, const std::vector<std::string>& choices) {
  return sub.add_option(name, value, help)->check(CLI::IsMember(choices))->capture_default_str();
}

void add_process_filter(CLI::App& sub, std::vector<int32_t>& pids, std::vector<std::string>& comms,
                        const std::string& note) {
  sub.add_option("--pid", pids, "Only this process (several allowed)" + note);
  sub.add_option("--comm", comms,
                 "Only processes with this command name (basename of argv[0]; several allowed)");
}

}  // namespace sprofil::tool
