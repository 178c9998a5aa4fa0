// The subcommands of the sprofil tool. Each lives in a file of its own and is one row of the
// table in subcommands.cpp: its setup function declares its options on the CLI11 subcommand
// and returns the function that runs it and returns the exit status.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <span>

namespace sprofil::tool {

using Run = std::function<int()>;

struct Subcommand {
  const char* name;
  const char* help;
  Run (*setup)(CLI::App& sub);
};

// Every subcommand, in the order `sprofil --help` lists them.
std::span<const Subcommand> subcommands();

Run setup_record(CLI::App& sub);
Run setup_report(CLI::App& sub);
Run setup_merge(CLI::App& sub);
Run setup_diff(CLI::App& sub);
Run setup_annotate(CLI::App& sub);
Run setup_fetch(CLI::App& sub);
Run setup_gperf(CLI::App& sub);
Run setup_list(CLI::App& sub);
Run setup_top(CLI::App& sub);
Run setup_serve(CLI::App& sub);

}  // namespace sprofil::tool
