// sprofil: the command-line tool. A thin driver: option parsing here and in each subcommand's
// file (subcommands.cpp lists them); the work is done by the libraries under src/.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>

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
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  return runs.at(app.get_subcommands().front())();
}
