// `sprofil diff` on real recordings of tests/report/diff_prog.cpp (three functions of equal
// work per iteration, diff_beta doing FACTOR times the others' work): the statistics' pieces
// against known values, A/A pairs that flag (almost) nothing, an A/B pair (diff_beta 2x slower)
// that flags diff_beta with the right size, and interop with `go tool pprof -diff_base`. And
// the pairs diff refuses or warns about: other clocks, other programs, a killed run, a merged
// profile against its run.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "report/diff.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using Json = nlohmann::json;

const std::string kTool = SPROFIL_TOOL;
const std::string kProg = DIFF_PROG;
// ~0.7 s and ~700 samples per run at the default 1000 Hz on this machine.
const std::string kIterations = "80000000";

// Records `command` (words for record, after --) with record's `flags`; *status gets record's
// exit status, else it must be 0.
std::string record_command(const std::string& name, const std::string& flags,
                           const std::string& command, int* status = nullptr) {
  std::string out = temp_dir() + "/" + name + ".sprof";
  int st = 0;
  std::string log = run(
      "timeout 120 '" + kTool + "' record " + flags + " -o '" + out + "' -- " + command + " 2>&1",
      &st);
  if (status != nullptr)
    *status = st;
  else
    EXPECT_EQ(st, 0) << log;
  return out;
}

std::string record(const std::string& name, const std::string& factor) {
  return record_command(name, "", "'" + kProg + "' " + kIterations + " " + factor);
}

Json diff_json(const std::string& a, const std::string& b, const std::string& args = "") {
  int status = 0;
  std::string out =
      run("'" + kTool + "' diff '" + a + "' '" + b + "' --format json " + args + " 2>/dev/null",
          &status);
  EXPECT_EQ(status, 0) << out;
  return Json::parse(out);
}

const Json* row_named(const Json& j, const std::string& name) {
  for (const Json& r : j["rows"])
    if (r["name"] == name) return &r;
  return nullptr;
}

TEST(DiffStats, TwoProportionTestAndHolmMatchKnownValues) {
  // 50/100 vs 50/100: no difference. 30/100 vs 50/100: z = 2.887, p = 0.00389 (textbook pooled
  // z test; R prop.test without continuity correction gives the same).
  EXPECT_NEAR(report::two_proportion_p(50, 100, 50, 100), 1.0, 1e-12);
  EXPECT_NEAR(report::two_proportion_p(30, 100, 50, 100), 0.003892, 2e-6);
  // Holm: sorted p 0.01, 0.02, 0.04 over m = 3 -> 0.03, 0.04, 0.04 (monotone step-down).
  std::vector<double> adj = report::holm({0.04, 0.01, 0.02});
  EXPECT_NEAR(adj[0], 0.04, 1e-12);
  EXPECT_NEAR(adj[1], 0.03, 1e-12);
  EXPECT_NEAR(adj[2], 0.04, 1e-12);
  // Newcombe's hybrid score interval, Newcombe (1998) table II example (56/70 vs 48/80):
  // p1 - p2 = 0.2, interval 0.0524 .. 0.3339; ours is p2 - p1, so the mirror image.
  report::Interval iv = report::newcombe(56, 70, 48, 80);
  EXPECT_NEAR(iv.lo, -0.3339, 5e-4);
  EXPECT_NEAR(iv.hi, -0.0524, 5e-4);
}

// A/A: two runs of the same program. Holm bounds the chance that a pair flags any row by 5%
// when the counts are binomial (bench/diff_aa.sh measures the rate over many pairs); over 4
// pairs at most 1 may flag (the chance of 2 or more is ~1.4% at a 5% rate).
TEST(Diff, SameProgramTwiceFlagsAlmostNothing) {
  int flagged_pairs = 0;
  for (int i = 0; i < 4; ++i) {
    std::string a = record("aa_a" + std::to_string(i), "1");
    std::string b = record("aa_b" + std::to_string(i), "1");
    Json j = diff_json(a, b);
    ASSERT_GE(j["rows"].size(), 3u);
    EXPECT_EQ(j["correction"], "holm");
    bool any = false;
    for (const Json& r : j["rows"]) {
      any = any || r["significant"].get<bool>();
      // The interval holds the change, and no share moved by much.
      EXPECT_LE(r["change_ci95_low"].get<double>(), r["change"].get<double>());
      EXPECT_GE(r["change_ci95_high"].get<double>(), r["change"].get<double>());
    }
    flagged_pairs += any ? 1 : 0;
    for (const char* fn : {"diff_alpha(long)", "diff_beta(long)", "diff_gamma(long)"}) {
      const Json* r = row_named(j, fn);
      ASSERT_NE(r, nullptr) << fn << "\n" << j.dump(1);
      // Each does a third of the work: ~33% in both runs, within 12 points (a change's sigma is
      // 2.5 points at ~700 samples a run).
      EXPECT_NEAR((*r)["base_percent"].get<double>(), 100.0 / 3, 12) << fn << "\n" << j.dump(1);
      EXPECT_NEAR((*r)["change"].get<double>(), 0, 12) << fn << "\n" << j.dump(1);
    }
  }
  EXPECT_LE(flagged_pairs, 1);
}

