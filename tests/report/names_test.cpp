// Names as users and perf expect them, on a program recorded with the real tool
// (names_prog.cpp): public alias names (malloc, not __libc_malloc), PLT stubs as callee@plt,
// vDSO functions named, object-relative addresses that addr2line resolves, shortened C++ names in
// text and full ones in JSON. And the report's header and escaping on written profiles: the
// wall clock's labels, the coverage warning, plurals, rounded JSON, hostile command lines and
// paths (invalid UTF-8, terminal escapes) in JSON, pprof and text.
#include <gtest/gtest.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "profile/reader.hpp"
#include "profile/writer.hpp"
#include "symbolize/symbolize.hpp"
#include "test_util.hpp"

namespace sprofil::report_test {
namespace {

using Json = nlohmann::json;

const std::string kTool = SPROFIL_TOOL;
const std::string kProg = NAMES_PROG;

std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

// `sprofil record -F HZ` of one phase of the program (bounded iterations), once per `run`; the
// profile's path.
const std::string& recorded(const std::string& phase, const std::string& iterations,
                            const std::string& hz = "1000", int run_number = 0) {
  static std::map<std::string, std::string> done;
  const std::string name = phase + (run_number ? "." + std::to_string(run_number) : "");
  auto it = done.find(name);
  if (it != done.end()) return it->second;
  std::string out = temp_dir() + "/" + name + ".sprof";
  int status = 0;
  std::string log = run(q(kTool) + " record -F " + hz + " -o " + q(out) + " -- " + q(kProg) + " " +
                            phase + " " + iterations + " 2>&1",
                        &status);
  EXPECT_EQ(status, 0) << log;
  return done[name] = out;
}

// ~0.2 s here, about 200 samples: names_tiny itself (a few percent of them: most land in its
// PLT stub and in main) and at least two of main's addresses have samples in every run. With
// a tenth of it (21 samples) a run had none in names_tiny about one time in three.
const char* const kPltIterations = "400000000";
const std::string& plt_profile() {
  return recorded("plt", kPltIterations);
}
const std::string& malloc_profile() {
  return recorded("malloc", "15000000");  // ~0.35 s
}
const std::string& vdso_profile() {
  return recorded("vdso", "8000000");  // ~0.4 s
}
const std::string& long_profile() {
  return recorded("long", "60000000");  // ~0.12 s
}

std::string report(const std::string& file, const std::string& args, int* status = nullptr) {
  return run(q(kTool) + " report " + q(file) + " " + args + " 2>/dev/null", status);
}

Json report_json(const std::string& file, const std::string& args = "") {
  int status = 0;
  std::string out = report(file, "--format json " + args, &status);
  EXPECT_EQ(status, 0) << out;
  return Json::parse(out);
}

const Json* row_named(const Json& j, const std::string& name) {
  for (const Json& r : j["rows"])
    if (r["name"] == name) return &r;
  return nullptr;
}

double samples_named(const Json& j, const std::string& name) {
  const Json* r = row_named(j, name);
  return r != nullptr ? (*r)["samples"].get<double>() : 0;
}

// perf's names (`perf report --sort symbol`) for the same phase, or "" where perf is unusable.
std::string perf_symbols(const std::string& phase, const std::string& iterations,
                         std::string* why) {
  if (run("command -v perf").empty()) {
    *why = "no perf";
    return "";
  }
  std::string data = temp_dir() + "/perf_" + phase + ".data";
  int status = 0;
  std::string log = run("timeout 120 perf record -q -o " + q(data) + " -e cpu-clock:u -F 999 -- " +
                            q(kProg) + " " + phase + " " + iterations + " 2>&1 >/dev/null",
                        &status);
  if (status != 0) {
    *why = "perf record is denied or failed here: " + log;
    return "";
  }
  std::string out =
      run("timeout 120 perf report -i " + q(data) + " --stdio --sort symbol 2>/dev/null", &status);
  if (status != 0 || out.find("[.]") == std::string::npos) {
    *why = "perf report failed: " + out;
    return "";
  }
  return out;
}

// Each of `names` is a row of perf's report too (perf's `[.] name` lines), or the comparison
// is skipped with the reason. Up to three perf runs, until one names them all: on this VM a
// run now and then puts almost every sample in one function (perf's and ours alike), and a
// name is only checkable where samples fell.
void expect_perf_agrees(const std::string& phase, const std::string& iterations,
                        const std::vector<std::string>& names) {
  std::string why, perf;
  auto all_named = [&] {
    for (const std::string& n : names)
      if (perf.find("[.] " + n + " ") == std::string::npos) return false;
    return true;
  };
  for (int run = 0; run < 3 && (run == 0 || (!perf.empty() && !all_named())); ++run)
    perf = perf_symbols(phase, iterations, &why);
  if (perf.empty()) {
    std::cout << "note: skipping the comparison with perf for " << phase << ": " << why << "\n";
    return;
  }
  for (const std::string& n : names)
    EXPECT_NE(perf.find("[.] " + n + " "), std::string::npos)
        << "perf names it otherwise: " << n << "\n"
        << perf;
}

// The address of names_tiny's PLT stub in the program (objdump's <names_tiny@plt>), 0 if
// objdump does not show it.
uint64_t plt_stub_vaddr() {
  std::istringstream dis(run("objdump -d --no-show-raw-insn " + q(kProg) + " 2>/dev/null"));
  for (std::string line; std::getline(dis, line);)
    if (line.find("<names_tiny@plt>:") != std::string::npos)
      return std::stoull(line.substr(0, line.find(' ')), nullptr, 16);
  return 0;
}

// Samples in a PLT stub are named names_tiny@plt (not _init+0x...), in text and JSON, as perf
// names them. How many samples a run puts in the stub depends on the CPU and, on this VM, on
// the run (from 0 to 40%, perf's and ours alike), so 50 samples are placed in the stub of a
// recorded profile, whose own rows are checked too.
TEST(Names, PltStubIsCalleeAtPlt) {
  profile::Profile p;
  std::string err;
  ASSERT_TRUE(profile::read_profile(plt_profile(), &p, &err)) << err;
  const uint64_t stub = plt_stub_vaddr();
  ASSERT_NE(stub, 0u) << "objdump shows no names_tiny@plt in " << kProg;
  bool placed = false;
  for (profile::Region& r : p.regions) {
    const uint64_t at = stub + r.load_bias;
    if (r.path.find("report_names_prog") == std::string::npos || at < r.start || at >= r.end)
      continue;
    r.add((at - r.start) / r.bin_size, 50);
    placed = true;
  }
  ASSERT_TRUE(placed) << "no region of the profile holds the stub at " << stub;
  const std::string file = temp_dir() + "/plt_stub.sprof";
  ASSERT_TRUE(profile::write_profile(p, file, &err)) << err;
  Json j = report_json(file);
  const Json* row = row_named(j, "names_tiny@plt");
  ASSERT_NE(row, nullptr) << j.dump(1);
  EXPECT_GE((*row)["samples"].get<double>(), 50);
  EXPECT_EQ((*row)["object"], "report_names_prog");
  // No row of the program's own is named _init (its PLT stubs follow .init). Another object's
  // _init may take a real sample: record's default samples the loader's work from the exec on
  // (a run under ASan's load had one in libm.so.6's).
  const auto own_init = [](const Json& r) {
    return r["object"] == "report_names_prog" &&
           r["name"].get<std::string>().rfind("_init", 0) == 0;
  };
  for (const Json& r : j["rows"]) EXPECT_FALSE(own_init(r)) << r.dump();
  const Json as_recorded = report_json(plt_profile());
  for (const Json& r : as_recorded["rows"]) EXPECT_FALSE(own_init(r)) << r.dump();
  std::string text = report(file, "");
  EXPECT_NE(text.find("names_tiny@plt  report_names_prog"), std::string::npos) << text;
  // perf names the callee the same; its stub row is there only in the runs that sample it.
  expect_perf_agrees("plt", kPltIterations, {"names_tiny"});
}

// Samples in malloc are named malloc, not __libc_malloc, which JSON lists among its aliases;
// free is named free, not cfree@GLIBC_2.2.5.
// A static program's IFUNC stubs, from binutils alone: each .plt entry's address (objdump's
// `jmp *...(%rip) # SLOT`) with the names nm gives its resolver (the addend of the slot's
// IRELATIVE relocation, readelf). objdump itself leaves them unnamed.
struct IfuncStub {
  uint64_t addr = 0;
  std::set<std::string> names;
};
std::vector<IfuncStub> ifunc_stubs(const std::string& prog) {
  std::map<uint64_t, uint64_t> resolver_of;  // slot -> resolver
  std::istringstream rel(run("readelf -rW " + q(prog) + " 2>/dev/null"));
  for (std::string line; std::getline(rel, line);) {
    std::istringstream f(line);
    std::string offset, info, type, addend;
    if (f >> offset >> info >> type >> addend && type == "R_X86_64_IRELATIVE")
      resolver_of[std::stoull(offset, nullptr, 16)] = std::stoull(addend, nullptr, 16);
  }
  std::map<uint64_t, std::set<std::string>> names_at;
  std::istringstream nm(run("nm " + q(prog) + " 2>/dev/null"));
  for (std::string line; std::getline(nm, line);) {
    std::istringstream f(line);
    std::string addr, type, name;
    if (f >> addr >> type >> name) names_at[std::stoull(addr, nullptr, 16)].insert(name);
  }
  std::vector<IfuncStub> out;
  std::istringstream dis(run("objdump -d -j .plt " + q(prog) + " 2>/dev/null"));
  for (std::string line; std::getline(dis, line);) {
    const size_t jmp = line.find("jmp    *"), hash = line.find("# ");
    if (jmp == std::string::npos || hash == std::string::npos || line.find(':') == 0) continue;
    auto slot = resolver_of.find(std::stoull(line.substr(hash + 2), nullptr, 16));
    if (slot == resolver_of.end()) continue;
    out.push_back({std::stoull(line, nullptr, 16), names_at[slot->second]});
  }
  return out;
}

// A static program's PLT holds IFUNC stubs (memchr, strlen, strchr: 8 bytes each, no PLT0),
// which jump through IRELATIVE slots that name no symbol. Each stub is named after its
// resolver's symbol with @plt (perf names them _init, objdump not at all): samples placed at
// each stub's last instruction are in that stub's row, and the recorded samples in the .plt
// are in @plt rows.
TEST(Names, StaticProgramsIfuncStubsAreNamed) {
  const std::string prog = IFUNC_STATIC;
  const std::vector<IfuncStub> stubs = ifunc_stubs(prog);
  ASSERT_GE(stubs.size(), 3u) << "binutils show fewer IFUNC stubs than the program calls";
  const std::string file = temp_dir() + "/ifunc_static.sprof";
  int status = 0;
  std::string log =
      run(q(kTool) + " record -q -o " + q(file) + " -- " + q(prog) + " 20000000 2>&1 >/dev/null",
          &status);
  ASSERT_EQ(status, 0) << log;
  const uint64_t plt_lo = stubs.front().addr, plt_hi = stubs.back().addr + 8;
  const Json recorded_rows = report_json(file, "--by address");
  for (const Json& r : recorded_rows["rows"]) {
    const uint64_t v = r["vaddr"].get<uint64_t>();
    if (r["object"] != "report_ifunc_static" || v < plt_lo || v >= plt_hi) continue;
    // By address, a row's name is its function's with the offset: strlen@plt+0x6.
    const std::string name =
        r["name"].get<std::string>().substr(0, r["name"].get<std::string>().rfind("+0x"));
    EXPECT_TRUE(name.size() > 4 && name.compare(name.size() - 4, 4, "@plt") == 0) << r.dump();
  }
  profile::Profile p;
  std::string err;
  ASSERT_TRUE(profile::read_profile(file, &p, &err)) << err;
  int placed = 0;
  for (profile::Region& r : p.regions) {
    if (r.path.find("report_ifunc_static") == std::string::npos) continue;
    for (const IfuncStub& s : stubs) {
      const uint64_t at = s.addr + 6 + r.load_bias;  // the stub's `xchg %ax,%ax`
      if (at < r.start || at >= r.end) continue;
      r.add((at - r.start) / r.bin_size, 20);
      ++placed;
    }
  }
  ASSERT_EQ(placed, int(stubs.size())) << "the profile's regions do not hold the stubs";
  const std::string placed_file = temp_dir() + "/ifunc_static_placed.sprof";
  ASSERT_TRUE(profile::write_profile(p, placed_file, &err)) << err;
  std::map<uint64_t, std::string> name_of;
  const Json placed_rows = report_json(placed_file, "--by address");
  for (const Json& r : placed_rows["rows"])
    if (r["object"] == "report_ifunc_static") name_of[r["vaddr"].get<uint64_t>()] = r["name"];
  for (const IfuncStub& s : stubs) {
    // The row of the bin that holds the stub's last instruction: it starts inside the stub.
    auto row = name_of.upper_bound(s.addr + 6);
    ASSERT_NE(row, name_of.begin()) << "no row at the stub " << std::hex << s.addr;
    --row;
    ASSERT_GE(row->first, s.addr) << "no row at the stub " << std::hex << s.addr;
    const std::string name = row->second.substr(0, row->second.rfind("+0x"));
    ASSERT_GT(name.size(), 4u) << name;
    EXPECT_EQ(name.substr(name.size() - 4), "@plt") << name;
    EXPECT_EQ(s.names.count(name.substr(0, name.size() - 4)), 1u)
        << name << " at " << std::hex << s.addr << " is not a name of its resolver";
  }
}

TEST(Names, MallocByItsPublicName) {
  Json j = report_json(malloc_profile());
  const Json* m = row_named(j, "malloc");
  ASSERT_NE(m, nullptr) << j.dump(1);
  EXPECT_GE((*m)["samples"].get<double>(), 10);  // ~40% of ~350 samples
  EXPECT_EQ((*m)["object"], "libc.so.6");
  EXPECT_EQ(row_named(j, "__libc_malloc"), nullptr);
  bool alias = false;
  for (const Json& a : (*m).value("aliases", Json::array())) alias |= a == "__libc_malloc";
  EXPECT_TRUE(alias) << m->dump();
  // free by its current name, not the compatibility symbol cfree@GLIBC_2.2.5 (perf's choice).
  EXPECT_GT(samples_named(j, "free"), 0) << j.dump(1);
  EXPECT_EQ(row_named(j, "cfree@GLIBC_2.2.5"), nullptr);
  // perf names malloc the same; its malloc@plt row is there only in the runs that sample the
  // stub (0-40% of them here, as for names_tiny@plt).
  expect_perf_agrees("malloc", "15000000", {"malloc"});
}

// This process's vDSO (the same kernel's image as the profiled program's) written to a file,
// and its dynamic symbols from nm: [start, end) offsets. Empty if either step fails.
struct SymbolRange {
  uint64_t lo, hi;
  std::string name;
};
std::vector<SymbolRange> vdso_symbol_ranges(std::string* why) {
  const auto base = reinterpret_cast<const char*>(getauxval(AT_SYSINFO_EHDR));
  std::ifstream maps("/proc/self/maps");
  size_t size = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.find("[vdso]") != std::string::npos) {
      unsigned long lo = 0, hi = 0;
      if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) == 2 &&
          lo == reinterpret_cast<uintptr_t>(base))
        size = hi - lo;
    }
  if (!base || size == 0) {
    *why = "no vDSO mapping found";
    return {};
  }
  const std::string file = temp_dir() + "/vdso.so";
  std::ofstream(file, std::ios::binary).write(base, static_cast<std::streamsize>(size));
  std::vector<SymbolRange> ranges;
  std::istringstream nm(run("nm -D -S --defined-only " + q(file) + " 2>&1"));
  for (std::string line; std::getline(nm, line);) {
    unsigned long value = 0, len = 0;
    char type = 0;
    char name[256] = "";
    if (std::sscanf(line.c_str(), "%lx %lx %c %255s", &value, &len, &type, name) == 4 && len > 0 &&
        (type == 'T' || type == 't' || type == 'W' || type == 'w'))
      ranges.push_back({value, value + len, name});
  }
  if (ranges.empty()) *why = "nm found no sized function in the vDSO";
  return ranges;
}

