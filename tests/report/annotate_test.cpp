// `sprofil annotate` on real recordings of tests/report/annotate_prog.cpp: a function with two
// loops on lines of their own, the second doing twice the work of the first, recorded with
// 1-byte bins (the default: the two-loops and perf tests record without setting it; others
// spell out SPROFIL_BIN_BYTES=1, and 4 where they check the approximation); a function in a
// shared library; a stripped copy of the program (disassembly only, with the reason). And
// `sprofil report --by line` against perf's srcline shares on the same program.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "symbolize/symbolize.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using Json = nlohmann::json;

const std::string kTool = SPROFIL_TOOL;
const std::string kProg = ANNOTATE_PROG;
const std::string kCloneProg = CLONE_PROG;

// The environment of a run under the default bins: nothing, except where the temporary
// directory is a tmpfs (the agent's default there is 4 bytes: docs/agent.md), where 1 is
// asked for so that the tests still check exact bins.
std::string default_bins_env() {
  struct statfs fs {};
  const bool in_memory = ::statfs(temp_dir().c_str(), &fs) == 0 &&
                         (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
  return in_memory ? "SPROFIL_BIN_BYTES=1" : "";
}

// Records `prog PHASE N` with `env` (e.g. "SPROFIL_BIN_BYTES=1") and `flags` for record.
std::string record(const std::string& name, const std::string& prog, const std::string& phase,
                   const std::string& n, const std::string& env, const std::string& flags = "") {
  std::string out = temp_dir() + "/" + name + ".sprof";
  int status = 0;
  std::string log = run("env " + env + " timeout 120 '" + kTool + "' record " + flags + " -o '" +
                            out + "' -- '" + prog + "' " + phase + " " + n + " 2>&1",
                        &status);
  EXPECT_EQ(status, 0) << log;
  return out;
}

Json annotate_json(const std::string& file, const std::string& function) {
  int status = 0;
  std::string out = run("'" + kTool + "' annotate '" + file + "' --function '" + function +
                            "' --format json 2>/dev/null",
                        &status);
  EXPECT_EQ(status, 0) << out;
  return Json::parse(out);
}

// ~0.85 s: 1e8 + 2e8 dependent multiply-adds.
const std::string kLoopsN = "100000000";

TEST(Annotate, TwoLoopsCarryTheSamplesInProportionToTheirWork) {
  const int one = marker_line(ANNOTATE_SOURCE, "LOOP_ONE");
  const int two = marker_line(ANNOTATE_SOURCE, "LOOP_TWO");
  ASSERT_GT(one, 0);
  ASSERT_GT(two, 0);
  // The default bins (1 byte since the agent records exactly by default).
  std::string file = record("loops1", kProg, "loops", kLoopsN, default_bins_env());
  Json j = annotate_json(file, "two_loops");
  ASSERT_EQ(j["functions"].size(), 1u) << j.dump(1);
  const Json& f = j["functions"][0];
  EXPECT_EQ(f["name"], "two_loops(long)");
  EXPECT_EQ(f["bin_size"], 1);
  EXPECT_TRUE(f["has_lines"].get<bool>());
  const double total = f["samples"].get<double>();
  ASSERT_GT(total, 300) << "too few samples to judge";
  std::map<int, double> by_line;
  for (const Json& l : f["lines"]) by_line[l["line"].get<int>()] += l["samples"].get<double>();
  // The two loops hold (nearly) all the samples: only the few set-up instructions are outside.
  EXPECT_GT(by_line[one] + by_line[two], 0.95 * total);
  // Twice the work: ratio 2; 1.5 .. 2.6 is ~4 sigma of the binomial noise at ~280 vs ~570
  // samples, plus some machine noise.
  const double ratio = by_line[two] / by_line[one];
  EXPECT_GT(ratio, 1.5) << j.dump(1);
  EXPECT_LT(ratio, 2.6) << j.dump(1);
  // Instructions: every sampled instruction lies on one of the loops' lines, their samples sum
  // to the function's and to each line's, and each loop's samples sit on more than one
  // instruction of its body (the chain's multiply and add).
  double sum = 0;
  std::map<int, double> ins_by_line;
  std::map<int, int> sampled_ins;
  uint64_t prev = 0;
  for (const Json& ins : f["instructions"]) {
    EXPECT_GT(ins["vaddr"].get<uint64_t>(), prev);
    prev = ins["vaddr"].get<uint64_t>();
    double s = ins["samples"].get<double>();
    sum += s;
    ins_by_line[ins["line"].get<int>()] += s;
    if (s > 0) ++sampled_ins[ins["line"].get<int>()];
    EXPECT_FALSE(ins["text"].get<std::string>().empty());
  }
  EXPECT_NEAR(sum, total, 1e-6);
  EXPECT_NEAR(ins_by_line[one], by_line[one], 1e-6);
  EXPECT_NEAR(ins_by_line[two], by_line[two], 1e-6);
  EXPECT_GE(sampled_ins[one], 1);
  EXPECT_GE(sampled_ins[two], 1);
  // Text: the source lines with their code, the disassembly, no precision caveat at 1 byte.
  std::string text = run("'" + kTool + "' annotate '" + file + "' --top 1 2>/dev/null");
  EXPECT_NE(text.find("LOOP_ONE"), std::string::npos) << text;
  EXPECT_NE(text.find("LOOP_TWO"), std::string::npos) << text;
  EXPECT_NE(text.find("mulsd"), std::string::npos) << text;
  EXPECT_EQ(text.find("precision:"), std::string::npos) << text;
}

TEST(Annotate, WideBinsSayTheyAreApproximate) {
  std::string file = record("loops4", kProg, "loops", "30000000", "SPROFIL_BIN_BYTES=4");
  Json j = annotate_json(file, "two_loops");
  ASSERT_EQ(j["functions"].size(), 1u);
  EXPECT_EQ(j["functions"][0]["bin_size"], 4);
  double sum = 0;
  for (const Json& ins : j["functions"][0]["instructions"]) sum += ins["samples"].get<double>();
  // Split bins still add up to the function's samples (a bin at the function's edge may be
  // partly another function's; here the function is surrounded by padding or code without
  // samples, so within a sample).
  EXPECT_NEAR(sum, j["functions"][0]["samples"].get<double>(), 1.0);
  std::string text = run("'" + kTool + "' annotate '" + file + "' --top 1 2>/dev/null");
  EXPECT_NE(text.find("precision: bins are 4 bytes wide"), std::string::npos) << text;
}

TEST(Annotate, FunctionInASharedLibrary) {
  const int loop = marker_line(ANNOTATE_LIB_SOURCE, "LIB_LOOP");
  std::string file = record("lib", kProg, "lib", "60000000", "SPROFIL_BIN_BYTES=1");
  Json j = annotate_json(file, "annotate_lib_spin");
  ASSERT_EQ(j["functions"].size(), 1u) << j.dump(1);
  const Json& f = j["functions"][0];
  EXPECT_EQ(f["object"], "libreport_annotate_lib.so");
  EXPECT_TRUE(f["has_lines"].get<bool>());
  double on_loop = 0;
  for (const Json& l : f["lines"])
    if (l["line"] == loop) on_loop += l["samples"].get<double>();
  EXPECT_GT(on_loop, 0.9 * f["samples"].get<double>()) << j.dump(1);
  // The instructions are the library's (link-time addresses inside the function's extent).
  for (const Json& ins : f["instructions"]) {
    EXPECT_GE(ins["vaddr"].get<uint64_t>(), f["start"].get<uint64_t>());
    EXPECT_LT(ins["vaddr"].get<uint64_t>(), f["end"].get<uint64_t>());
  }
  EXPECT_GT(f["instructions"].size(), 3u);
}

TEST(Annotate, FunctionInADlopenedPlugin) {
  const int loop = marker_line(ANNOTATE_PLUGIN_SOURCE, "PLUGIN_LOOP");
  std::string file =
      record("plugin", kProg, "plugin", std::string("60000000 '") + ANNOTATE_PLUGIN + "'",
             "SPROFIL_BIN_BYTES=1");
  Json j = annotate_json(file, "annotate_plugin_spin");
  ASSERT_EQ(j["functions"].size(), 1u) << j.dump(1);
  const Json& f = j["functions"][0];
  EXPECT_EQ(f["object"], "libreport_annotate_plugin.so");
  double on_loop = 0, sum = 0;
  for (const Json& l : f["lines"])
    if (l["line"] == loop) on_loop += l["samples"].get<double>();
  for (const Json& ins : f["instructions"]) sum += ins["samples"].get<double>();
  // The loop's line holds (nearly) all of it; instructions add up to the function.
  EXPECT_GT(on_loop, 0.9 * f["samples"].get<double>()) << j.dump(1);
  EXPECT_NEAR(sum, f["samples"].get<double>(), 1e-6);
}

TEST(Annotate, InlinedLinesNameTheInlinedFunction) {
  const int step = marker_line(ANNOTATE_SOURCE, "INL_STEP");
  std::string file = record("inline", kProg, "inline", "100000000", "SPROFIL_BIN_BYTES=1");
  Json j = annotate_json(file, "inline_outer");
  ASSERT_EQ(j["functions"].size(), 1u) << j.dump(1);
  double inlined = 0;
  for (const Json& l : j["functions"][0]["lines"])
    if (l["line"] == step && l["inlined"] == "inl_step") inlined += l["samples"].get<double>();
  // The multiply-add chain is the helper's line, the loop's increment and branch the caller's.
  // A timer's pc is the instruction about to run, so samples fall on the add and on the
  // instruction after it (the caller's increment), about half each here: at least 20% on the
  // helper's line (~300 samples; 20% is > 8 sigma below the ~50% seen).
  EXPECT_GT(inlined, 0.2 * j["functions"][0]["samples"].get<double>()) << j.dump(1);
  std::string text =
      run("'" + kTool + "' annotate '" + file + "' --function inline_outer 2>/dev/null");
  EXPECT_NE(text.find("[inlined inl_step]"), std::string::npos) << text;
}

TEST(Annotate, StrippedBinaryGivesDisassemblyOnlyAndSaysWhy) {
  std::string log;
  const std::string stripped = strip_copy(kProg, "annotate_prog_stripped", Strip::kSymbols, &log);
  ASSERT_FALSE(stripped.empty()) << log;
  ASSERT_EQ(run("readelf -S '" + stripped + "' | grep -c debug_line"), "0\n");
  std::string file = record("stripped", stripped, "loops", "30000000", "SPROFIL_BIN_BYTES=1");
  Json j = annotate_json(file, "two_loops");
  ASSERT_EQ(j["functions"].size(), 1u) << j.dump(1);
  const Json& f = j["functions"][0];
  EXPECT_FALSE(f["has_lines"].get<bool>());
  EXPECT_TRUE(f["lines"].empty());
  EXPECT_NE(f["note"].get<std::string>().find("no source lines"), std::string::npos);
  double sum = 0;
  for (const Json& ins : f["instructions"]) sum += ins["samples"].get<double>();
  EXPECT_GT(f["instructions"].size(), 3u);
  EXPECT_NEAR(sum, f["samples"].get<double>(), 1e-6);
  std::string text =
      run("'" + kTool + "' annotate '" + file + "' --function two_loops 2>/dev/null");
  EXPECT_NE(text.find("# no source lines: annotate_prog_stripped has no DWARF line information"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("mulsd"), std::string::npos) << text;
}

// A program stripped of every symbol (no -rdynamic): its code is "[unknown]"; the hottest
// sampled ranges are disassembled from their first sampled address and say why.
TEST(Annotate, FullyStrippedCodeIsDisassembledByRange) {
  const std::string prog = DIFF_PROG;
  // Stripped of its call-frame table too: no function is found by its FDE (fun_<address>).
  std::string log;
  const std::string stripped =
      strip_copy(prog, "diff_prog_stripped", Strip::kSymbolsAndFrames, &log);
  ASSERT_FALSE(stripped.empty()) << log;
  int status = 0;
  std::string file = temp_dir() + "/stripped_all.sprof";
  log = run("env SPROFIL_BIN_BYTES=1 timeout 120 '" + kTool + "' record -o '" + file + "' -- '" +
                stripped + "' 30000000 1 2>&1",
            &status);
  ASSERT_EQ(status, 0) << log;
  log = run("'" + kTool + "' annotate '" + file + "' --top 3 --format json 2>/dev/null", &status);
  ASSERT_EQ(status, 0) << log;
  Json j = Json::parse(log);
  ASSERT_GE(j["functions"].size(), 1u) << j.dump(1);
  // The unstripped program's symbols (same link-time addresses) tell where the loops are.
  std::map<std::string, report_test::NmSymbol> nm = report_test::nm_functions(prog);
  double in_loops = 0, total = 0;
  for (const Json& f : j["functions"]) {
    // Only the stripped program's ranges (a stray sample elsewhere, in libc or the runtime, has
    // a name of its own; so has its entry point, _start, where the exec's kernel time is).
    if (f["object"].get<std::string>() != "diff_prog_stripped" || f["name"] == "_start") continue;
    EXPECT_EQ(f["name"].get<std::string>().rfind("[unknown] 0x", 0), 0u) << f.dump(1);
    EXPECT_NE(f["note"].get<std::string>().find("no symbol covers these addresses"),
              std::string::npos);
    EXPECT_FALSE(f["has_lines"].get<bool>());
    ASSERT_FALSE(f["instructions"].empty());
    EXPECT_EQ(f["instructions"][0]["vaddr"], f["start"]);
    double sum = 0;
    for (const Json& ins : f["instructions"]) sum += ins["samples"].get<double>();
    EXPECT_NEAR(sum, f["samples"].get<double>(), 1e-6);
    total += f["samples"].get<double>();
    for (const char* fn : {"diff_alpha(long)", "diff_beta(long)", "diff_gamma(long)"}) {
      const report_test::NmSymbol& s = nm[fn];
      uint64_t start = f["start"].get<uint64_t>();
      if (start >= s.addr && start < s.addr + s.size) in_loops += f["samples"].get<double>();
    }
  }
  // The three ranges shown are the three functions' loops, nearly all of the profile.
  EXPECT_GT(in_loops, 0.95 * total) << j.dump(1);
  EXPECT_GT(total, 0.9 * j["total_samples"].get<double>()) << j.dump(1);
}

// A stripped program (dynamic symbols only: -rdynamic, and no call-frame table, which would
// name them fun_<address>) whose six static functions of N multiply-adds each are six
// "[unknown]" ranges (6N together, more than either named function) and whose exported
// mixed_hot_a and mixed_hot_b do 4N and 3N: --top ranks each range by its own samples, so the
// two named functions come first.
TEST(Annotate, TopRanksUnknownRangesByTheirOwnSamples) {
  std::string log;
  const std::string stripped =
      strip_copy(kProg, "annotate_prog_mixed", Strip::kSymbolsAndFrames, &log);
  ASSERT_FALSE(stripped.empty()) << log;
  int status = 0;
  // ~0.5 s: 13 x 14e6 multiply-adds, ~40 samples a hidden function, ~160 and ~120 the named.
  std::string file = record("mixed", stripped, "mixed", "14000000", "SPROFIL_BIN_BYTES=1");
  // The case to rank: report's "[unknown]" row (every range together) is hotter than either
  // named function (expected 6:4, ~240 against ~160 samples).
  Json rep = Json::parse(run("'" + kTool + "' report '" + file + "' --format json 2>/dev/null"));
  double unknown = 0, hot_a = 0;
  for (const Json& r : rep["rows"]) {
    if (r["object"] != "annotate_prog_mixed") continue;
    if (r["name"] == "[unknown]") unknown = r["samples"].get<double>();
    if (r["name"] == "mixed_hot_a(long)") hot_a = r["samples"].get<double>();
  }
  ASSERT_GT(hot_a, 80) << rep.dump(1);
  ASSERT_GT(unknown, hot_a) << rep.dump(1);

  auto top = [&](int n) {
    std::string out = run("'" + kTool + "' annotate '" + file + "' --top " + std::to_string(n) +
                              " --format json 2>/dev/null",
                          &status);
    EXPECT_EQ(status, 0) << out;
    return Json::parse(out);
  };
  Json three = top(3);
  ASSERT_EQ(three["functions"].size(), 3u) << three.dump(1);
  // 4N and 3N against at most ~N for a range (the hottest of six ~40-sample counts: ~55).
  EXPECT_EQ(three["functions"][0]["name"], "mixed_hot_a(long)") << three.dump(1);
  EXPECT_EQ(three["functions"][1]["name"], "mixed_hot_b(long)") << three.dump(1);
  EXPECT_EQ(three["functions"][2]["name"].get<std::string>().rfind("[unknown] 0x", 0), 0u)
      << three.dump(1);

  // Every item: in order of its own samples; --top 3 is the head of the longer list.
  Json all = top(20);
  ASSERT_GE(all["functions"].size(), 8u) << all.dump(1);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(all["functions"][i]["name"], three["functions"][i]["name"]);
  std::map<std::string, report_test::NmSymbol> nm = report_test::nm_functions(kProg);
  std::set<std::string> hidden_hit;
  size_t ranges = 0;
  double prev = 1e300;
  for (const Json& f : all["functions"]) {
    const double samples = f["samples"].get<double>();
    EXPECT_LE(samples, prev) << all.dump(1);
    prev = samples;
    const std::string name = f["name"].get<std::string>();
    if (name.rfind("[unknown] ", 0) != 0) continue;
    // `[unknown] 0xSTART..0xEND` (half-open) or `[unknown] 0xSTART` for one address; the
    // disassembly starts at START and holds whole instructions that start before END.
    const uint64_t start = std::stoull(name.substr(10), nullptr, 16);
    const size_t dots = name.find("..");
    const uint64_t end =
        dots == std::string::npos ? start + 1 : std::stoull(name.substr(dots + 2), nullptr, 16);
    EXPECT_EQ(f["start"].get<uint64_t>(), start) << f.dump(1);
    EXPECT_GT(end, dots == std::string::npos ? start : start + 1) << name;
    ASSERT_FALSE(f["instructions"].empty()) << f.dump(1);
    for (const Json& ins : f["instructions"]) {
      EXPECT_NE(ins["text"], "(bad)") << f.dump(1);
      EXPECT_LT(ins["vaddr"].get<uint64_t>(), end) << f.dump(1);
      EXPECT_LE(ins["vaddr"].get<uint64_t>() + ins["size"].get<uint64_t>(),
                f["end"].get<uint64_t>())
          << f.dump(1);
    }
    if (f["object"] != "annotate_prog_mixed" || ranges++ >= 6) continue;
    // The six hottest ranges: one in each static function (by the unstripped program's symbols).
    for (const auto& [fn, sym] : nm)
      if (fn.rfind("mixed_hidden_", 0) == 0 && start >= sym.addr && start < sym.addr + sym.size)
        hidden_hit.insert(fn);
  }
  EXPECT_EQ(hidden_hit.size(), 6u) << all.dump(1);
}

// The same stripped program with its call-frame table (as `strip` leaves it, and as Debian's
// programs are shipped): each static function is found by its FDE and named fun_<its link-time
// address>, with the extent the unstripped program's symbols give it, in the symbolizer, the
// report and annotate; none of the program's samples is "[unknown]".
TEST(Annotate, StrippedFunctionsAreNamedByTheirCallFrames) {
  std::string log;
  const std::string stripped = strip_copy(kProg, "annotate_prog_cfi", Strip::kSymbols, &log);
  ASSERT_FALSE(stripped.empty()) << log;
  ASSERT_EQ(run("readelf -S '" + stripped + "' | grep -c '\\.eh_frame_hdr'"), "1\n");
  std::map<std::string, report_test::NmSymbol> nm = report_test::nm_functions(kProg);
  auto fun_name = [](uint64_t a) {
    char b[32];
    std::snprintf(b, sizeof b, "fun_%" PRIx64, a);
    return std::string(b);
  };
  symbolize::Symbolizer sym;
  const symbolize::Object* obj = sym.open(stripped, {});
  ASSERT_TRUE(obj->ok()) << obj->warning();
  std::map<std::string, std::string> hidden;  // fun_<address> -> the unstripped name
  for (const auto& [fn, s] : nm) {
    if (fn.rfind("mixed_hidden_", 0) != 0) continue;
    for (uint64_t at : {s.addr, s.addr + s.size - 1}) {
      const symbolize::Symbol* f = obj->function_at(at);
      ASSERT_NE(f, nullptr) << fn;
      EXPECT_EQ(f->name, fun_name(s.addr)) << fn;
      EXPECT_EQ(f->start, s.addr) << fn;
      EXPECT_EQ(f->end, s.addr + s.size) << fn;
    }
    hidden[fun_name(s.addr)] = fn;
  }
  ASSERT_EQ(hidden.size(), 6u);
  // The exported functions keep their dynamic symbols' names and extents.
  const report_test::NmSymbol& hot_a = nm["mixed_hot_a(long)"];
  const symbolize::Symbol* named = obj->function_at(hot_a.addr);
  ASSERT_NE(named, nullptr);
  EXPECT_EQ(named->name, "mixed_hot_a(long)");
  EXPECT_EQ(named->end, hot_a.addr + hot_a.size);

  // ~0.5 s: 13 x 14e6 multiply-adds, ~40 samples a hidden function, ~160 and ~120 the named.
  std::string file = record("cfi", stripped, "mixed", "14000000", "SPROFIL_BIN_BYTES=1");
  Json rep = Json::parse(run("'" + kTool + "' report '" + file + "' --format json 2>/dev/null"));
  std::map<std::string, double> per;
  double unknown = 0, named_hot = 0;
  for (const Json& r : rep["rows"]) {
    if (r["object"] != "annotate_prog_cfi") continue;
    const std::string name = r["name"].get<std::string>();
    const double samples = r["samples"].get<double>();
    if (name == "[unknown]") unknown += samples;
    if (hidden.count(name)) per[name] += samples;
    if (name.rfind("mixed_hot_", 0) == 0) named_hot += samples;
  }
  EXPECT_EQ(unknown, 0) << rep.dump(1);
  ASSERT_EQ(per.size(), 6u) << rep.dump(1);
  double in_hidden = 0;
  for (const auto& [name, samples] : per) {
    EXPECT_GE(samples, 10) << name << " (" << hidden[name] << "), ~40 expected";
    in_hidden += samples;
  }
  // 6N of the 13N the seven functions do (0.46; the bound is over 4 sd of ~500 samples).
  ASSERT_GT(in_hidden + named_hot, 300) << rep.dump(1);
  EXPECT_NEAR(in_hidden / (in_hidden + named_hot), 6.0 / 13.0, 0.1) << rep.dump(1);

  // Annotate disassembles a fun_ function over its extent.
  const std::string first = per.begin()->first;
  const report_test::NmSymbol& s = nm[hidden[first]];
  Json a = annotate_json(file, first);
  ASSERT_EQ(a["functions"].size(), 1u) << a.dump(1);
  const Json& f = a["functions"][0];
  EXPECT_EQ(f["start"].get<uint64_t>(), s.addr) << f.dump(1);
  EXPECT_EQ(f["end"].get<uint64_t>(), s.addr + s.size) << f.dump(1);
  ASSERT_FALSE(f["instructions"].empty()) << f.dump(1);
  double sum = 0;
  for (const Json& ins : f["instructions"]) sum += ins["samples"].get<double>();
  EXPECT_NEAR(sum, f["samples"].get<double>(), 1e-6);
  EXPECT_NEAR(f["samples"].get<double>(), per[first], 1e-6);
}

// A method is found by the last components of its name, as read off the report's line
// (`spin`, `Worker::spin` for `ann::Worker::spin`), and its tab-indented line is printed with
// the tab expanded to spaces, not as an escape. A name that no function ends with fails and
// names the functions that hold it.
TEST(Annotate, MethodByItsLastComponents) {
  const int loop = marker_line(ANNOTATE_SOURCE, "METHOD_LOOP");
  std::string file = record("method", kProg, "method", "100000000", "SPROFIL_BIN_BYTES=1");
  for (const std::string want : {"ann::Worker::spin", "Worker::spin", "spin"}) {
    Json j = annotate_json(file, want);
    ASSERT_EQ(j["functions"].size(), 1u) << want << "\n" << j.dump(1);
    const Json& f = j["functions"][0];
    EXPECT_EQ(f["name"], "ann::Worker::spin(long)") << want;
    double on_loop = 0;
    for (const Json& l : f["lines"])
      if (l["line"] == loop) on_loop += l["samples"].get<double>();
    // The loop is the function's work: ~100 ms, nearly all of its samples on the loop's line.
    EXPECT_GT(on_loop, 0.9 * f["samples"].get<double>()) << j.dump(1);
  }
  std::string text = run("'" + kTool + "' annotate '" + file + "' --function spin 2>&1");
  EXPECT_EQ(text.find("\\x09"), std::string::npos) << text;
  EXPECT_NE(text.find("        for (long i = 0; i < n; ++i) x = x * 0.9999996"), std::string::npos)
      << text;
  // Not a component: "pin" is part of "spin", not a name of its own.
  int status = 0;
  std::string err = run("'" + kTool + "' annotate '" + file + "' --function pin 2>&1", &status);
  EXPECT_NE(status, 0) << err;
  EXPECT_NE(err.find("no function named pin"), std::string::npos) << err;
  EXPECT_NE(err.find("whose name holds it: ann::Worker::spin"), std::string::npos) << err;
}

// GCC's clones at -O2: std::sort's std::__introsort_loop is `void std::__introsort_loop<...>(...)
// [clone .isra.0]` (the report's short name keeps the suffix) and a C helper is
// `clone_spin.constprop.0`. --function takes each name without its suffix, as well as its last
// components and the name with the suffix; each annotates the report's row of that function,
// whose samples its instructions carry. (Before, only the name with its suffix was found.)
TEST(Annotate, ClonesByTheirNamesWithoutTheSuffix) {
  const std::string file = temp_dir() + "/clones.sprof";
  int status = 0;
  const std::string log = run("env SPROFIL_BIN_BYTES=1 timeout 120 '" + kTool + "' record -o '" +
                                  file + "' -- '" + kCloneProg + "' 1000000 2>&1",
                              &status);
  ASSERT_EQ(status, 0) << log;
  const Json report = Json::parse(run("'" + kTool + "' report '" + file + "' --format json"));
  // The rows of the two functions: each a clone (the premise), with samples enough to judge.
  std::map<std::string, double> sort_rows;  // name -> samples
  double spin = 0;
  for (const Json& r : report["rows"]) {
    const std::string name = r["name"];
    if (name.rfind("void std::__introsort_loop<", 0) == 0) sort_rows[name] = r["samples"];
    if (name == "clone_spin.constprop.0") spin = r["samples"];
  }
  ASSERT_FALSE(sort_rows.empty()) << "no std::__introsort_loop row\n" << report.dump(1);
  for (const auto& [name, samples] : sort_rows) {
    ASSERT_NE(name.find(" [clone ."), std::string::npos) << name << ": GCC made no clone";
    EXPECT_GT(samples, 20) << name << ": too few samples to judge";
  }
  EXPECT_GT(spin, 50) << "clone_spin.constprop.0: too few samples\n" << report.dump(1);
  // Each function annotated: the rows' names, their samples (JSON keeps 3 decimals), and the
  // instructions' samples summing to them (1-byte bins: whole samples at instructions).
  auto check = [&](const std::string& want, const std::map<std::string, double>& rows) {
    SCOPED_TRACE("--function " + want);
    const Json j = annotate_json(file, want);
    ASSERT_EQ(j["functions"].size(), rows.size()) << j.dump(1);
    for (const Json& f : j["functions"]) {
      const auto row = rows.find(f["name"].get<std::string>());
      ASSERT_NE(row, rows.end()) << f["name"];
      EXPECT_NEAR(f["samples"].get<double>(), row->second, 0.01);
      double sum = 0;
      for (const Json& ins : f["instructions"]) sum += ins["samples"].get<double>();
      EXPECT_NEAR(sum, row->second, 0.01);
      EXPECT_GT(f["instructions"].size(), 10u);
    }
  };
  check("std::__introsort_loop", sort_rows);
  check("__introsort_loop", sort_rows);
  check(sort_rows.begin()->first, {*sort_rows.begin()});
  check("clone_spin", {{"clone_spin.constprop.0", spin}});
  check("clone_spin.constprop.0", {{"clone_spin.constprop.0", spin}});
}

// A run of two programs that share a library (the report's test program, PIE and non-PIE, both
// calling testlib::lib_work in libreport_testlib.so, run as `prog` and `prognp`): report has a
// row of lib_work per command, and annotate gives each its own header naming its command
// (both read `## testlib::lib_work(long) in libreport_testlib.so (...)` before), with that row's
// samples; the HTML report's detail of each row is its own command's annotation.
TEST(Annotate, OneFunctionOfTwoCommandsNamesEach) {
  const std::string dir = temp_dir() + "/commands";
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(::symlink(TESTPROG, (dir + "/prog").c_str()), 0);
  ASSERT_EQ(::symlink(TESTPROG_NOPIE, (dir + "/prognp").c_str()), 0);
  const std::string file = temp_dir() + "/commands.sprof";
  int status = 0;
  const std::string log = run("cd '" + dir + "' && timeout 120 '" + kTool + "' record -o '" + file +
                                  "' -- sh -c './prog 60000000; ./prognp 60000000' 2>&1",
                              &status);
  ASSERT_EQ(status, 0) << log;
  const Json report = Json::parse(run("'" + kTool + "' report '" + file + "' --format json"));
  std::map<std::string, double> lib_rows;  // comm -> samples
  for (const Json& r : report["rows"])
    if (r["name"] == "testlib::lib_work(long)") lib_rows[r["comm"]] = r["samples"];
  ASSERT_EQ(lib_rows.size(), 2u) << report.dump(1);
  ASSERT_GT(lib_rows["prog"], 20) << "too few samples to judge";
  ASSERT_GT(lib_rows["prognp"], 20) << "too few samples to judge";
  // JSON: one function per command, with its row's samples.
  const Json j = annotate_json(file, "testlib::lib_work");
  ASSERT_EQ(j["functions"].size(), 2u) << j.dump(1);
  std::set<std::string> seen;
  for (const Json& f : j["functions"]) {
    ASSERT_TRUE(f.contains("comm")) << f.dump(1);
    const std::string comm = f["comm"];
    seen.insert(comm);
    EXPECT_NEAR(f["samples"].get<double>(), lib_rows[comm], 0.01) << comm;
  }
  EXPECT_EQ(seen, (std::set<std::string>{"prog", "prognp"}));
  // --comm keeps one.
  std::string out = run("'" + kTool + "' annotate '" + file +
                        "' --comm prognp --function lib_work --format json 2>/dev/null");
  const Json one = Json::parse(out);
  ASSERT_EQ(one["functions"].size(), 1u) << out;
  EXPECT_EQ(one["functions"][0]["comm"], "prognp");
  // Text: every header its own, the command in each of lib_work's.
  const std::string text = run("'" + kTool + "' annotate '" + file + "' --top 20 2>/dev/null");
  std::istringstream in(text);
  std::set<std::string> headers;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) {
      EXPECT_TRUE(headers.insert(line).second) << line << "\n" << text;
    }
  }
  for (const std::string comm : {"prog", "prognp"})
    EXPECT_NE(
        text.find("## testlib::lib_work(long) in libreport_testlib.so, command " + comm + " ("),
        std::string::npos)
        << text;
  // The HTML page: each row of lib_work shows its own command's annotation.
  const std::string page = temp_dir() + "/commands.html";
  run("'" + kTool + "' report '" + file + "' --format html -o '" + page + "' 2>/dev/null");
  const std::string html = read_file(page);
  const std::string open = "<script type=\"application/json\" id=\"sprofil-data\">";
  const size_t from = html.find(open);
  ASSERT_NE(from, std::string::npos);
  const size_t to = html.find("</script>", from);
  const Json d = Json::parse(html.substr(from + open.size(), to - from - open.size()));
  int annotated = 0;
  for (size_t i = 0; i < d["functions"].size(); ++i) {
    const Json& row = d["functions"][i];  // [name, object, comm, samples, ...]
    if (row[0] != "testlib::lib_work(long)") continue;
    const std::string key = std::to_string(i);
    ASSERT_TRUE(d["annotations"].contains(key)) << row.dump() << "\n" << d["annotations"].dump(1);
    EXPECT_NE(d["annotations"][key].get<std::string>().find(", command " +
                                                            row[2].get<std::string>() + " ("),
              std::string::npos)
        << d["annotations"][key];
    ++annotated;
  }
  EXPECT_EQ(annotated, 2);
}