// A/B: diff_beta does twice the work in the new run. Its share goes from 1/3 to 1/2 (+16.7
// points), its time doubles; the others' time stays.
TEST(Diff, FunctionMadeTwiceSlowerIsFlagged) {
  std::string a = record("ab_base", "1");
  std::string b = record("ab_new", "2");
  Json j = diff_json(a, b);
  const Json* beta = row_named(j, "diff_beta(long)");
  ASSERT_NE(beta, nullptr) << j.dump(1);
  EXPECT_TRUE((*beta)["significant"].get<bool>()) << j.dump(1);
  EXPECT_EQ(j["rows"][0]["name"], "diff_beta(long)") << "the largest significant change first";
  // +16.7 points expected; the 95% interval (about +-5 points at ~700/900 samples) must exclude
  // 0 and the point estimate lie within 8 points of the expectation.
  EXPECT_GT((*beta)["change_ci95_low"].get<double>(), 0);
  EXPECT_NEAR((*beta)["change"].get<double>(), 100.0 / 2 - 100.0 / 3, 8);
  double ratio = (*beta)["new_seconds"].get<double>() / (*beta)["base_seconds"].get<double>();
  EXPECT_GT(ratio, 1.5);  // 2x the work: 1.5 .. 2.7 allows ~25% sampling and machine noise
  EXPECT_LT(ratio, 2.7);
  EXPECT_NEAR((*beta)["change_seconds"].get<double>(),
              (*beta)["new_seconds"].get<double>() - (*beta)["base_seconds"].get<double>(), 1e-6);
  for (const char* fn : {"diff_alpha(long)", "diff_gamma(long)"}) {
    const Json* r = row_named(j, fn);
    ASSERT_NE(r, nullptr);
    double base = (*r)["base_seconds"].get<double>();
    EXPECT_LT(std::fabs((*r)["change_seconds"].get<double>()), 0.35 * base) << fn;
    EXPECT_LT((*r)["change"].get<double>(), 0) << fn << ": its share shrinks";
  }
  // Significant rows come first in every format.
  bool seen_plain = false;
  for (const Json& r : j["rows"]) {
    if (!r["significant"].get<bool>()) seen_plain = true;
    EXPECT_FALSE(seen_plain && r["significant"].get<bool>());
  }
  // CSV and text say the same about diff_beta.
  std::string csv = run("'" + kTool + "' diff '" + a + "' '" + b + "' --format csv 2>/dev/null");
  EXPECT_EQ(csv.rfind("significant,base_percent,new_percent,change,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\n1,"), std::string::npos) << csv;
  std::string text = run("'" + kTool + "' diff '" + a + "' '" + b + "' 2>/dev/null");
  EXPECT_NE(text.find("Holm"), std::string::npos) << text;
  std::istringstream lines(text);
  std::string line;
  bool found = false;
  while (std::getline(lines, line))
    if (line.find("diff_beta(long)") != std::string::npos) {
      found = true;
      EXPECT_EQ(line[0], '*') << line;
    }
  EXPECT_TRUE(found) << text;
  // --by object: (nearly) all in the program's own object in both, nothing to flag (a stray
  // sample may land in libc or the vDSO: a row of its own, not significant either).
  Json o = diff_json(a, b, "--by object");
  ASSERT_GE(o["rows"].size(), 1u) << o.dump(1);
  bool program_row = false;
  for (const Json& r : o["rows"]) {
    EXPECT_FALSE(r["significant"].get<bool>()) << r.dump();
    if (r["base_percent"].get<double>() > 95 && r["new_percent"].get<double>() > 95)
      program_row = true;
  }
  EXPECT_TRUE(program_row) << o.dump(1);
  // --by line: diff_beta's loop line is flagged.
  Json l = diff_json(a, b, "--by line");
  bool line_flagged = false;
  for (const Json& r : l["rows"])
    if (r["name"] == "diff_beta(long)" && r["significant"].get<bool>() && r["line"].get<int>() > 0)
      line_flagged = true;
  EXPECT_TRUE(line_flagged) << l.dump(1);
}

