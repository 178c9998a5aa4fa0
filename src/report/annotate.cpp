// `sprofil annotate`: see annotate.hpp.
#include "report/annotate.hpp"

#include <capstone/capstone.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <tuple>

#include "report/json_out.hpp"
#include "report/labels.hpp"

namespace sprofil::report {
namespace {

using profile::Region;

// The bytes of link-time range [start, end) from the executable PT_LOAD segment of the file
// that holds obj's code (symbolize::Object::open_code: the vDSO's is this process's image).
bool read_text(const symbolize::Object& obj, uint64_t start, uint64_t end, std::string* bytes,
               uint16_t* machine, std::string* why) {
  elf_version(EV_CURRENT);
  const std::string& path = obj.path();
  const int fd = obj.open_code(why);
  if (fd < 0) return false;
  bool ok = false;
  *why = "no executable segment of " + path + " holds the function";
  if (Elf* elf = elf_begin(fd, ELF_C_READ, nullptr)) {
    GElf_Ehdr eh;
    size_t n = 0;
    if (gelf_getehdr(elf, &eh) != nullptr && elf_getphdrnum(elf, &n) == 0) {
      *machine = eh.e_machine;
      for (size_t i = 0; i < n && !ok; ++i) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, int(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
        if (start < ph.p_vaddr || start >= ph.p_vaddr + ph.p_filesz) continue;
        uint64_t stop = std::min<uint64_t>(end, ph.p_vaddr + ph.p_filesz);
        bytes->assign(stop - start, '\0');
        ssize_t got =
            ::pread(fd, bytes->data(), bytes->size(), off_t(ph.p_offset + start - ph.p_vaddr));
        ok = got == ssize_t(bytes->size());
        if (!ok) *why = "cannot read " + path;
      }
    } else {
      *why = path + " is not an ELF file";
    }
    elf_end(elf);
  } else {
    *why = path + " is not an ELF file";
  }
  ::close(fd);
  return ok;
}

// Decodes the instructions that start before `stop` (all of `bytes` by default).
bool disassemble(const std::string& bytes, uint64_t vaddr, uint16_t machine,
                 std::vector<AnnotatedInstruction>* out, std::string* why,
                 uint64_t stop = UINT64_MAX) {
  cs_arch arch;
  cs_mode mode;
  switch (machine) {
    case EM_X86_64:
      arch = CS_ARCH_X86;
      mode = CS_MODE_64;
      break;
    case EM_386:
      arch = CS_ARCH_X86;
      mode = CS_MODE_32;
      break;
    case EM_AARCH64:
      arch = CS_ARCH_ARM64;
      mode = CS_MODE_ARM;
      break;
    default:
      *why = "no disassembler for ELF machine " + std::to_string(machine);
      return false;
  }
  csh h;
  if (cs_open(arch, mode, &h) != CS_ERR_OK) {
    *why = "capstone cannot open this architecture";
    return false;
  }
  if (arch == CS_ARCH_X86) cs_option(h, CS_OPT_SYNTAX, CS_OPT_SYNTAX_ATT);
  cs_insn* insn = cs_malloc(h);
  const uint8_t* code = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t left = bytes.size();
  uint64_t addr = vaddr;
  while (left > 0 && addr < stop) {
    const uint8_t* at = code;
    AnnotatedInstruction ins;
    ins.vaddr = addr;
    if (cs_disasm_iter(h, &code, &left, &addr, insn)) {
      ins.size = insn->size;
      ins.text = insn->mnemonic;
      if (insn->op_str[0] != '\0') ins.text += std::string(" ") + insn->op_str;
    } else {  // undecodable byte (data or padding): shown as (bad), one byte
      ins.size = 1;
      ins.text = "(bad)";
      code = at + 1;
      --left;
      ++addr;
    }
    out->push_back(std::move(ins));
  }
  cs_free(insn, 1);
  cs_close(&h);
  return true;
}

const std::string& source_line(const std::string& file, int line) {
  static std::map<std::string, std::vector<std::string>> cache;
  static const std::string none;
  auto it = cache.find(file);
  if (it == cache.end()) {
    std::vector<std::string> lines;
    std::ifstream in(file);
    for (std::string s; std::getline(in, s);) {
      if (!s.empty() && s.back() == '\r') s.pop_back();  // a CRLF file
      lines.push_back(expand_tabs(s));
    }
    it = cache.emplace(file, std::move(lines)).first;
  }
  if (line <= 0 || size_t(line) > it->second.size()) return none;
  return it->second[size_t(line) - 1];
}

// The row's name, its short name (symbolize::short_name), either without a GCC clone suffix
// (symbolize::without_clone_suffix: `std::__introsort_loop` for `std::__introsort_loop<...>(...)
// [clone .isra.0]`, `spin` for `spin.constprop.0`), or one of its aliases.
bool name_matches(const std::string& want, const Row& r) {
  const std::string s = symbolize::short_name(r.name);
  if (want == r.name || want == s || want == symbolize::without_clone_suffix(r.name) ||
      want == symbolize::without_clone_suffix(s))
    return true;
  return std::find(r.aliases.begin(), r.aliases.end(), want) != r.aliases.end();
}

// A name's last components: `spin` and `Worker::spin` for `ns::Worker::spin(long)`, as the
// short name (symbolize::short_name) spells them, with or without a clone suffix; what a user
// copies from a method's line.
bool tail_matches(const std::string& want, const Row& r) {
  const std::string s = symbolize::short_name(r.name);
  for (const std::string& n : {s, symbolize::without_clone_suffix(s)})
    if (n.size() > want.size() + 2 && n.compare(n.size() - want.size(), want.size(), want) == 0 &&
        n.compare(n.size() - want.size() - 2, 2, "::") == 0)
      return true;
  return false;
}

// The regions that hold row's function: its object, in the selected processes (and of the
// row's command when the profile has several processes).
bool holds(const profile::Profile& p, const Region& r, const AnnotateOptions& opts,
           const Row& row) {
  if (r.path != row.object_path || !process_selected(p, r.process, opts.report)) return false;
  return row.comm.empty() || r.process >= p.processes.size() ||
         p.processes[r.process].comm == row.comm;
}

// Link-time range [start, end) of row's object: one symbol of row's function (a name may have
// several symbols: static functions of several files), or, for an "[unknown]" row, a range of
// sampled code that no symbol covers (`symbol` false), read up to `end` but decoded only as far
// as the instructions that start before `starts_before`: whole instructions, never one cut by
// the end of the bytes read.
AnnotatedFunction annotate_one(const profile::Profile& p, const AnnotateOptions& opts,
                               const Row& row, const Region& first, const symbolize::Object* obj,
                               uint64_t start, uint64_t end, bool symbol,
                               uint64_t starts_before = UINT64_MAX) {
  struct Extent {
    uint64_t start, end;
  } extent{start, end};
  const Extent* s = &extent;
  AnnotatedFunction f;
  f.name = row.name;
  f.object = row.object;
  f.object_path = row.object_path;
  f.comm = row.comm;
  f.samples = row.samples;
  f.percent = row.percent;
  const std::vector<symbolize::Symbol>& fns = obj->functions();
  f.start = s->start;
  f.end = s->end;

  std::string bytes, why;
  uint16_t machine = 0;
  if (first.flags & SPROF_R_JIT) {  // its perf map has names, and its code is gone
    f.note = "no disassembly: JIT code, whose instructions ended with its process";
  } else if (!read_text(*obj, s->start, s->end, &bytes, &machine, &why) ||
             !disassemble(bytes, s->start, machine, &f.instructions, &why, starts_before)) {
    f.note = "no disassembly: " + why;
  }
  if (!symbol)  // what is shown: up to the last whole instruction
    f.end = f.instructions.empty() ? std::min(s->end, starts_before)
                                   : f.instructions.back().vaddr + f.instructions.back().size;
  // Charge the bins: a bin's count is split over the functions it covers by bytes (as
  // report::attribute does), and this function's part over its instructions by bytes.
  f.bin_size = 1;
  std::vector<double> charged(f.instructions.size(), 0);
  for (const Region& r : p.regions) {
    if (!holds(p, r, opts, row)) continue;
    if (r.start - r.load_bias >= s->end || r.end - r.load_bias <= s->start) continue;
    f.bin_size = std::max(f.bin_size, r.bin_size);
    r.for_each_bin([&](uint64_t i, uint64_t count, uint64_t) {
      uint64_t a = r.bin_address(i);
      uint64_t b = std::min(a + r.bin_size, std::max(r.end, a + 1));
      uint64_t va = a - r.load_bias, vb = b - r.load_bias;
      if (vb <= s->start || va >= s->end) return;
      uint64_t covered = 0;
      auto it =
          std::upper_bound(fns.begin(), fns.end(), va,
                           [](uint64_t x, const symbolize::Symbol& y) { return x < y.start; });
      if (it != fns.begin()) --it;
      for (; it != fns.end() && it->start < vb; ++it) {
        uint64_t lo = std::max(va, it->start), hi = std::min(vb, it->end);
        if (hi > lo) covered += hi - lo;
      }
      if (symbol ? covered == 0 : covered != 0) return;  // as report::attribute charges it
      if (!symbol) covered = vb - va;
      auto ins =
          std::upper_bound(f.instructions.begin(), f.instructions.end(), va,
                           [](uint64_t x, const AnnotatedInstruction& y) { return x < y.vaddr; });
      if (ins != f.instructions.begin()) --ins;
      for (; ins != f.instructions.end() && ins->vaddr < vb; ++ins) {
        uint64_t lo = std::max(va, ins->vaddr), hi = std::min(vb, ins->vaddr + ins->size);
        if (hi > lo)
          charged[size_t(ins - f.instructions.begin())] +=
              double(count) * double(hi - lo) / double(covered);
      }
    });
  }
  std::map<std::tuple<std::string, int, std::string>, double> by_line;
  for (size_t k = 0; k < f.instructions.size(); ++k) {
    AnnotatedInstruction& ins = f.instructions[k];
    ins.samples = charged[k];
    std::vector<symbolize::Frame> frames = obj->frames(ins.vaddr);
    if (!frames.empty() && frames.front().line != 0) {
      f.has_lines = true;
      ins.file = frames.front().file;
      ins.line = frames.front().line;
      if (frames.size() > 1) ins.inlined = frames.front().function;
    }
    if (ins.samples > 0 && ins.line != 0) by_line[{ins.file, ins.line, ins.inlined}] += ins.samples;
  }
  for (const auto& [k, v] : by_line) {
    AnnotatedLine l;
    std::tie(l.file, l.line, l.inlined) = k;
    l.samples = v;
    l.percent = f.samples > 0 ? 100 * v / f.samples : 0;
    l.source = source_line(l.file, l.line);
    f.lines.push_back(std::move(l));
  }
  if (!f.has_lines && f.note.empty())
    f.note = "no source lines: " + row.object +
             " has no DWARF line information for this function (stripped, or built without -g); "
             "disassembly only";
  return f;
}

// Code no symbol covers (a stripped object without even a dynamic symbol for it): the sampled
// bins of row's object gathered into ranges (gaps of at most 64 bytes), with most samples first.
struct UnknownRange {
  uint64_t start, end;  // link-time [start, end): first sampled byte, past the last one
  double samples;
};
std::vector<UnknownRange> unknown_ranges(const profile::Profile& p, symbolize::Symbolizer& sym,
                                         const AnnotateOptions& opts, const Row& row) {
  std::vector<UnknownRange> bins;
  for (const Region& r : p.regions) {
    if (!holds(p, r, opts, row)) continue;
    const symbolize::Object* obj = sym.open(r.path, r.build_id);
    r.for_each_bin([&](uint64_t i, uint64_t count, uint64_t) {
      uint64_t va = r.bin_address(i) - r.load_bias;
      uint64_t vb = std::min(va + r.bin_size, std::max(r.end - r.load_bias, va + 1));
      const symbolize::Symbol* f = obj->function_at(va);
      if (f == nullptr && (vb <= va + 1 || obj->function_at(vb - 1) == nullptr))
        bins.push_back({va, vb, double(count)});
    });
  }
  std::sort(bins.begin(), bins.end(),
            [](const UnknownRange& x, const UnknownRange& y) { return x.start < y.start; });
  std::vector<UnknownRange> ranges;
  for (const UnknownRange& b : bins) {
    if (!ranges.empty() && b.start <= ranges.back().end + 64) {
      ranges.back().end = std::max(ranges.back().end, b.end);
      ranges.back().samples += b.samples;
    } else {
      ranges.push_back(b);
    }
  }
  std::stable_sort(ranges.begin(), ranges.end(), [](const UnknownRange& x, const UnknownRange& y) {
    return x.samples > y.samples;
  });
  return ranges;
}

// One range of unknown, disassembled from its first sampled address: named `[unknown] 0xSTART`
// when it is one sampled byte, else `[unknown] 0xSTART..0xEND` (half-open, as the link-time
// ranges the output prints).
AnnotatedFunction annotate_range(const profile::Profile& p, const AnnotateOptions& opts,
                                 const Row& row, const Region& first, const symbolize::Object* obj,
                                 const UnknownRange& g, uint64_t total_samples) {
  // Read 15 bytes past the last sampled one (the longest x86 instruction that starts there),
  // decode the instructions that start in the range.
  AnnotatedFunction f = annotate_one(p, opts, row, first, obj, g.start, g.end + 15, false, g.end);
  f.name = "[unknown] " + hex_addr(g.start) + (g.end > g.start + 1 ? ".." + hex_addr(g.end) : "");
  f.samples = g.samples;
  f.percent = total_samples > 0 ? 100 * g.samples / double(total_samples) : 0;
  for (AnnotatedLine& l : f.lines) l.percent = 100 * l.samples / f.samples;
  std::string why = "no symbol covers these addresses (" + row.object +
                    " is stripped): disassembly of the sampled range from its first sampled "
                    "address";
  f.note = f.note.empty() || f.note.rfind("no source lines", 0) == 0 ? why + "; no source lines"
                                                                     : f.note;
  return f;
}

std::string pct(double samples, double of) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%7.2f", of > 0 ? 100 * samples / of : 0.0);
  return buf;
}

}  // namespace