// Samples in the vDSO's clock_gettime are named __vdso_clock_gettime, as perf names them (the
// vDSO's global symbol). What stays [unknown] in the [vdso] is code outside every symbol of
// the vDSO's (a kernel's vDSO may keep its clock readers in static functions: perf shows them
// as bare addresses too): each such address is checked against the symbols nm reads from this
// process's copy of the vDSO.
TEST(Names, VdsoFunctionIsNamed) {
  std::string why;
  const auto ranges = vdso_symbol_ranges(&why);
  ASSERT_FALSE(ranges.empty()) << why;
  // The recorded profile's [vdso] rows: named exactly where a symbol covers the address.
  const Json by_address = report_json(vdso_profile(), "--by address");
  double in_vdso = 0;
  for (const Json& r : by_address["rows"]) {
    if (r["object"] != "[vdso]") continue;
    in_vdso += r["samples"].get<double>();
    const uint64_t at = r["vaddr"].get<uint64_t>();
    bool in_symbol = false;
    for (const SymbolRange& sr : ranges) in_symbol |= at >= sr.lo && at < sr.hi;
    if (r["name"] == "[unknown]")
      EXPECT_FALSE(in_symbol) << "an address inside a vDSO symbol is unnamed: " << r.dump();
    else
      EXPECT_TRUE(in_symbol) << "a name for an address outside every vDSO symbol: " << r.dump();
  }
  EXPECT_GT(in_vdso, 100) << by_address.dump(1);  // ~0.4 s in clock_gettime's vDSO code
  // The share of samples inside __vdso_clock_gettime itself varies here from run to run
  // (0.5-14%, perf's alike), so 50 samples are placed at its start in the recorded profile.
  const SymbolRange* gettime = nullptr;
  for (const SymbolRange& sr : ranges)
    if (sr.name.substr(0, sr.name.find('@')) == "__vdso_clock_gettime") gettime = &sr;
  ASSERT_NE(gettime, nullptr) << "nm shows no __vdso_clock_gettime in this vDSO";
  profile::Profile p;
  std::string err;
  ASSERT_TRUE(profile::read_profile(vdso_profile(), &p, &err)) << err;
  bool placed = false;
  for (profile::Region& r : p.regions) {
    const uint64_t at = gettime->lo + r.load_bias;
    if (r.path != "[vdso]" || at < r.start || at >= r.end) continue;
    r.add((at - r.start) / r.bin_size, 50);
    placed = true;
  }
  ASSERT_TRUE(placed) << "no [vdso] region holds __vdso_clock_gettime";
  const std::string file = temp_dir() + "/vdso_placed.sprof";
  ASSERT_TRUE(profile::write_profile(p, file, &err)) << err;
  EXPECT_GE(samples_named(report_json(file), "__vdso_clock_gettime"), 50);
  std::string text = report(file, "");
  EXPECT_NE(text.find("__vdso_clock_gettime  [vdso]"), std::string::npos) << text;
  expect_perf_agrees("vdso", "8000000", {"__vdso_clock_gettime"});
}