// pprof's own diff over sprofil's pprof export: diff_beta's flat time grows (positive), the
// others' change little.
TEST(Diff, PprofDiffBaseAgrees) {
  if (run("command -v go").empty()) GTEST_SKIP() << "go is not installed (golang-go)";
  std::string a = record("pp_base", "1");
  std::string b = record("pp_new", "2");
  for (const std::string& f : {a, b}) {
    int status = 0;
    std::string log =
        run("'" + kTool + "' report '" + f + "' --format pprof -o '" + f + ".pb.gz' 2>&1", &status);
    ASSERT_EQ(status, 0) << log;
  }
  int status = 0;
  std::string top = run("HOME=" + temp_dir() + " timeout 120 go tool pprof -top -diff_base '" + a +
                            ".pb.gz' '" + b + ".pb.gz' 2>&1",
                        &status);
  ASSERT_EQ(status, 0) << top;
  std::map<std::string, double> flat_ms;
  std::istringstream lines(top);
  std::string line;
  while (std::getline(lines, line)) {
    size_t at = line.find("diff_");
    if (at == std::string::npos) continue;
    std::istringstream ls(line);
    std::string flat;
    ls >> flat;
    double scale =
        flat.find("ms") != std::string::npos ? 1 : (flat.find('s') != std::string::npos ? 1000 : 1);
    flat_ms[line.substr(at, line.find('(', at) - at)] = std::atof(flat.c_str()) * scale;
  }
  ASSERT_TRUE(flat_ms.count("diff_beta")) << top;
  Json j = diff_json(a, b);
  double change_ms = 1000 * (*row_named(j, "diff_beta(long)"))["change_seconds"].get<double>();
  // pprof's delta is new - base in time: positive, and the same as sprofil's change in time
  // (both are samples * tick; within 2 ms of rounding).
  EXPECT_GT(flat_ms["diff_beta"], 0) << top;
  EXPECT_NEAR(flat_ms["diff_beta"], change_ms, 2.0) << top;
}

// Runs `sprofil diff A B ARGS`: standard output, standard error in *err.
std::string diff_output(const std::string& a, const std::string& b, const std::string& args,
                        int* status, std::string* err) {
  const std::string err_file = temp_dir() + "/diff_stderr.txt";
  std::string out =
      run("'" + kTool + "' diff '" + a + "' '" + b + "' " + args + " 2>'" + err_file + "'", status);
  *err = read_file(err_file);
  return out;
}

bool has_warning(const Json& j, const std::string& part) {
  for (const Json& w : j["warnings"])
    if (w.get<std::string>().find(part) != std::string::npos) return true;
  return false;
}

// ~0.2 s a run: these tests look at warnings, not at shares.
const std::string kShort = "20000000";

// A CPU clock against the wall clock: shares of different quantities. Refused like merge
// refuses them, with merge's wording; --force compares them under the warning.
TEST(Diff, DifferentClocksAreRefused) {
  std::string a = record_command("clock_cpu", "--clock cpu", "'" + kProg + "' " + kShort + " 1");
  std::string b = record_command("clock_wall", "--clock wall", "'" + kProg + "' " + kShort + " 1");
  int status = 0;
  std::string err;
  std::string out = diff_output(a, b, "", &status, &err);
  EXPECT_NE(status, 0) << out;
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("clock differs: cpu in the base profile, wall in the new one"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("--force"), std::string::npos) << err;
  // merge says the same of the pair.
  run("'" + kTool + "' merge -o '" + temp_dir() + "/clock_merged.sprof' '" + a + "' '" + b +
          "' >/dev/null 2>&1",
      &status);
  EXPECT_NE(status, 0);
  Json j = diff_json(a, b, "--force");
  ASSERT_FALSE(j["warnings"].empty()) << j.dump(1);
  EXPECT_NE(j["warnings"][0].get<std::string>().find("clock differs"), std::string::npos)
      << j.dump(1);
}

