#include "symbolize/symbolize.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#ifdef SPROFIL_HAVE_DEBUGINFOD
#include <elfutils/debuginfod.h>
#endif

namespace sprofil::symbolize {
namespace {

char* g_debuginfo_path = nullptr;  // the default search path (.debug, /usr/lib/debug)

const Dwfl_Callbacks kCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = &g_debuginfo_path,
};

const char* die_name(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
  if (s == nullptr) s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
  if (s == nullptr) s = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
  return s;
}

int binding_rank(unsigned char bind) {
  switch (bind) {
    case STB_GLOBAL:
      return 0;
    case STB_WEAK:
      return 1;
    default:
      return 2;
  }
}

}  // namespace

std::string demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (out == nullptr || status != 0) {
    std::free(out);
    return name;
  }
  std::string result(out);
  std::free(out);
  return result;
}

std::string hex(const std::vector<uint8_t>& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

Object::~Object() {
  if (dwfl_ != nullptr) dwfl_end(dwfl_);
}

const Symbol* Object::function_at(uint64_t vaddr) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), vaddr,
                             [](uint64_t a, const Symbol& s) { return a < s.start; });
  if (it == functions_.begin()) return nullptr;
  --it;
  return vaddr < it->end ? &*it : nullptr;
}

void Object::load_symbols() {
  struct Entry {
    Symbol sym;
    uint64_t size;
    int rank;
  };
  std::vector<Entry> entries;
  int n = dwfl_module_getsymtab(mod_);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr = 0;
    GElf_Word shndx = 0;
    Elf* elf = nullptr;
    Dwarf_Addr bias = 0;
    const char* name = dwfl_module_getsym_info(mod_, i, &sym, &addr, &shndx, &elf, &bias);
    if (name == nullptr || *name == '\0') continue;
    int type = GELF_ST_TYPE(sym.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (shndx == SHN_UNDEF || addr == 0) continue;
    Entry e;
    e.sym.raw = name;
    e.sym.start = addr;
    e.size = sym.st_size;
    e.rank = binding_rank(GELF_ST_BIND(sym.st_info));
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.sym.start != b.sym.start) return a.sym.start < b.sym.start;
    if (a.size != b.size) return a.size > b.size;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.sym.raw < b.sym.raw;
  });
  functions_.clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!functions_.empty() && functions_.back().start == entries[i].sym.start) continue;
    Symbol s = std::move(entries[i].sym);
    s.end = s.start + entries[i].size;
    functions_.push_back(std::move(s));
  }
  for (size_t i = 0; i < functions_.size(); ++i) {
    Symbol& s = functions_[i];
    uint64_t next = i + 1 < functions_.size() ? functions_[i + 1].start : UINT64_MAX;
    if (s.end == s.start) s.end = next == UINT64_MAX ? s.start + 1 : next;  // unsized symbol
    if (s.end > next) s.end = next;
    s.name = demangle(s.raw);
  }
}

std::vector<Frame> Object::frames(uint64_t vaddr) const {
  std::vector<Frame> out;
  if (!ok_) return out;
  auto cached = frame_cache_.find(vaddr);
  if (cached != frame_cache_.end()) return cached->second;

  Frame cur;
  if (Dwfl_Line* line = dwfl_module_getsrc(mod_, vaddr)) {
    Dwarf_Addr a;
    int ln = 0, col = 0;
    const char* file = dwfl_lineinfo(line, &a, &ln, &col, nullptr, nullptr);
    if (file != nullptr) cur.file = file;
    cur.line = ln;
    cur.column = col;
  }
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = dwfl_module_addrdie(mod_, vaddr, &bias);
  Dwarf_Die* scopes = nullptr;
  int nscopes = cu != nullptr ? dwarf_getscopes(cu, vaddr - bias, &scopes) : 0;
  // dwarf_getscopes continues past an inlined instance into its abstract definition's scopes;
  // dwarf_getscopes_die on the innermost instance gives the concrete chain of callers.
  for (int i = 0; i < nscopes; ++i) {
    if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine) continue;
    Dwarf_Die inner = scopes[i];
    Dwarf_Die* chain = nullptr;
    int nchain = dwarf_getscopes_die(&inner, &chain);
    if (nchain > 0) {
      std::free(scopes);
      scopes = chain;
      nscopes = nchain;
    } else {
      std::free(chain);
    }
    break;
  }
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (cu != nullptr && dwarf_getsrcfiles(cu, &files, &nfiles) != 0) files = nullptr;
  for (int i = 0; i < nscopes; ++i) {
    Dwarf_Die* die = &scopes[i];
    int tag = dwarf_tag(die);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    Frame f = cur;
    const char* name = die_name(die);
    f.function = name != nullptr ? demangle(name) : std::string();
    out.push_back(std::move(f));
    if (tag == DW_TAG_subprogram) break;
    // The caller's position is this inlined instance's call site.
    cur = Frame();
    Dwarf_Attribute attr;
    Dwarf_Word v = 0;
    if (files != nullptr && dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v) == 0) {
      const char* file = dwarf_filesrc(files, v, nullptr, nullptr);
      if (file != nullptr) cur.file = file;
    }
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0) cur.line = int(v);
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &attr), &v) == 0) cur.column = int(v);
  }
  std::free(scopes);
  if (out.empty() && (cur.line != 0 || !cur.file.empty())) out.push_back(cur);
  frame_cache_.emplace(vaddr, out);
  return out;
}

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