TEST(Annotate, UnknownFunctionFails) {
  std::string file = record("loops_small", kProg, "loops", "10000000", "SPROFIL_BIN_BYTES=1");
  int status = 0;
  run("'" + kTool + "' annotate '" + file + "' --function no_such_function >/dev/null 2>&1",
      &status);
  EXPECT_NE(status, 0);
}

// `sprofil report --by line` agrees with perf's srcline shares on the two loops within 2 points.
// Both profilers sample ONE execution (`perf record -- sprofil record -- prog`), so the only
// differences are the two samplings and their mechanisms, not two runs' timing (separate runs
// differed by up to 2.3 points under CI's load). Shares are taken among the program's own lines on
// both sides (perf also sees the record tool and sprofil's runtime). At 10 kHz over ~1.7 s of CPU
// (~17,000 samples each) a share near 35% has a binomial sd of ~0.37 points, ~0.52 for the
// difference: 2 points is ~3.8 sd.
TEST(Annotate, ByLineAgreesWithPerf) {
  if (run("command -v perf").empty()) GTEST_SKIP() << "no perf";
  const std::string data = temp_dir() + "/perf.data";
  const std::string file = temp_dir() + "/loops10k.sprof";
  const std::string n = "200000000";  // twice kLoopsN: ~1.7 s
  int status = 0;
  // Under the default bins (1 byte): what a user gets without setting anything.
  std::string log = run("env " + default_bins_env() + " timeout 120 perf record -q -o '" + data +
                            "' -e cpu-clock:u -F 10000 -- '" + kTool + "' record -F 10000 -o '" +
                            file + "' -- '" + kProg + "' loops " + n + " 2>&1 >/dev/null",
                        &status);
  if (status != 0 && log.find("perf") != std::string::npos &&
      log.find("sprofil") == std::string::npos)
    GTEST_SKIP() << "perf record is denied or failed here: " << log;
  ASSERT_EQ(status, 0) << log;
  std::string perf =
      run("timeout 120 perf report -i '" + data + "' --stdio --sort srcline -q 2>/dev/null");
  std::map<int, double> perf_share;
  double perf_total = 0;
  std::istringstream in(perf);
  for (std::string line; std::getline(in, line);) {
    size_t colon = line.find("annotate_prog.cpp:");
    if (colon == std::string::npos) continue;
    const double pct = std::atof(line.c_str());
    perf_share[std::atoi(line.c_str() + colon + 18)] += pct;
    perf_total += pct;
  }
  std::string out =
      run("'" + kTool + "' report '" + file + "' --by line --format json 2>/dev/null", &status);
  ASSERT_EQ(status, 0);
  Json j = Json::parse(out);
  std::map<int, double> ours;
  double ours_total = 0;
  for (const Json& r : j["rows"])
    if (r["file"].get<std::string>().find("annotate_prog.cpp") != std::string::npos) {
      ours[r["line"].get<int>()] += r["percent"].get<double>();
      ours_total += r["percent"].get<double>();
    }
  ASSERT_GT(perf_total, 50) << perf;
  ASSERT_GT(ours_total, 50) << out;
  for (const char* marker : {"LOOP_ONE", "LOOP_TWO"}) {
    const int line = marker_line(ANNOTATE_SOURCE, marker);
    const double theirs = 100 * perf_share[line] / perf_total;
    const double mine = 100 * ours[line] / ours_total;
    ASSERT_GT(theirs, 10) << perf;
    EXPECT_NEAR(mine, theirs, 2.0) << marker << "\n" << perf << "\n" << out;
  }
}