// annotate disassembles the vDSO from this process's image under the build-id check that
// names its functions (it said "no disassembly: cannot open [vdso] as a regular file"):
// __vdso_clock_gettime over nm's extent, every instruction decoded, the instructions' samples
// summing to the function's (the report's row). A vDSO of another build-id is not read, and
// the annotation says why.
TEST(Names, VdsoFunctionIsAnnotated) {
  std::string why;
  const auto ranges = vdso_symbol_ranges(&why);
  ASSERT_FALSE(ranges.empty()) << why;
  const SymbolRange* gettime = nullptr;
  for (const SymbolRange& sr : ranges)
    if (sr.name.substr(0, sr.name.find('@')) == "__vdso_clock_gettime") gettime = &sr;
  ASSERT_NE(gettime, nullptr) << "nm shows no __vdso_clock_gettime in this vDSO";
  const double samples = samples_named(report_json(vdso_profile()), "__vdso_clock_gettime");
  ASSERT_GT(samples, 10) << "too few samples in __vdso_clock_gettime to judge";
  int status = 0;
  const std::string out = run(q(kTool) + " annotate " + q(vdso_profile()) +
                                  " --function __vdso_clock_gettime --format json 2>/dev/null",
                              &status);
  ASSERT_EQ(status, 0) << out;
  const Json j = Json::parse(out);
  ASSERT_EQ(j["functions"].size(), 1u) << out;
  const Json& f = j["functions"][0];
  EXPECT_EQ(f["object"], "[vdso]");
  EXPECT_EQ(f["note"].get<std::string>().find("no disassembly"), std::string::npos) << f["note"];
  EXPECT_EQ(f["start"], gettime->lo);
  EXPECT_EQ(f["end"], gettime->hi);
  EXPECT_NEAR(f["samples"].get<double>(), samples, 0.01);
  ASSERT_GT(f["instructions"].size(), 10u) << f.dump(1);
  EXPECT_EQ(f["instructions"][0]["vaddr"], gettime->lo);
  double sum = 0;
  for (const Json& ins : f["instructions"]) {
    sum += ins["samples"].get<double>();
    EXPECT_NE(ins["text"], "(bad)") << ins.dump();
  }
  EXPECT_NEAR(sum, samples, 0.01) << f.dump(1);
  // The same profile with another vDSO's build-id: not this kernel's, so not read.
  profile::Profile p;
  std::string err;
  ASSERT_TRUE(profile::read_profile(vdso_profile(), &p, &err)) << err;
  for (profile::Region& r : p.regions)
    if (r.path == "[vdso]") r.build_id.assign(20, 0x5a);
  const std::string foreign = temp_dir() + "/vdso_foreign.sprof";
  ASSERT_TRUE(profile::write_profile(p, foreign, &err)) << err;
  const std::string text =
      run(q(kTool) + " annotate " + q(foreign) + " --object vdso --top 1 2>/dev/null", &status);
  EXPECT_EQ(status, 0) << text;
  EXPECT_NE(text.find("in [vdso]"), std::string::npos) << text;
  EXPECT_NE(text.find("# no disassembly: [vdso]: the profile's vDSO (build-id 5a5a"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("Source / disassembly"), std::string::npos) << text;
}

// A [vdso] region from another kernel (another build-id) is not named, and the report says why.
TEST(Names, ForeignVdsoIsUnnamedWithAReason) {
  symbolize::Symbolizer sym;
  symbolize::Object* obj = sym.open("[vdso]", std::vector<uint8_t>(20, 0x5a));
  EXPECT_FALSE(obj->ok());
  std::vector<std::string> w = sym.take_warnings();
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("not this kernel's"), std::string::npos) << w[0];
}

