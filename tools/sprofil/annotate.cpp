// `sprofil annotate FILE [--function NAME]`: source lines and disassembly of the hottest
// functions with their samples (src/report/annotate.hpp).
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "report/annotate.hpp"
#include "report/labels.hpp"
#include "subcommands.hpp"

namespace sprofil::tool {
namespace {

struct AnnotateArgs {
  ProfileInput input;
  std::string function;
  std::string format = "text";
  std::string out;
  size_t top = 3;
};

int run_annotate(const AnnotateArgs& args) {
  profile::Profile p;
  report::AnnotateOptions opts;
  if (!args.input.read("annotate", &p, &opts.report)) return 1;
  opts.function = args.function;
  opts.top = args.top;
  symbolize::Symbolizer sym;
  report::Annotation a = report::annotate(p, sym, opts);
  std::ostringstream s;
  if (args.format == "json")
    report::write_annotation_json(a, s);
  else
    report::write_annotation_text(a, s);
  int status = 0;
  if (a.functions.empty()) {
    std::string why = args.function.empty()
                          ? "no function has samples"
                          : "no function named " + report::printable(args.function) +
                                " (or ending in ::" + report::printable(args.function) +
                                ") has samples";
    for (size_t i = 0; i < a.near.size(); ++i)
      why += (i == 0 ? "; functions with samples whose name holds it: " : ", ") +
             report::printable(a.near[i]);
    status = fail("annotate", args.input.file + ": " + why);
  }
  return write_text("annotate", args.out, s.str(), status);
}

}  // namespace

Run setup_annotate(CLI::App& sub) {
  auto args = std::make_shared<AnnotateArgs>();
  add_profile_input(sub, args->input, "functions");
  sub.add_option("--function", args->function,
                 "Annotate this function (full or short C++ name, either with or without a "
                 "GCC clone suffix such as [clone .isra.0], or an alias): every function of "
                 "that name")
      ->check(
          [](const std::string& name) {
            return name.empty() ? std::string("a function's name, not an empty one") : "";
          },
          "NAME");
  sub.add_option("--top", args->top, "Without --function: annotate the N hottest functions")
      ->transform(whole_number<size_t>(1))
      ->capture_default_str();
  add_choice(sub, "--format", args->format, "Output format: text or json", {"text", "json"});
  add_output(sub, args->out);
  return [args] { return run_annotate(*args); };
}

}  // namespace sprofil::tool
