// sprofil: the command-line tool. A thin driver: option parsing here and in each subcommand's
// file (subcommands.cpp lists them); the work is done by the libraries under src/.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <vector>

#include "subcommands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"sprofil: execution-time profiler for Linux (profil/sprofil for modern systems)"};
  app.set_version_flag("--version", std::string("sprofil ") + SPROFIL_VERSION);
  app.require_subcommand(0, 1);
  std::map<const CLI::App*, sprofil::tool::Run> runs;
  for (const sprofil::tool::Subcommand& s : sprofil::tool::subcommands()) {
    CLI::App* sub = app.add_subcommand(s.name, s.help);
    runs[sub] = s.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version: their text on stdout, status 0.
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    // Anything else is a usage error, of the subcommand it was found in (parsed so far):
    // status 2 whatever CLI11's own code for it.
    const std::vector<CLI::App*> parsed = app.get_subcommands();
    return sprofil::tool::usage_error(parsed.empty() ? "" : parsed.front()->get_name(), e.what());
  }
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stderr);
    return sprofil::tool::kUsageError;
  }
  return runs.at(app.get_subcommands().front())();
}
