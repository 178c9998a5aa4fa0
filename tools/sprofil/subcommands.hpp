// The subcommands of the sprofil tool. Each lives in a file of its own and is one row of the
// table in subcommands.cpp: its setup function declares its options on the CLI11 subcommand
// and returns the function that runs it and returns the exit status.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

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

// What every subcommand does one way.
// "sprofil CMD: MESSAGE" on stderr; fail() returns 1, the exit status of a failure.
void say(const char* cmd, const std::string& message);
int fail(const char* cmd, const std::string& message);
// Writes `text` to `out` ("" or "-": standard output) with profile::write_output: `status`,
// or fail() if it cannot be written.
int write_text(const char* cmd, const std::string& out, const std::string& text, int status);
// An option whose value is one of `choices`, its default shown in --help.
CLI::Option* add_choice(CLI::App& sub, const std::string& name, std::string& value,
                        const std::string& help, const std::vector<std::string>& choices);
// --pid and --comm: which processes of a run profile to keep (`note` ends --pid's help).
void add_process_filter(CLI::App& sub, std::vector<int32_t>& pids, std::vector<std::string>& comms,
                        const std::string& note = "");

}  // namespace sprofil::tool
