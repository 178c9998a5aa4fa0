#include "subcommands.hpp"

namespace sprofil::tool {
namespace {
int g_exit_code = 0;
}

// Subcommands register through these hooks; each is defined in its own file when present.
void register_record(CLI::App& app) __attribute__((weak));
void register_report(CLI::App& app) __attribute__((weak));
void register_merge(CLI::App& app) __attribute__((weak));

void register_subcommands(CLI::App& app) {
  if (register_record) register_record(app);
  if (register_report) register_report(app);
  if (register_merge) register_merge(app);
}

int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}

}  // namespace sprofil::tool