Annotation annotate(const profile::Profile& p, symbolize::Symbolizer& sym,
                    const AnnotateOptions& opts) {
  Annotation a;
  Options ro = opts.report;
  ro.by = By::kFunction;
  ro.limit = 0;
  ro.min_percent = 0;
  Table t = aggregate(p, sym, ro);
  a.total_samples = t.total_samples;
  a.source = opts.report.source;
  // What --top ranks: each named row with its samples, and each range of an "[unknown]" row
  // with its own samples (not the row's, which sums every range of the object).
  struct Item {
    const Row* row;
    const UnknownRange* range;  // null for a named row
    double samples;
  };
  std::vector<std::vector<UnknownRange>> ranges;  // per "[unknown]" row (items point into them)
  std::vector<Item> items;
  // A named function: every row of that name; "[unknown]" is not one. Where no row has it,
  // the rows whose name ends with it as whole components (tail_matches).
  auto named = [&](bool (*matches)(const std::string&, const Row&)) {
    for (const Row& r : t.rows)
      if (!r.object_path.empty() && r.samples > 0 && r.name != "[unknown]" &&
          matches(opts.function, r))
        items.push_back({&r, nullptr, r.samples});
  };
  if (!opts.function.empty()) {
    named(name_matches);
    if (items.empty()) named(tail_matches);
    if (items.empty()) {
      // Nothing of that name: the hottest functions whose name holds it, for the message.
      for (const Row& r : t.rows) {  // rows come hottest first
        if (a.near.size() == kNearNames) break;
        if (r.samples <= 0 || r.name == "[unknown]") continue;
        std::string s = symbolize::short_name(r.name);
        if (s.find(opts.function) != std::string::npos &&
            std::find(a.near.begin(), a.near.end(), s) == a.near.end())
          a.near.push_back(std::move(s));
      }
    }
  }
  for (const Row& r : t.rows) {
    if (r.object_path.empty() || r.samples <= 0 || !opts.function.empty()) continue;
    if (r.name != "[unknown]") {
      items.push_back({&r, nullptr, r.samples});
    } else {
      ranges.push_back(unknown_ranges(p, sym, opts, r));
      for (const UnknownRange& g : ranges.back()) items.push_back({&r, &g, g.samples});
    }
  }
  if (opts.function.empty())
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& x, const Item& y) { return x.samples > y.samples; });
  size_t done = 0;  // items annotated (a row whose name no symbol has is skipped)
  for (const Item& item : items) {
    if (opts.function.empty() && done >= opts.top) break;
    const Row& r = *item.row;
    const Region* first = nullptr;
    for (const Region& reg : p.regions)
      if (holds(p, reg, opts, r)) {
        first = &reg;
        break;
      }
    if (first == nullptr) continue;
    const symbolize::Object* obj = sym.open(first->path, first->build_id);
    if (item.range != nullptr) {
      a.functions.push_back(annotate_range(p, opts, r, *first, obj, *item.range, t.total_samples));
      ++done;
      continue;
    }
    std::vector<const symbolize::Symbol*> candidates;
    for (const symbolize::Symbol& c : obj->functions())
      if (c.name == r.name) candidates.push_back(&c);
    if (candidates.empty()) continue;
    ++done;
    for (const symbolize::Symbol* c : candidates) {
      AnnotatedFunction f = annotate_one(p, opts, r, *first, obj, c->start, c->end, true);
      if (candidates.size() > 1 && !f.instructions.empty()) {
        // Several symbols share the name: each gets its own samples, and those without any
        // are left out.
        f.samples = 0;
        for (const AnnotatedInstruction& ins : f.instructions) f.samples += ins.samples;
        if (f.samples <= 0) continue;
        f.percent = t.total_samples > 0 ? 100 * f.samples / double(t.total_samples) : 0;
        for (AnnotatedLine& l : f.lines) l.percent = 100 * l.samples / f.samples;
      }
      a.functions.push_back(std::move(f));
    }
  }
  a.warnings = t.warnings;
  add_warnings(&a.warnings, sym.take_warnings());
  return a;
}

