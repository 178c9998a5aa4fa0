// pprof export: a gzipped perftools.profiles.Profile with one Sample per attributed piece of a
// non-zero bin, symbolized locations (inline frames as several Line entries, innermost first)
// and one Mapping per region with its build-id and file offset, so that pprof can also
// re-symbolize from the binaries; the first is the run's program's (pprof's main binary). A profile
// of several processes labels each sample with its process (pid, comm).
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <tuple>

#include <google/protobuf/unknown_field_set.h>

#include "profile.pb.h"
#include "report/exporter.hpp"
#include "report/labels.hpp"
#include "symbolize/symbolize.hpp"

namespace sprofil::report {
namespace {

namespace pb = perftools::profiles;

constexpr int kLineColumnField = 3;  // perftools.profiles.Line.column in pprof's schema

class Strings {
 public:
  explicit Strings(pb::Profile* p) : p_(p) { id(""); }
  // Protobuf strings must be UTF-8: invalid bytes become U+FFFD.
  int64_t id(const std::string& raw) {
    std::string s = valid_utf8(raw);
    auto [it, inserted] = ids_.emplace(s, int64_t(ids_.size()));
    if (inserted) p_->add_string_table(s);
    return it->second;
  }

 private:
  pb::Profile* p_;
  std::map<std::string, int64_t> ids_;
};

bool gzip(const std::string& in, std::string* out) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return false;
  out->resize(deflateBound(&zs, uLong(in.size())) + 64);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = uInt(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out->data());
  zs.avail_out = uInt(out->size());
  int rc = deflate(&zs, Z_FINISH);
  out->resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

// x rounded to an int64 value, never negative: values past INT64_MAX (pprof's values are
// signed) become INT64_MAX and set *clamped.
int64_t pprof_value(double x, bool* clamped) {
  if (!(x > 0)) return 0;
  if (x >= 9223372036854775807.0) {
    *clamped = true;
    return INT64_MAX;
  }
  return std::llround(x);
}

}  // namespace

std::string pprof_bytes(const profile::Profile& p, symbolize::Symbolizer& symbolizer,
                        std::vector<std::string>* warnings, const Options& opts) {
  pb::Profile out;
  Strings str(&out);
  auto* st = out.add_sample_type();
  st->set_type(str.id("samples"));
  st->set_unit(str.id("count"));
  st = out.add_sample_type();
  st->set_type(str.id("cpu"));
  st->set_unit(str.id("nanoseconds"));
  out.mutable_period_type()->set_type(str.id("cpu"));
  out.mutable_period_type()->set_unit(str.id("nanoseconds"));
  bool clamped = false;
  out.set_period(pprof_value(double(p.tick_ns), &clamped));
  out.set_default_sample_type(str.id("cpu"));
  out.set_time_nanos(pprof_value(double(p.start_ns), &clamped));
  if (p.end_ns > p.start_ns)
    out.set_duration_nanos(pprof_value(double(p.end_ns - p.start_ns), &clamped));
  const std::string cmd = command_of(p);
  if (!cmd.empty()) out.add_comment(str.id("command: " + cmd));
  // No sample type for system time (pprof's tools and users select "samples" or "cpu"); the
  // split is stated in a comment.
  if (p.has_system()) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "system time: %.3f s of the %.3f s sampled (kernel time charged to the user pc "
                  "it returned to)%s",
                  double(p.system_samples()) * double(p.tick_ns) / 1e9,
                  double(p.total_samples()) * double(p.tick_ns) / 1e9,
                  opts.user_only ? "; left out of the samples (--user-only: user time only)" : "");
    out.add_comment(str.id(buf));
  }
  if (!opts.object.empty())
    out.add_comment(str.id("filter: --object " + opts.object +
                           ": only the samples of objects whose file name contains it"));
  // What the text report warns of (`go tool pprof -comments` shows them).
  for (const std::string& note : {unfinished_note(p), sandboxed_note(p)})
    if (!note.empty()) out.add_comment(str.id("warning: " + valid_utf8(note)));
  for (const RunNote& n : run_notes(p)) out.add_comment(str.id("warning: " + n.text));

  // What the options keep (--user-only, --object, --pid, --comm), as every format's rows.
  std::vector<Piece> pieces = attribute(p, symbolizer, opts);

  // Mappings: the run's program's first, with samples or without (pprof's main binary, its
  // `File:`; main_executable(): in a compiler's run cc1plus, not the libc that its first
  // region with samples was; sqlite3, not the libsqlite3 that holds all its time), then one per
  // region with samples in the pieces' order. The program is the run's whatever --object keeps,
  // chosen as gmon chooses it (--user-only: by user samples).
  std::map<size_t, uint64_t> mapping_of;
  std::map<size_t, const Piece*> first_piece;  // of each region with pieces
  std::vector<size_t> order;
  Options whole = opts;
  whole.object.clear();
  const std::vector<Executable> exes = executables(p, whole);
  if (!exes.empty()) order = exes[main_executable(p, whole, exes)].regions;
  const size_t program = order.size();  // order[0, program): the program's regions
  for (const Piece& pc : pieces)
    if (pc.region != SIZE_MAX && first_piece.emplace(pc.region, &pc).second)
      order.push_back(pc.region);
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t region = order[k];
    const auto first = first_piece.find(region);
    if ((first == first_piece.end() && k >= program) || mapping_of.count(region)) continue;
    const Piece* pc = first != first_piece.end() ? first->second : nullptr;
    const profile::Region& r = p.regions[region];
    auto* m = out.add_mapping();
    m->set_id(uint64_t(out.mapping_size()));
    m->set_memory_start(r.start);
    m->set_memory_limit(r.end);
    m->set_file_offset(r.file_offset);
    m->set_filename(str.id(r.path));
    m->set_build_id(str.id(symbolize::hex(r.build_id)));
    // (A mapping without samples has no location to symbolize.)
    const bool known = pc == nullptr || (pc->object != nullptr && pc->object->ok());
    m->set_has_functions(known);
    m->set_has_filenames(known);
    m->set_has_line_numbers(known);
    m->set_has_inline_frames(known);
    mapping_of[region] = m->id();
  }

  // A function's name as pprof's own symbolizer gives a C++ one by default: without parameters,
  // template arguments and return type ("std::sort", not "void std::sort<...>(...)"); its
  // system name the mangled one, which `-symbolize=demangle=full` (or `templates`) demangles
  // again. A name that is no mangled one (C, a JIT's) is its own system name, and kept whole.
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> functions;
  auto function_id = [&](const std::string& demangled, const std::string& system,
                         const std::string& file) {
    const std::string name =
        system.empty() || system == demangled ? demangled : symbolize::short_name(demangled);
    auto [it, inserted] = functions.emplace(std::make_tuple(name, system, file), 0);
    if (inserted) {
      auto* f = out.add_function();
      f->set_id(uint64_t(out.function_size()));
      f->set_name(str.id(name));
      f->set_system_name(str.id(system));
      f->set_filename(str.id(file));
      it->second = f->id();
    }
    return it->second;
  };

  std::map<std::pair<uint64_t, uint64_t>, uint64_t> locations;  // (mapping, address) -> id
  auto location_id = [&](const Piece& pc) -> uint64_t {
    uint64_t mapping = pc.region == SIZE_MAX ? 0 : mapping_of[pc.region];
    auto [it, inserted] = locations.emplace(std::make_pair(mapping, pc.address), 0);
    if (!inserted) return it->second;
    auto* loc = out.add_location();
    loc->set_id(uint64_t(out.location_size()));
    loc->set_mapping_id(mapping);
    loc->set_address(pc.address);
    it->second = loc->id();
    if (pc.region == SIZE_MAX) {
      loc->add_line()->set_function_id(function_id("[outside any object]", "", ""));
      return it->second;
    }
    const profile::Region& r = p.regions[pc.region];
    if (pc.sym == nullptr) {
      loc->add_line()->set_function_id(function_id("[unknown]", "", ""));
      return it->second;
    }
    std::vector<symbolize::Frame> frames = pc.object->frames(pc.address - r.load_bias);
    // The outermost frame is named by the ELF symbol, like the function report.
    for (size_t k = 0; k < frames.size(); ++k) {
      const symbolize::Frame& f = frames[k];
      bool outer = k + 1 == frames.size();
      auto* line = loc->add_line();
      line->set_function_id(
          outer ? function_id(pc.sym->name, pc.sym->raw, f.file)
                : function_id(f.function.empty() ? "??" : f.function, f.raw, f.file));
      line->set_line(f.line);
      // Line.column (field 3) came to pprof's schema after the copy Debian ships: written
      // as that field's varint, which readers of the newer schema take as the column.
      if (f.column > 0)
        line->GetReflection()->MutableUnknownFields(line)->AddVarint(kLineColumnField,
                                                                     uint64_t(f.column));
    }
    if (frames.empty())
      loc->add_line()->set_function_id(function_id(pc.sym->name, pc.sym->raw, ""));
    return it->second;
  };

  // Samples; a split bin's count is rounded so that its pieces still sum to the count.
  for (size_t i = 0; i < pieces.size();) {
    size_t j = i + 1;
    while (j < pieces.size() && pieces[j].region == pieces[i].region &&
           pieces[j].bin == pieces[i].bin && pieces[i].region != SIZE_MAX)
      ++j;
    double total = 0;
    for (size_t k = i; k < j; ++k) total += pieces[k].samples;
    const int64_t target = pprof_value(total, &clamped);
    int64_t assigned = 0;
    for (size_t k = i; k < j; ++k) {
      int64_t n = pprof_value(pieces[k].samples, &clamped);
      if (k + 1 == j) n = std::max<int64_t>(0, target - assigned);
      n = std::min(n, target - std::min(target, assigned));
      assigned += n;
      auto* s = out.add_sample();
      s->add_location_id(location_id(pieces[k]));
      s->add_value(n);
      s->add_value(pprof_value(pieces[k].samples * double(p.tick_ns), &clamped));
      // Several processes (a run, or sprofil serve over several): each sample names its own
      // with the labels docs/fleet.md lists, pid (a number) and comm (a string).
      if (p.processes.size() > 1 && pieces[k].process < p.processes.size()) {
        const profile::Process& proc = p.processes[pieces[k].process];
        auto* pid = s->add_label();
        pid->set_key(str.id("pid"));
        pid->set_num(proc.pid);
        auto* comm = s->add_label();
        comm->set_key(str.id("comm"));
        comm->set_str(str.id(proc.comm.empty() ? profile::comm_of(proc.argv) : proc.comm));
      }
    }
    i = j;
  }

  if (clamped && warnings != nullptr)
    warnings->push_back(
        "pprof: some values exceed pprof's signed 64-bit range and were clamped to "
        "9223372036854775807 (INT64_MAX)");
  std::string raw, gz;
  out.SerializeToString(&raw);
  gzip(raw, &gz);
  return gz;
}

const Exporter& pprof_exporter() {
  static const FileExporter e{
      "pprof", "gzipped profile.proto for go tool pprof (default file sprofil.pb.gz)",
      "sprofil.pb.gz", [](const ExportInput& in, std::string* bytes, std::string* error) {
        *bytes = pprof_bytes(in.profile, in.symbolizer, in.warnings, in.options);
        if (bytes->empty()) *error = "cannot compress the pprof profile";
        return !bytes->empty();
      }};
  return e;
}

}  // namespace sprofil::report