Object* Symbolizer::open(const std::string& path, const std::vector<uint8_t>& build_id) {
  std::string key = path + '\0' + hex(build_id);
  auto it = objects_.find(key);
  if (it != objects_.end()) return it->second.get();
  std::unique_ptr<Object> obj(new Object());
  obj->path_ = path;
  if (path.empty() || path == "[vdso]" || path[0] == '[') {
    return objects_.emplace(key, std::move(obj)).first->second.get();
  }

  // Candidates: the path itself, then by build-id: debuginfod's executable and the local
  // debug file (symbols and lines, no code, which is all we need).
  std::vector<std::string> candidates{path};
  std::string why;
  if (!build_id.empty()) {
    std::string h = hex(build_id);
    candidates.push_back("/usr/lib/debug/.build-id/" + h.substr(0, 2) + "/" + h.substr(2) +
                         ".debug");
  }
  for (size_t ci = 0; ci <= candidates.size() && obj->mod_ == nullptr; ++ci) {
    std::string file;
    int fd = -1;
    if (ci < candidates.size()) {
      file = candidates[ci];
      fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        if (ci == 0) why = std::string(std::strerror(errno));
        continue;
      }
    } else {
#ifdef SPROFIL_HAVE_DEBUGINFOD
      const char* urls = std::getenv("DEBUGINFOD_URLS");
      if (build_id.empty() || urls == nullptr || *urls == '\0') break;
      debuginfod_client* client = debuginfod_begin();
      if (client == nullptr) break;
      char* found = nullptr;
      fd = debuginfod_find_executable(client, build_id.data(), int(build_id.size()), &found);
      debuginfod_end(client);
      if (fd < 0) break;
      file = found != nullptr ? found : path;
      std::free(found);
#else
      break;
#endif
    }
    Dwfl* dwfl = dwfl_begin(&kCallbacks);
    if (dwfl == nullptr) {
      ::close(fd);
      break;
    }
    dwfl_report_begin(dwfl);
    // Reported at its link-time addresses (bias 0): callers subtract the load bias.
    std::string base = path.substr(path.rfind('/') + 1);
    Dwfl_Module* mod = dwfl_report_elf(dwfl, base.c_str(), file.c_str(), fd, 0, true);
    dwfl_report_end(dwfl, nullptr, nullptr);
    if (mod == nullptr) {
      if (ci == 0) why = dwfl_errmsg(-1);
      dwfl_end(dwfl);
      continue;
    }
    obj->dwfl_ = dwfl;
    obj->mod_ = mod;
  }
  if (obj->mod_ == nullptr) {
    obj->warning_ = path + ": cannot open (" + (why.empty() ? "not found" : why) +
                    "); its samples are reported as [unknown]";
    warnings_.push_back(obj->warning_);
    return objects_.emplace(key, std::move(obj)).first->second.get();
  }
  obj->ok_ = true;
  const unsigned char* bits = nullptr;
  GElf_Addr vaddr = 0;
  int len = dwfl_module_build_id(obj->mod_, &bits, &vaddr);
  if (len > 0 && !build_id.empty()) {
    std::vector<uint8_t> file_id(bits, bits + len);
    if (file_id != build_id) {
      obj->warning_ = path + ": build-id mismatch (profile " + hex(build_id) + ", file " +
                      hex(file_id) + "); symbols may be wrong";
      warnings_.push_back(obj->warning_);
    }
  }
  obj->load_symbols();
  return objects_.emplace(key, std::move(obj)).first->second.get();
}

Resolved Symbolizer::resolve(const std::string& path, const std::vector<uint8_t>& build_id,
                             uint64_t load_bias, uint64_t runtime_address) {
  Resolved r;
  r.function = "[unknown]";
  Object* obj = open(path, build_id);
  uint64_t vaddr = runtime_address - load_bias;
  if (const Symbol* s = obj->function_at(vaddr)) {
    r.known = true;
    r.function = s->name;
    r.raw_function = s->raw;
    r.symbol_start = s->start + load_bias;
    r.symbol_size = s->size();
  }
  r.inlined = obj->frames(vaddr);
  if (!r.inlined.empty()) {
    r.file = r.inlined.front().file;
    r.line = r.inlined.front().line;
  }
  return r;
}

std::vector<std::string> Symbolizer::take_warnings() {
  std::vector<std::string> out;
  out.swap(warnings_);
  return out;
}

}  // namespace sprofil::symbolize
