// sprofil merge -o OUT A B ...: sums profiles of the same program (several runs, or a process
// and its fork children) into one .sprof file.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "profile/merge.hpp"
#include "profile/reader.hpp"
#include "profile/writer.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {

namespace {

struct MergeOptions {
  std::string output;
  std::vector<std::string> inputs;
};

void fail(const std::string& file, const std::string& problem) {
  std::fprintf(stderr, "sprofil merge: %s: %s\n", file.c_str(), problem.c_str());
  set_exit_code(1);
}

void run_merge(const MergeOptions& o) {
  std::vector<profile::Profile> profiles(o.inputs.size());
  bool ok = true;
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    std::string error;
    if (!profile::read_profile(o.inputs[i], &profiles[i], &error)) {
      fail(o.inputs[i], error);
      ok = false;
    }
  }
  if (!ok) return;
  profile::Profile merged;
  std::string error;
  size_t bad = 0;
  if (!profile::merge_profiles(profiles, &merged, &error, &bad)) {
    fail(bad < o.inputs.size() ? o.inputs[bad] : o.output, error);
    return;
  }
  if (!profile::write_profile(merged, o.output, &error)) fail(o.output, error);
}

}  // namespace

void register_merge(CLI::App& app) {
  auto opt = std::make_shared<MergeOptions>();
  CLI::App* sub = app.add_subcommand(
      "merge", "Sum profiles of the same program (runs, fork children) into one file");
  sub->add_option("-o,--output", opt->output, "The merged profile to write")->required();
  sub->add_option("profiles", opt->inputs, "Profiles to merge (.sprof)")
      ->required()
      ->expected(1, -1);
  sub->callback([opt] { run_merge(*opt); });
}

}  // namespace sprofil::tool
