// sprofil: the command-line tool. A thin driver: each subcommand lives in its own file and
// registers itself here; the work is done by the libraries under src/.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "subcommands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"sprofil: execution-time profiler for Linux (profil/sprofil for modern systems)"};
  app.set_version_flag("--version", std::string("sprofil ") + SPROFIL_VERSION);
  app.require_subcommand(0, 1);
  sprofil::tool::register_subcommands(app);
  CLI11_PARSE(app, argc, argv);
  if (app.get_subcommands().empty()) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  return sprofil::tool::exit_code();
}