struct Csv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

// RFC 4180 (quoted fields with commas and doubled quotes).
Csv parse_csv(const std::string& text) {
  Csv csv;
  std::istringstream in(text);
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    std::vector<std::string> f(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      char c = line[i];
      if (quoted) {
        if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
          f.back() += '"';
          ++i;
        } else if (c == '"') {
          quoted = false;
        } else {
          f.back() += c;
        }
      } else if (c == '"') {
        quoted = true;
      } else if (c == ',') {
        f.emplace_back();
      } else {
        f.back() += c;
      }
    }
    (first ? csv.header : csv.rows.emplace_back()) = f;
    if (first) first = false;
  }
  return csv;
}

// --by address gives the object-relative address, which addr2line -e OBJECT resolves
// to the same function, in CSV (vaddr column) and text ("(0x... in object)").
TEST(Names, ByAddressGivesAddr2lineAddresses) {
  const std::string& file = plt_profile();
  Csv csv = parse_csv(report(file, "--by address --format csv"));
  ASSERT_FALSE(csv.header.empty());
  size_t name = 0, vaddr = 0, address = 0;
  for (size_t i = 0; i < csv.header.size(); ++i) {
    if (csv.header[i] == "name") name = i;
    if (csv.header[i] == "address") address = i;
    if (csv.header[i] == "vaddr") vaddr = i;
  }
  ASSERT_NE(vaddr, 0u) << "no vaddr column";
  Json j = report_json(file, "--by address");
  std::string text = report(file, "--by address");
  int checked = 0;
  for (const std::vector<std::string>& r : csv.rows) {
    if (r.size() != csv.header.size()) continue;
    std::string fn = r[name].substr(0, r[name].find('+'));
    if (fn != "main" && fn != "names_tiny") continue;
    // The object's path from the JSON row at the same runtime address.
    std::string path;
    for (const Json& jr : j["rows"]) {
      char a[32];
      std::snprintf(a, sizeof a, "0x%llx",
                    static_cast<unsigned long long>(jr["address"].get<uint64_t>()));
      if (a == r[address]) path = jr.value("object_path", "");
    }
    ASSERT_FALSE(path.empty()) << r[address];
    std::string a2l = run("addr2line -f -e " + q(path) + " " + r[vaddr]);
    EXPECT_EQ(a2l.substr(0, a2l.find('\n')), fn) << path << " " << r[vaddr] << "\n" << a2l;
    EXPECT_NE(text.find(r[address] + " (" + r[vaddr] + " in object) " + r[name]), std::string::npos)
        << r[address] << " " << r[vaddr] << "\n"
        << text;
    if (++checked == 6) break;
  }
  EXPECT_GE(checked, 2) << text;  // main and names_tiny each have samples
}

