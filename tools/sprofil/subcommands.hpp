// Subcommand registry for the sprofil tool. Each subcommand file defines a registrar.
#pragma once

#include <CLI/CLI.hpp>

namespace sprofil::tool {

// Adds every subcommand to the app.
void register_subcommands(CLI::App& app);

// The exit status the chosen subcommand set (0 unless it failed).
int exit_code();
void set_exit_code(int code);

}  // namespace sprofil::tool
