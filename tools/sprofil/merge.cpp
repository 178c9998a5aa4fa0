// sprofil merge -o OUT A B ...: sums profiles of the same program (several runs, or a process
// and its fork children) into one .sprof file.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "profile/merge.hpp"
#include "profile/writer.hpp"
#include "report/labels.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {

namespace {

struct MergeOptions {
  std::string output;
  std::vector<std::string> inputs;
  bool force = false;
};

int fail_on(const std::string& file, const std::string& problem) {
  return fail("merge", file + ": " + problem);
}

int run_merge(const MergeOptions& o) {
  std::vector<profile::Profile> profiles(o.inputs.size());
  bool ok = true;
  for (size_t i = 0; i < o.inputs.size(); ++i)
    ok = read_input("merge", o.inputs[i], &profiles[i]) && ok;
  if (!ok) return 1;
  profile::Profile merged;
  std::string error;
  size_t bad = 0;
  std::vector<std::string> warnings;
  if (!profile::merge_profiles(profiles, &merged, &error, &bad,
                               profile::MergePolicy{o.force, &warnings})) {
    return fail_on(bad < o.inputs.size() ? o.inputs[bad] : o.output, error);
  }
  for (const std::string& w : warnings) say("merge", "warning: " + w);
  // What a run's header tells of it (the kernel's throttling, threads with no sample of their
  // own) the merged profile, of one process, has no place for: said here, input by input.
  for (size_t i = 0; i < profiles.size(); ++i)
    for (const report::RunNote& n : report::run_notes(profiles[i]))
      say("merge", "warning: " + o.inputs[i] + ": " + n.text +
                       " (not kept: the merged profile is of one process)");
  return profile::write_profile(merged, o.output, &error) ? 0 : fail_on(o.output, error);
}

}  // namespace

Run setup_merge(CLI::App& sub) {
  auto opt = std::make_shared<MergeOptions>();
  add_output(sub, opt->output, "The merged profile to write")->required();
  sub.add_flag("--force", opt->force,
               "Merge profiles of different programs or clocks (a warning instead of an error)");
  sub.add_option("profiles", opt->inputs, "Profiles to merge (.sprof or run profiles)")
      ->required()
      ->expected(1, -1);
  return [opt] { return run_merge(*opt); };
}

}  // namespace sprofil::tool