// Long C++ names are shortened in the text report, full with --full-names, in JSON and in CSV.
TEST(Names, LongNamesShortInTextFullInJson) {
  const std::string& file = long_profile();
  Json j = report_json(file);
  std::string full;
  for (const Json& r : j["rows"]) {
    std::string n = r["name"];
    if (n.find("names_demo::very_long_name_worker<") != std::string::npos) full = n;
  }
  ASSERT_GT(full.size(), 200u) << j.dump(1);
  EXPECT_NE(full.find('('), std::string::npos);
  std::string text = report(file, "");
  EXPECT_NE(text.find("  names_demo::very_long_name_worker  report_names_prog"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("very_long_name_worker<"), std::string::npos) << text;
  std::string kept = report(file, "--full-names");
  EXPECT_NE(kept.find(full), std::string::npos) << kept;
  Csv csv = parse_csv(report(file, "--format csv"));
  bool in_csv = false;
  for (const auto& r : csv.rows)
    for (const auto& f : r) in_csv |= f == full;
  EXPECT_TRUE(in_csv);
}

// Two functions whose short names would read alike (two instantiations of one template, as two
// lambdas' std::thread::_State_impl<...>::_M_run) keep their full names in the text reports,
// report's and diff's, so that their rows differ.
TEST(Names, NamesThatWouldReadAlikeStayWhole) {
  const std::string& file = recorded("alike", "60000000");  // ~0.25 s
  Json j = report_json(file);
  std::vector<std::string> whole;
  for (const Json& r : j["rows"]) {
    std::string n = r["name"];
    if (n.find("names_demo::very_long_name_worker<") != std::string::npos) whole.push_back(n);
  }
  ASSERT_EQ(whole.size(), 2u) << j.dump(1);
  ASSERT_NE(whole[0], whole[1]);
  const std::string text = report(file, "");
  const std::string diff = run(q(kTool) + " diff " + q(file) + " " + q(file) + " 2>/dev/null");
  for (const std::string& n : whole) {
    EXPECT_NE(text.find("  " + n + "  report_names_prog"), std::string::npos) << n << "\n" << text;
    EXPECT_NE(diff.find("  " + n), std::string::npos) << n << "\n" << diff;
  }
  EXPECT_EQ(text.find("  names_demo::very_long_name_worker  "), std::string::npos) << text;
}

TEST(Names, ShortNameRules) {
  using symbolize::short_name;
  EXPECT_EQ(short_name("long ns::f<int>(int const*) const"), "ns::f");
  EXPECT_EQ(short_name("(anonymous namespace)::g(int)"), "(anonymous namespace)::g");
  EXPECT_EQ(short_name("std::vector<int, std::allocator<int> >::operator[](unsigned long)"),
            "std::vector::operator[]");
  EXPECT_EQ(short_name("ns::X::operator()(int) const"), "ns::X::operator()");
  EXPECT_EQ(short_name("ns::operator<<(std::ostream&, ns::X const&)"), "ns::operator<<");
  EXPECT_EQ(short_name("ns::f(int) [clone .cold]"), "ns::f [clone .cold]");
  EXPECT_EQ(short_name("ns::h()::{lambda(int)#1}::operator()(int) const"),
            "ns::h::{lambda(int)#1}::operator()");
  EXPECT_EQ(short_name("malloc"), "malloc");
  EXPECT_EQ(short_name("names_tiny@plt"), "names_tiny@plt");
}

// GCC's clone suffixes, every one, in both spellings; what is not a clone suffix stays.
TEST(Names, WithoutCloneSuffixRules) {
  using symbolize::without_clone_suffix;
  EXPECT_EQ(without_clone_suffix("ns::f(int) [clone .isra.0]"), "ns::f(int)");
  EXPECT_EQ(without_clone_suffix("ns::f [clone .cold]"), "ns::f");
  EXPECT_EQ(without_clone_suffix("f(int) [clone .constprop.0] [clone .isra.0]"), "f(int)");
  EXPECT_EQ(without_clone_suffix("spin.constprop.0"), "spin");
  EXPECT_EQ(without_clone_suffix("spin.part.1"), "spin");
  EXPECT_EQ(without_clone_suffix("spin.cold"), "spin");
  EXPECT_EQ(without_clone_suffix("spin.isra.0.cold"), "spin");
  EXPECT_EQ(without_clone_suffix("spin.lto_priv.0"), "spin");
  EXPECT_EQ(without_clone_suffix("spin"), "spin");
  EXPECT_EQ(without_clone_suffix("spin.1"), "spin.1");
  EXPECT_EQ(without_clone_suffix("spin.other.0"), "spin.other.0");
  EXPECT_EQ(without_clone_suffix(".cold"), ".cold");
  EXPECT_EQ(without_clone_suffix("[unknown]"), "[unknown]");
  EXPECT_EQ(without_clone_suffix("std::vector<int>::operator[](unsigned long)"),
            "std::vector<int>::operator[](unsigned long)");
}

// A written profile (src/profile/writer.hpp) with the report's tool run on it.
std::string write(const profile::Profile& p, const std::string& name) {
  std::string path = temp_dir() + "/" + name + ".sprof";
  std::string err;
  EXPECT_TRUE(profile::write_profile(p, path, &err)) << err;
  return path;
}

profile::Profile program_profile(uint64_t tick_ns, uint64_t samples) {
  profile::Profile p = report_test::base_profile(tick_ns);
  p.regions.push_back(report_test::text_region(kProg, 0x555555554000ull, 4));
  auto fns = report_test::nm_functions(kProg);
  uint64_t lo = fns.at("main").addr + 0x555555554000ull, hi = lo + fns.at("main").size;
  uint64_t main_addr = lo;
  while (!report_test::bin_inside(p.regions[0], main_addr, lo, hi)) ++main_addr;  // one row, main
  report_test::add_at(&p.regions[0], main_addr, samples);
  p.delivered = samples;
  return p;
}

// A wall-clock profile's header gives wall-clock seconds and a rate per CPU-second that is
// said to exceed the request, and no coverage warning; a CPU clock's keeps "CPU seconds".
TEST(Header, WallClockLabels) {
  profile::Profile p = program_profile(1000000, 576);  // 576 x 1 ms
  p.clock = profile::Clock::kWall;
  p.effective_hz = 2211.8;
  p.cpu_ns = 260000000;
  std::string wall = write(p, "wall");
  std::string text = report(wall, "");
  EXPECT_NE(text.find("total samples:  576 (0.576 wall-clock seconds of all threads, on- and "
                      "off-CPU)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("CPU seconds estimated"), std::string::npos) << text;
  EXPECT_NE(text.find("effective 2211.8 Hz per CPU-second (the wall clock ticks per "
                      "thread-second"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("warning: the samples cover"), std::string::npos) << text;  // not for wall
  std::string raw = report(wall, "--format json");
  Json j = Json::parse(raw);
  EXPECT_EQ(j["seconds_meaning"], "wall-clock seconds of all threads, on- and off-CPU");
  EXPECT_TRUE(j["coverage"].is_null());
  // 576 x 0.001 is 0.5760000000000001 in binary; JSON says 0.576.
  EXPECT_NE(raw.find("\"seconds\": 0.576"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("0.5760000000"), std::string::npos) << raw;

  p.clock = profile::Clock::kCpu;
  p.cpu_ns = 576000000;
  text = report(write(p, "cpu"), "");
  EXPECT_NE(text.find("total samples:  576 (0.576 CPU seconds estimated)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("effective 2211.8 Hz per CPU-second\n"), std::string::npos) << text;
}

// Samples x tick far below the process's CPU time gives a warning with the ratio (text and
// JSON); at 93% coverage there is none.
TEST(Header, CoverageWarning) {
  profile::Profile p = program_profile(10000000, 14);  // 14 x 10 ms = 0.14 s
  p.cpu_ns = 14600000000ull;                           // of 14.6 s (xz -T2)
  std::string file = write(p, "low");
  std::string text = report(file, "");
  EXPECT_NE(text.find("warning: the samples cover only 1.0% of the process CPU time (14 samples x "
                      "10 ms = 0.140 s of 14.600 s)"),
            std::string::npos)
      << text;
  Json j = report_json(file);
  EXPECT_NEAR(j["coverage"].get<double>(), 0.14 / 14.6, 1e-4);
  EXPECT_TRUE(j["coverage_warning"].is_string());

  p.cpu_ns = 150000000;  // 0.15 s: 93% covered (a tick's quantisation), no warning
  file = write(p, "ok");
  text = report(file, "");
  EXPECT_EQ(text.find("warning: the samples cover"), std::string::npos) << text;
  j = report_json(file);
  EXPECT_NEAR(j["coverage"].get<double>(), 0.14 / 0.15, 1e-4);
  EXPECT_FALSE(j.contains("coverage_warning"));
}

// A run of many short processes (a shell loop) whose missing CPU is what their start-up before
// sampling costs: the warning says so instead of blaming blocked signals. 40 processes of 4 ms
// with one 1 ms sample each: 25% covered, 3 ms missing a process. Two processes missing 7 s
// each are not explained by start-up: the signal text.
TEST(Header, CoverageWarningForShortProcesses) {
  std::vector<profile::Profile> parts;
  std::vector<std::string> names;
  for (int i = 0; i < 40; ++i) {
    profile::Profile one = program_profile(1000000, 1);
    one.cpu_ns = 4000000;
    one.pid = 100 + i;
    parts.push_back(one);
    names.push_back(i ? "." + std::to_string(100 + i) : "");
  }
  profile::Profile run = profile::combine_processes(parts, names);
  std::string text = report(write(run, "short_processes"), "");
  EXPECT_NE(text.find("warning: the samples cover only 25.0% of the process CPU time (40 samples "
                      "x 1 ms = 0.040 s of 0.160 s): the run's 40 processes average 4.0 ms of "
                      "CPU, and each one's start-up before its sampling began (the loader, the "
                      "agent) is CPU time no sample stands for"),
            std::string::npos)
      << text;

  parts.resize(2);
  names.resize(2);
  for (auto& one : parts) one.cpu_ns = 7000000000ull;
  run = profile::combine_processes(parts, names);
  text = report(write(run, "long_processes"), "");
  EXPECT_NE(text.find("of 14.000 s): threads that block the profiling signal"), std::string::npos)
      << text;
}

// One sample is "1 sample", not "1 samples".
TEST(Header, SingularSample) {
  profile::Profile p = program_profile(1000000, 3);
  p.overflow = 1;
  std::string text = report(write(p, "one"), "");
  EXPECT_NE(text.find("overflow:       1 sample outside any object\n"), std::string::npos) << text;
}

// A command line and a path with invalid UTF-8 and terminal escapes give valid
// JSON, a pprof profile go tool pprof reads, and text without control characters.
TEST(Escaping, HostileCommandLineAndPath) {
  profile::Profile p = program_profile(1000000, 40);
  p.argv = {"prog\xff\xfe", "\x1b[31mred\x1b[0m", "caf\xc3\xa9", "\xc0\xaf"};
  profile::Region r;
  r.path = "/nonexistent/lib\xff\x1b]0;pwned\x07.so";
  r.start = 0x7f0000000000ull;
  r.end = r.start + 4096;
  r.bin_size = 16;
  r.counter_width = 8;
  r.add(3, 7);
  p.regions.push_back(r);
  std::string file = write(p, "hostile");

  int status = 0;
  std::string raw = report(file, "--format json", &status);
  ASSERT_EQ(status, 0) << raw;
  Json j;
  ASSERT_NO_THROW(j = Json::parse(raw)) << raw;
  EXPECT_EQ(j["command"][0], "prog\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(j["command"][1], "\x1b[31mred\x1b[0m");  // valid UTF-8; JSON escapes it as \u001b
  EXPECT_EQ(j["command"][2], "caf\xc3\xa9");
  EXPECT_EQ(raw.find('\x1b'), std::string::npos);
  bool path_row = false;
  for (const Json& row : j["rows"])
    path_row |= row["object"] == "lib\xef\xbf\xbd\x1b]0;pwned\x07.so";
  EXPECT_TRUE(path_row) << raw;

  std::string text = report(file, "", &status);
  ASSERT_EQ(status, 0);
  for (char c : text)
    EXPECT_TRUE(c == '\n' || (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f))
        << "control character " << int(static_cast<unsigned char>(c)) << " in\n"
        << text;
  EXPECT_NE(text.find("command:        prog\\xff\\xfe \\x1b[31mred\\x1b[0m caf\xc3\xa9 \\xc0\\xaf"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("lib\\xff\\x1b]0;pwned\\x07.so"), std::string::npos) << text;

  std::string pb = temp_dir() + "/hostile.pb.gz";
  std::string log =
      run(q(kTool) + " report " + q(file) + " --format pprof -o " + q(pb) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos) << log;  // warnings on stderr escaped too
  if (run("command -v go").empty()) GTEST_SKIP() << "no go toolchain: go tool pprof not run";
  std::string dir = temp_dir();
  std::string env = "HOME=" + q(dir) + " GOPATH=" + q(dir + "/gopath") +
                    " GOCACHE=" + q(dir + "/gocache") + " GOFLAGS=-mod=mod PPROF_TMPDIR=" + q(dir) +
                    " ";
  std::string out = run(env + "go tool pprof -raw " + q(pb) + " 2>&1", &status);
  ASSERT_EQ(status, 0) << out;
  EXPECT_EQ(out.find("invalid UTF-8"), std::string::npos) << out;
  EXPECT_NE(out.find("samples/count"), std::string::npos) << out;
  EXPECT_NE(out.find("main"), std::string::npos) << out;
}

// A region whose path names a FIFO does not hang the report (the symbolizer
// opens only regular files): its samples are unnamed, with a warning. An empty build-id cache:
// record's copy of the program's build would name them.
TEST(Names, RegionPathThatIsAFifoDoesNotHang) {
  profile::Profile p = program_profile(1000000, 10);
  const std::string fifo = temp_dir() + "/region.fifo";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  p.regions[0].path = fifo;
  const std::string file = write(p, "fifo_region");
  int status = -1;
  // timeout(1) bounds a regression (124: it hung).
  const std::string out = run("SPROFIL_BUILDID_DIR=" + q(temp_dir() + "/no-cache") +
                                  " timeout 20 " + q(kTool) + " report " + q(file) + " 2>&1",
                              &status);
  EXPECT_EQ(status, 0) << out;
  EXPECT_NE(out.find("not a regular file"), std::string::npos) << out;
  EXPECT_NE(out.find("[unknown]"), std::string::npos) << out;
}

}  // namespace
}  // namespace sprofil::report_test