// A program compiled from a relative path (`cc ../src/p.c` in its build directory; ccache's
// CCACHE_BASEDIR makes such paths too): its lines name the source by the compilation unit's
// directory, so annotate shows the source text from any working directory, as addr2line
// resolves it. Before, the relative name was opened from annotate's own directory: no text.
TEST(Annotate, SourceCompiledFromARelativePathIsFoundFromAnywhere) {
  if (run("command -v cc").empty()) GTEST_SKIP() << "no C compiler";
  const std::string dir = temp_dir() + "/relative";
  int status = 0;
  std::string log = run("mkdir -p '" + dir + "/src' '" + dir + "/build' && printf '%s\\n' " +
                            "'volatile unsigned long x;' " +
                            "'__attribute__((noinline)) void relative_hot(long n) { for (long i "
                            "= 0; i < n; i++) x += i; }' " +
                            "'int main(void) { relative_hot(300000000); return 0; }' > '" + dir +
                            "/src/p.c' && cd '" + dir + "/build' && cc -O1 -g ../src/p.c -o p 2>&1",
                        &status);
  ASSERT_EQ(status, 0) << log;
  const std::string file = dir + "/p.sprof";
  log = run("cd '" + dir + "/build' && '" + kTool + "' record -q -o '" + file + "' -- ./p 2>&1",
            &status);
  ASSERT_EQ(status, 0) << log;
  const std::string text =
      run("cd / && '" + kTool + "' annotate '" + file + "' --function relative_hot 2>&1");
  EXPECT_NE(text.find("for (long i = 0; i < n; i++) x += i;"), std::string::npos) << text;
  const std::string json =
      run("cd / && '" + kTool + "' report '" + file + "' --by line --format json");
  const std::string source = (std::filesystem::path(dir) / "src/p.c").lexically_normal().string();
  EXPECT_NE(json.find("\"" + source + "\""), std::string::npos) << json.substr(0, 600);
}

}  // namespace
}  // namespace sprofil::report_test