// Two CPU clocks, record's default and --clock sampler: one quantity (CPU time), so diff
// compares them, under a warning naming both clocks; the shares agree as an A/A pair's do.
// merge refuses the pair, saying why (the merged profile names one clock), and with --force
// writes a profile of the first one's clock.
TEST(Diff, CpuClocksCompareUnderAWarning) {
  const std::string cmd = "'" + kProg + "' " + kIterations + " 1";
  const std::string a = record_command("clock_default", "", cmd);
  const std::string b = record_command("clock_sampler", "--clock sampler", cmd);
  const std::string base_clock =
      Json::parse(run("'" + kTool + "' report '" + a + "' --format json"))["clock"];
  ASSERT_EQ(Json::parse(run("'" + kTool + "' report '" + b + "' --format json"))["clock"],
            "sampler");
  if (base_clock == "sampler" || base_clock == "wall")
    GTEST_SKIP() << "record's default clock here is " << base_clock;
  const std::string warning = "clock differs: " + base_clock +
                              " in the base profile, sampler in the new one; both measure CPU time";
  int status = 0;
  std::string err;
  const std::string text = diff_output(a, b, "", &status, &err);
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(text.find("# warning: " + warning + "\n"), std::string::npos) << text;
  Json j = diff_json(a, b);
  ASSERT_FALSE(j["warnings"].empty()) << j.dump(1);
  EXPECT_EQ(j["warnings"][0], warning) << j.dump(1);
  for (const char* fn : {"diff_alpha(long)", "diff_beta(long)", "diff_gamma(long)"}) {
    const Json* r = row_named(j, fn);
    ASSERT_NE(r, nullptr) << fn << "\n" << j.dump(1);
    // A third of the work each: ~33% under both clocks, within 12 points (as the A/A pairs).
    EXPECT_NEAR((*r)["base_percent"].get<double>(), 100.0 / 3, 12) << fn << "\n" << j.dump(1);
    EXPECT_NEAR((*r)["new_percent"].get<double>(), 100.0 / 3, 12) << fn << "\n" << j.dump(1);
  }
  // merge: refused with the reason, not "different things"; --force merges as the first's.
  const std::string merged = temp_dir() + "/clock_cpu_merged.sprof";
  const std::string err_file = temp_dir() + "/merge_stderr.txt";
  run("'" + kTool + "' merge -o '" + merged + "' '" + a + "' '" + b + "' 2>'" + err_file + "'",
      &status);
  err = read_file(err_file);
  EXPECT_EQ(WEXITSTATUS(status), 1) << err;
  EXPECT_NE(err.find(b + ": clock differs: " + base_clock +
                     " in the first profile, sampler in this one; both measure CPU time, but a "
                     "merged profile names one clock for all its samples, the first's (" +
                     base_clock + ") (--force merges them anyway)"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("different things"), std::string::npos) << err;
  run("'" + kTool + "' merge --force -o '" + merged + "' '" + a + "' '" + b + "' 2>'" + err_file +
          "'",
      &status);
  EXPECT_EQ(status, 0) << read_file(err_file);
  EXPECT_EQ(Json::parse(run("'" + kTool + "' report '" + merged + "' --format json"))["clock"],
            base_clock);
}

// A profile of no sample (a command that ended before its first) has no shares: diff refuses
// it, naming its side, with or without --force, and writes nothing (before, its rows read
// "+27.41 [+25.33, +29.61] p(Holm) 1" against it).
TEST(Diff, ProfileWithoutSamplesIsRefused) {
  // At 1 Hz: `true` (~1 ms) at the default 1000 Hz takes a sample or two in most runs here.
  const std::string empty = record_command("no_samples", "-F 1", "true");
  const std::string full = record_command("some_samples", "", "'" + kProg + "' " + kShort + " 1");
  int status = 0;
  const Json e = Json::parse(run("'" + kTool + "' report '" + empty + "' --format json"));
  ASSERT_EQ(e["total_samples"], 0) << "`true` took a sample: nothing to test";
  std::string err;
  for (const std::string force : {"", "--force"}) {
    EXPECT_EQ(diff_output(empty, full, force, &status, &err), "");
    EXPECT_EQ(WEXITSTATUS(status), 1) << err;
    EXPECT_NE(err.find(empty + ": the base profile has no samples"), std::string::npos) << err;
    EXPECT_EQ(diff_output(full, empty, force + " --format json", &status, &err), "");
    EXPECT_EQ(WEXITSTATUS(status), 1) << err;
    EXPECT_NE(err.find(empty + ": the new profile has no samples"), std::string::npos) << err;
  }
  EXPECT_EQ(diff_output(empty, empty, "", &status, &err), "");
  EXPECT_EQ(WEXITSTATUS(status), 1) << err;
  EXPECT_NE(err.find("neither profile has samples"), std::string::npos) << err;
}

// Another program warns (its `[unknown]` rows show their object in the text); the same program
// copied to another directory (a rebuild elsewhere) does not.
TEST(Diff, DifferentProgramsWarn) {
  std::string a = record_command("prog_a", "", "'" + kProg + "' " + kShort + " 1");
  // The program stripped of every symbol and of its call-frame table (which would name its
  // functions fun_<address>), under another name: its code is "[unknown]". And of its build-id,
  // which would make it the same program (profile::program_difference).
  std::string log;
  const std::string stripped =
      strip_copy(kProg, "diff_prog_stripped", Strip::kSymbolsAndFrames, &log);
  ASSERT_FALSE(stripped.empty()) << log;
  int status = 0;
  log = run("objcopy --remove-section .note.gnu.build-id '" + stripped + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << log;
  std::string b = record_command("prog_stripped", "", "'" + stripped + "' " + kShort + " 1");
  Json j = diff_json(a, b);
  // (The path as the agent saw it: the temporary directory's without its doubled slash.)
  EXPECT_TRUE(has_warning(j, "program differs: " + kProg + " in the base profile, ")) << j.dump(1);
  EXPECT_TRUE(has_warning(j, "/diff_prog_stripped in the new one")) << j.dump(1);
  std::string err;
  std::string text = diff_output(a, b, "", &status, &err);
  ASSERT_EQ(status, 0) << err;
  EXPECT_NE(text.find("# warning: program differs"), std::string::npos) << text;
  // Every `[unknown]` row names its object: the stripped program's, and any other object's
  // unnamed code a sample fell in (a CI run had one in the loader's, `[unknown]
  // ld-linux-x86-64.so.2`).
  bool stripped_row = false;
  const std::regex with_object("\\[unknown\\]  \\S");
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (line.find("[unknown]") != std::string::npos && line[0] != '#') {
      EXPECT_TRUE(std::regex_search(line, with_object)) << line;
      stripped_row |= line.find("[unknown]  diff_prog_stripped") != std::string::npos;
    }
  EXPECT_TRUE(stripped_row) << text;
  // CSV: the warning on standard error (the table has no room for it).
  diff_output(a, b, "--format csv", &status, &err);
  EXPECT_NE(err.find("warning: program differs"), std::string::npos) << err;

  const std::string dir = temp_dir() + "/elsewhere";
  ::mkdir(dir.c_str(), 0755);
  log = run("cp '" + kProg + "' '" + dir + "/' 2>&1", &status);
  ASSERT_EQ(status, 0) << log;
  std::string c =
      record_command("prog_elsewhere", "",
                     "'" + dir + "/" + kProg.substr(kProg.rfind('/') + 1) + "' " + kShort + " 1");
  Json same = diff_json(a, c);
  EXPECT_FALSE(has_warning(same, "program differs")) << same.dump(1);
  EXPECT_NE(row_named(same, "diff_beta(long)"), nullptr) << same.dump(1);
}

// Builds DIR/prog from a C file whose one function, HOT, burns 0.2 s of CPU (reading the clock
// between loops of its own); `pad` bytes of
// read-only data make the file that much larger. False if it does not build.
bool build_hot(const std::string& dir, const std::string& hot, size_t pad = 1) {
  const std::string src = dir + "/prog.c";
  FILE* f = fopen(src.c_str(), "w");
  if (f == nullptr) return false;
  fprintf(f,
          "#include <time.h>\n"
          "static double cpu(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, "
          "&t); return t.tv_sec + t.tv_nsec / 1e9; }\n"
          "volatile unsigned long x;\n"
          "__attribute__((used)) static const char pad[%zu] = {1};\n"
          "__attribute__((noinline)) void %s(void) {\n"
          "  do for (int i = 0; i < 100000; i++) x++; while (cpu() < 0.2);\n"
          "}\n"
          "int main(void) { %s(); return 0; }\n",
          pad, hot.c_str(), hot.c_str());
  fclose(f);
  int status = 0;
  run("cc -O1 -o '" + dir + "/prog' '" + src + "' 2>&1", &status);
  return status == 0;
}

std::string build_id_of(const std::string& file) {
  return run("readelf -n '" + file + "' | awk '/Build ID/ {printf \"%s\", $3}'");
}

// The base profile of a program rebuilt in place since its run: its object at that path has
// another build-id now, so its functions are named from its own build-id's file where there is
// one (debuginfod's, here a client cache made by hand and an unreachable server), not from the
// new build; without one, from the new build with the "build-id mismatch" warning. Recorded
// with -N: record keeps no copy of its own (the next test).
TEST(Diff, ProgramRebuiltSinceTheRunIsNamedByItsBuildId) {
  if (run("command -v cc").empty()) GTEST_SKIP() << "no C compiler";
  const std::string dir = temp_dir() + "/rebuilt";
  ::mkdir(dir.c_str(), 0755);
  const std::string prog = dir + "/prog";
  ASSERT_TRUE(build_hot(dir, "hot_before"));
  const std::string base = record_command("rebuilt_base", "-N", "'" + prog + "'");
  const std::string id = build_id_of(prog);
  ASSERT_FALSE(id.empty());
  const std::string cache = dir + "/cache";
  int status = 0;
  std::string log = run("mkdir -p '" + cache + "/" + id + "' && cp '" + prog + "' '" + cache + "/" +
                            id + "/executable' 2>&1",
                        &status);
  ASSERT_EQ(status, 0) << log;
  ASSERT_TRUE(build_hot(dir, "hot_after_the_rebuild"));
  auto report = [&](const std::string& env) {
    return run(env + "'" + kTool + "' report '" + base + "' --format csv 2>&1");
  };
  const std::string named = report("DEBUGINFOD_URLS=http://127.0.0.1:9 DEBUGINFOD_CACHE_PATH='" +
                                   cache + "' DEBUGINFOD_TIMEOUT=2 ");
  EXPECT_NE(named.find("hot_before"), std::string::npos) << named;
  EXPECT_EQ(named.find("hot_after_the_rebuild"), std::string::npos) << named;
  EXPECT_EQ(named.find("build-id mismatch"), std::string::npos) << named;
  const std::string mismatched = report("DEBUGINFOD_URLS= ");
  EXPECT_EQ(mismatched.find("hot_before"), std::string::npos) << mismatched;
  EXPECT_NE(mismatched.find("build-id mismatch"), std::string::npos) << mismatched;
}

// The loop users run: profile, change the code, rebuild in place, profile again, diff. record
// keeps a private copy of the program by its build-id (SPROFIL_BUILDID_DIR), so the base
// profile's samples keep their function after the rebuild, with no debuginfod.
TEST(Diff, ProgramRebuiltSinceTheRunIsNamedFromRecordsBuildIdCache) {
  if (run("command -v cc").empty()) GTEST_SKIP() << "no C compiler";
  const std::string dir = temp_dir() + "/rebuilt_cached";
  ::mkdir(dir.c_str(), 0755);
  const std::string prog = dir + "/prog";
  const std::string cache = dir + "/build-id";
  const std::string env = "DEBUGINFOD_URLS= SPROFIL_BUILDID_DIR='" + cache + "' ";
  auto record_env = [&](const std::string& name, const std::string& flags) {
    const std::string out = dir + "/" + name + ".sprof";
    int status = 0;
    const std::string log = run(env + "timeout 120 '" + kTool + "' record " + flags + " -o '" +
                                    out + "' -- '" + prog + "' 2>&1",
                                &status);
    EXPECT_EQ(status, 0) << log;
    return out;
  };
  auto files = [&] { return run("find '" + cache + "' -type f -printf '%P %m\\n' | sort"); };
  ASSERT_TRUE(build_hot(dir, "hot_before"));
  const std::string id = build_id_of(prog);
  ASSERT_GT(id.size(), 2u);

  record_env("unkept", "-N");
  EXPECT_EQ(files(), "") << "-N keeps nothing";
  const std::string base = record_env("base", "");
  record_env("again", "");
  EXPECT_EQ(files(), id.substr(0, 2) + "/" + id.substr(2) + " 600\n")
      << "one private copy of the one build";
  EXPECT_EQ(run("stat -c %a '" + cache + "' '" + cache + "/" + id.substr(0, 2) + "'"),
            "700\n700\n");
  EXPECT_EQ(run("cmp '" + prog + "' '" + cache + "/" + id.substr(0, 2) + "/" + id.substr(2) +
                "' && echo same"),
            "same\n");

  ASSERT_TRUE(build_hot(dir, "hot_after_the_rebuild"));
  const std::string now = record_env("new", "");
  const std::string named = run(env + "'" + kTool + "' report '" + base + "' --format csv 2>&1");
  EXPECT_NE(named.find("hot_before"), std::string::npos) << named;
  EXPECT_EQ(named.find("hot_after_the_rebuild"), std::string::npos) << named;
  EXPECT_EQ(named.find("build-id mismatch"), std::string::npos) << named;

  int status = 0;
  const Json d = Json::parse(
      run(env + "'" + kTool + "' diff '" + base + "' '" + now + "' --format json 2>/dev/null",
          &status));
  ASSERT_EQ(status, 0);
  const Json* before = row_named(d, "hot_before");
  const Json* after = row_named(d, "hot_after_the_rebuild");
  ASSERT_NE(before, nullptr) << d.dump(1);
  ASSERT_NE(after, nullptr) << d.dump(1);
  // Each function's whole run (0.2 s of a run of about as much) on its own side only.
  EXPECT_GT((*before)["base_percent"].get<double>(), 80.0) << d.dump(1);
  EXPECT_EQ((*before)["new_percent"].get<double>(), 0.0) << d.dump(1);
  EXPECT_EQ((*after)["base_percent"].get<double>(), 0.0) << d.dump(1);
  EXPECT_GT((*after)["new_percent"].get<double>(), 80.0) << d.dump(1);

  // A cache that is not private is not written to, and record says so.
  const std::string kept = files();
  EXPECT_NE(kept.find(build_id_of(prog).substr(2)), std::string::npos) << kept;
  ASSERT_EQ(::chmod(cache.c_str(), 0755), 0);
  ASSERT_TRUE(build_hot(dir, "hot_third"));
  std::string log =
      run(env + "'" + kTool + "' record -o '" + dir + "/third.sprof' -- '" + prog + "' 2>&1");
  EXPECT_NE(log.find("not kept in the build-id cache"), std::string::npos) << log;
  EXPECT_NE(log.find("not a private directory"), std::string::npos) << log;
  EXPECT_EQ(files(), kept) << "nothing added";

  // Root (sudo keeps the user's HOME) makes no cache in another user's directory.
  if (::geteuid() != 0) return;
  const std::string home = dir + "/users_home";
  ASSERT_EQ(::mkdir(home.c_str(), 0755), 0);
  ASSERT_EQ(::chown(home.c_str(), 65534, 65534), 0);
  log = run("HOME='" + home + "' XDG_CACHE_HOME= SPROFIL_BUILDID_DIR= '" + kTool + "' record -o '" +
            dir + "/sudo.sprof' -- '" + prog + "' 2>&1");
  EXPECT_NE(log.find("not made by root in another user's directory"), std::string::npos) << log;
  EXPECT_EQ(run("find '" + home + "' -mindepth 1"), "") << "nothing made there";
}

// The cache stays under SPROFIL_BUILDID_CACHE_MB: a new copy removes the copies used longest
// ago, never the run's own.
TEST(Diff, BuildIdCacheKeepsUnderItsSize) {
  if (run("command -v cc").empty()) GTEST_SKIP() << "no C compiler";
  const std::string dir = temp_dir() + "/cache_size";
  ::mkdir(dir.c_str(), 0755);
  const std::string cache = dir + "/build-id";
  std::vector<std::string> ids;
  for (const char* hot : {"first_build", "second_build", "third_build"}) {
    ASSERT_TRUE(build_hot(dir, hot, 600 * 1024));  // three of 0.6 MB under a limit of 1 MB
    ids.push_back(build_id_of(dir + "/prog"));
    int status = 0;
    const std::string log =
        run("SPROFIL_BUILDID_DIR='" + cache + "' SPROFIL_BUILDID_CACHE_MB=1 timeout 120 '" + kTool +
                "' record -q -o '" + dir + "/p.sprof' -- '" + dir + "/prog' 2>&1",
            &status);
    ASSERT_EQ(status, 0) << log;
    const std::string listed = run("find '" + cache + "' -type f -printf '%P\\n'");
    EXPECT_EQ(listed, ids.back().substr(0, 2) + "/" + ids.back().substr(2) + "\n")
        << "only the newest copy fits";
  }
  // 0 MB: no cache at all; what is there stays.
  ASSERT_TRUE(build_hot(dir, "fourth_build", 1));
  int status = 0;
  run("SPROFIL_BUILDID_DIR='" + cache + "' SPROFIL_BUILDID_CACHE_MB=0 '" + kTool +
          "' record -q -o '" + dir + "/p.sprof' -- '" + dir + "/prog' 2>&1",
      &status);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(run("find '" + cache + "' -type f -printf '%P\\n'"),
            ids.back().substr(0, 2) + "/" + ids.back().substr(2) + "\n");
}

// A run the program ends by SIGKILL: `report`'s "did not finish cleanly" warning, in every
// format, prefixed with the side it is about.
TEST(Diff, KilledRunWarns) {
  std::string a = record_command("finished", "", "'" + kProg + "' " + kShort + " 1");
  int status = 0;
  std::string b = record_command("killed", "", "'" + kProg + "' " + kShort + " 1 kill", &status);
  ASSERT_NE(status, 0) << "the program was to end by SIGKILL";
  std::string report = run("'" + kTool + "' report '" + b + "' 2>&1");
  ASSERT_NE(report.find("did not finish cleanly"), std::string::npos) << report;
  Json j = diff_json(a, b);
  EXPECT_TRUE(has_warning(j, "new: the profile did not finish cleanly")) << j.dump(1);
  EXPECT_FALSE(has_warning(j, "base: ")) << j.dump(1);
  EXPECT_NE(row_named(j, "diff_beta(long)"), nullptr) << j.dump(1);
  std::string err;
  std::string text = diff_output(b, a, "", &status, &err);
  EXPECT_EQ(status, 0) << err;
  EXPECT_NE(text.find("# warning: base: the profile did not finish cleanly"), std::string::npos)
      << text;
  diff_output(a, b, "--format csv", &status, &err);
  EXPECT_NE(err.find("warning: new: the profile did not finish cleanly"), std::string::npos) << err;
}

// A run of two processes against its own merge (one process, rows without a command): the rows
// match by object and name, so the same samples show no change.
TEST(Diff, MergedProfileMatchesItsRun) {
  const std::string prog = "'" + kProg + "' " + kShort;
  std::string r =
      record_command("two_procs", "", "sh -c \"" + prog + " 1 >/dev/null & " + prog + " 2; wait\"");
  Json rep = Json::parse(run("'" + kTool + "' report '" + r + "' --format json 2>/dev/null"));
  ASSERT_GE(rep["processes"].size(), 2u) << rep.dump(1);
  ASSERT_TRUE(rep["rows"][0].contains("comm")) << "rows per command expected\n" << rep.dump(1);
  const std::string m = temp_dir() + "/two_procs_merged.sprof";
  int status = 0;
  std::string log = run("'" + kTool + "' merge -o '" + m + "' '" + r + "' 2>&1", &status);
  ASSERT_EQ(status, 0) << log;
  for (const auto& [base, next] : {std::pair{r, m}, std::pair{m, r}}) {
    Json j = diff_json(base, next);
    EXPECT_TRUE(has_warning(j, "rows are compared without their process command")) << j.dump(1);
    EXPECT_FALSE(has_warning(j, "program differs")) << j.dump(1);
    ASSERT_NE(row_named(j, "diff_beta(long)"), nullptr) << j.dump(1);
    for (const Json& row : j["rows"]) {
      EXPECT_FALSE(row["significant"].get<bool>()) << row.dump();
      EXPECT_LT(std::fabs(row["change"].get<double>()), 0.01) << row.dump();
      EXPECT_EQ(row["name"].get<std::string>().find("diff_prog: "), std::string::npos)
          << row.dump();
    }
  }
}

}  // namespace
}  // namespace sprofil::report_test