void write_annotation_text(const Annotation& a, std::ostream& out) {
  out << "# " << printable(a.source) << ": " << count_of(a.total_samples, "sample", "samples")
      << "\n";
  for (const std::string& w : a.warnings) out << "# warning: " << printable(w) << "\n";
  for (const AnnotatedFunction& f : a.functions) {
    char buf[512];
    std::snprintf(buf, sizeof buf, " (%s samples, %.2f%% of all)\n",
                  format_samples(f.samples).c_str(), f.percent);
    // Of a run of several processes, the command, which tells apart the rows of one function
    // in several programs (as report's command column does).
    out << "\n## " << printable(f.name) << " in " << printable(f.object)
        << (f.comm.empty() ? "" : ", command " + printable(f.comm)) << buf;
    std::snprintf(buf, sizeof buf, "%s..%s", hex_addr(f.start).c_str(), hex_addr(f.end).c_str());
    out << "# link-time range " << buf << " of " << printable(f.object_path) << "\n";
    if (f.bin_size > 1)
      out << "# precision: bins are " << f.bin_size
          << " bytes wide; a bin's samples are split over the instructions it covers by bytes, so "
             "per-instruction and per-line figures are approximate (record with "
             "SPROFIL_BIN_BYTES=1 for exact ones)\n";
    if (!f.note.empty()) out << "# " << printable(f.note) << "\n";
    if (!f.lines.empty()) {
      out << "\n Percent   Samples  Source line\n";
      for (const AnnotatedLine& l : f.lines) {
        std::snprintf(buf, sizeof buf, "%s %9s  ", pct(l.samples, f.samples).c_str(),
                      format_samples(l.samples).c_str());
        out << buf << printable(basename_of(l.file)) << ":" << l.line;
        if (!l.inlined.empty()) out << " [inlined " << printable(l.inlined) << "]";
        if (!l.source.empty()) out << "  " << printable(l.source);
        out << "\n";
      }
    }
    if (f.instructions.empty()) continue;
    out << "\n Percent |  Source / disassembly\n";
    std::string file;
    int line = -1;
    for (const AnnotatedInstruction& ins : f.instructions) {
      if (f.has_lines && (ins.line != line || ins.file != file)) {
        file = ins.file;
        line = ins.line;
        out << "         : ";
        if (line == 0) {
          out << "??\n";
        } else {
          out << printable(basename_of(file)) << ":" << line;
          if (!ins.inlined.empty()) out << " [inlined " << printable(ins.inlined) << "]";
          const std::string& src = source_line(file, line);
          if (!src.empty()) out << "  " << printable(src);
          out << "\n";
        }
      }
      std::snprintf(buf, sizeof buf, "%s  :  %*llx:  ",
                    ins.samples > 0 ? pct(ins.samples, f.samples).c_str() : "       ", 8,
                    static_cast<unsigned long long>(ins.vaddr));
      out << buf << printable(ins.text) << "\n";
    }
  }
  if (a.functions.empty()) out << "# no function with samples matches\n";
}

void write_annotation_json(const Annotation& a, std::ostream& out) {
  nlohmann::json j;
  j["source"] = valid_utf8(a.source);
  j["total_samples"] = a.total_samples;
  j["warnings"] = json_strings(a.warnings);
  if (!a.near.empty()) j["near"] = json_strings(a.near);
  j["functions"] = nlohmann::json::array();
  for (const AnnotatedFunction& f : a.functions) {
    nlohmann::json jf = json_named(f.name, f.object);
    if (!f.comm.empty()) jf["comm"] = valid_utf8(f.comm);
    jf.update({{"object_path", valid_utf8(f.object_path)},
               {"start", f.start},
               {"end", f.end},
               {"bin_size", f.bin_size},
               {"samples", rounded(f.samples, 3)},
               {"percent", rounded(f.percent, 4)},
               {"has_lines", f.has_lines},
               {"note", valid_utf8(f.note)}});
    jf["lines"] = nlohmann::json::array();
    for (const AnnotatedLine& l : f.lines)
      jf["lines"].push_back({{"file", valid_utf8(l.file)},
                             {"line", l.line},
                             {"inlined", valid_utf8(l.inlined)},
                             {"samples", rounded(l.samples, 3)},
                             {"percent", rounded(l.percent, 4)}});
    jf["instructions"] = nlohmann::json::array();
    for (const AnnotatedInstruction& ins : f.instructions)
      jf["instructions"].push_back({{"vaddr", ins.vaddr},
                                    {"size", ins.size},
                                    {"text", valid_utf8(ins.text)},
                                    {"samples", rounded(ins.samples, 3)},
                                    {"file", valid_utf8(ins.file)},
                                    {"line", ins.line},
                                    {"inlined", valid_utf8(ins.inlined)}});
    j["functions"].push_back(std::move(jf));
  }
  write_json_document(j, out);
}

}  // namespace sprofil::report
