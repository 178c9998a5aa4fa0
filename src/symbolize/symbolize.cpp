#include "symbolize/symbolize.hpp"

#include "symbolize/perf_map.hpp"

#include <cxxabi.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <string_view>

#include <elfutils/debuginfod.h>

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

size_t leading_underscores(const std::string& s) {
  size_t n = 0;
  while (n < s.size() && s[n] == '_') ++n;
  return n;
}

// A symbol as read, before aliases are merged.
struct RawSym {
  std::string raw;
  uint64_t start = 0, size = 0;
  uint64_t section_end = 0;  // 0 = unknown
  int rank = 2;
};

// perf's choice among symbols at one address (tools/perf/util/symbol.c choose_best_symbol):
// true if `a` is the better name.
// 0: a plain name or the default version (name@@VER), 1: a compatibility version (name@VER).
int version_rank(const std::string& raw) {
  size_t at = raw.find('@');
  return at == std::string::npos || raw.compare(at, 2, "@@") == 0 ? 0 : 1;
}

// The name users call: without a default version suffix (clock_gettime@@GLIBC_2.17).
std::string without_default_version(const std::string& raw) {
  size_t at = raw.find("@@");
  return at == std::string::npos || at == 0 ? raw : raw.substr(0, at);
}

bool better_name(const RawSym& a, const RawSym& b) {
  if ((a.size != 0) != (b.size != 0)) return a.size != 0;
  if (a.rank != b.rank) return a.rank < b.rank;
  // Unlike perf, the current version over a compatibility one: free, not cfree@GLIBC_2.2.5.
  int va = version_rank(a.raw), vb = version_rank(b.raw);
  if (va != vb) return va < vb;
  size_t ua = leading_underscores(a.raw), ub = leading_underscores(b.raw);
  if (ua != ub) return ua < ub;
  size_t la = without_default_version(a.raw).size(), lb = without_default_version(b.raw).size();
  if (la != lb) return la > lb;
  return a.raw < b.raw;
}

// A synthetic `_start` at an executable's entry point where no function symbol covers it (a
// stripped program: Debian's /usr/bin), as every libc's crt1 names it: record's default
// counts there the end of each exec and the time of programs that ended before their first
// sample (docs/agent.md). Only its first kEntryBytes, at most up to the next symbol: its size
// is unknown, and the code after it is not its own.
constexpr uint64_t kEntryBytes = 16;

void entry_symbol(Elf* elf, std::vector<RawSym>* out) {
  GElf_Ehdr eh;
  if (elf == nullptr || gelf_getehdr(elf, &eh) == nullptr || eh.e_entry == 0) return;
  bool program = eh.e_type == ET_EXEC;
  size_t phnum = 0;
  if (!program && eh.e_type == ET_DYN && elf_getphdrnum(elf, &phnum) == 0) {
    for (size_t i = 0; i < phnum && !program; ++i) {
      GElf_Phdr ph;
      program = gelf_getphdr(elf, int(i), &ph) != nullptr && ph.p_type == PT_INTERP;
    }
  }
  if (!program) return;  // a library's entry, if any, is no _start
  const uint64_t at = eh.e_entry;
  for (const RawSym& e : *out)
    if (e.start == at || (e.start < at && at < e.start + e.size)) return;
  RawSym e;
  e.raw = "_start";
  e.start = at;
  e.size = kEntryBytes;
  out->push_back(std::move(e));
}

const char* section_name(Elf* elf, size_t shstrndx, Elf_Scn* scn, GElf_Shdr* sh) {
  if (gelf_getshdr(scn, sh) == nullptr) return nullptr;
  return elf_strptr(elf, shstrndx, sh->sh_name);
}

// The functions that no symbol covers, found by their call-frame information: a stripped
// object keeps its .eh_frame, which the unwinder needs, and Debian's programs are stripped of
// every symbol but their dynamic ones (g++'s cc1plus had 31% of its samples in code no symbol
// names). The linker's .eh_frame_hdr lists the start of every FDE, sorted (encoded
// DW_EH_PE_datarel | DW_EH_PE_sdata4, as GNU ld, gold, lld and mold write it; another encoding
// gives no functions), and libdw reads each FDE's extent. Each function found is named
// fun_<its link-time address in hex>: `objdump -d --start-address=0x<address>` shows it, and
// the name is the same in every run of the object. Its extent ends at the next symbol's
// start. `fns` is sorted and stays so.
void cfi_functions(Dwfl_Module* mod, Elf* elf, uint64_t bias, std::vector<Symbol>* fns) {
  size_t shstrndx = 0;
  if (elf == nullptr || elf_getshdrstrndx(elf, &shstrndx) != 0) return;
  Elf_Scn* hdr = nullptr;
  GElf_Shdr sh;
  for (Elf_Scn* scn = nullptr; (scn = elf_nextscn(elf, scn)) != nullptr;) {
    const char* name = section_name(elf, shstrndx, scn, &sh);
    if (name != nullptr && std::strcmp(name, ".eh_frame_hdr") == 0 && sh.sh_type == SHT_PROGBITS) {
      hdr = scn;
      break;
    }
  }
  Elf_Data* d = hdr != nullptr ? elf_getdata(hdr, nullptr) : nullptr;
  if (d == nullptr || d->d_buf == nullptr || d->d_size < 12) return;
  const auto* b = static_cast<const unsigned char*>(d->d_buf);
  // version 1; eh_frame_ptr's encoding (4 bytes wide); the count's (udata4); the table's.
  const int ptr_format = b[1] & 0x0f;
  if (b[0] != 1 || (ptr_format != DW_EH_PE_udata4 && ptr_format != DW_EH_PE_sdata4) ||
      b[2] != DW_EH_PE_udata4 || b[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
    return;
  uint32_t count = 0;
  std::memcpy(&count, b + 8, 4);
  if (count == 0 || (d->d_size - 12) / 8 < count) return;
  Dwarf_Addr cfi_bias = 0;
  Dwarf_CFI* cfi = dwfl_module_eh_cfi(mod, &cfi_bias);
  if (cfi == nullptr) return;
  auto covered = [&](uint64_t a) {
    auto it = std::upper_bound(fns->begin(), fns->end(), a,
                               [](uint64_t x, const Symbol& s) { return x < s.start; });
    return it != fns->begin() && a < std::prev(it)->end;
  };
  auto table_start = [&](uint32_t i) {
    int32_t rel = 0;
    std::memcpy(&rel, b + 12 + 8 * size_t(i), 4);
    return sh.sh_addr + bias + static_cast<uint64_t>(int64_t(rel));
  };
  // The extent of the CFI row at `at` ([lo, hi) of one state of the frame, not the FDE's), or
  // false where no FDE covers `at`.
  auto row = [&](uint64_t at, uint64_t* lo, uint64_t* hi) {
    Dwarf_Frame* frame = nullptr;
    if (dwarf_cfi_addrframe(cfi, at - cfi_bias, &frame) != 0) return false;
    Dwarf_Addr l = 0, h = 0;
    const int got = dwarf_frame_info(frame, &l, &h, nullptr);
    std::free(frame);
    *lo = l + cfi_bias;
    *hi = h + cfi_bias;
    return got >= 0 && *lo <= at && at < *hi;
  };
  std::vector<Symbol> found;
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t start = table_start(i);
    if (covered(start)) continue;
    // The FDE's extent: its rows from its start, up to where no row follows (the padding after
    // it) or the next FDE's start (the table is sorted).
    const uint64_t limit = i + 1 < count ? table_start(i + 1) : UINT64_MAX;
    uint64_t lo = 0, hi = 0, end = start;
    while (end < limit && row(end, &lo, &hi) && (end != start || lo == start)) end = hi;
    if (end <= start) continue;
    Symbol s;
    char name[32];
    std::snprintf(name, sizeof name, "fun_%" PRIx64, start);
    s.name = s.raw = name;
    s.start = start;
    s.end = std::min(end, limit);
    found.push_back(std::move(s));
  }
  if (found.empty()) return;
  fns->insert(fns->end(), std::make_move_iterator(found.begin()),
              std::make_move_iterator(found.end()));
  std::stable_sort(fns->begin(), fns->end(),
                   [](const Symbol& x, const Symbol& y) { return x.start < y.start; });
  // Extents do not overlap: each ends by the next one's start (a symbol's, or another FDE's).
  for (size_t i = 0; i + 1 < fns->size(); ++i)
    if ((*fns)[i].end > (*fns)[i + 1].start) (*fns)[i].end = (*fns)[i + 1].start;
}

// True if relocation type `type` of machine `machine` is an IFUNC's (IRELATIVE): its slot gets
// what the resolver at the addend returns, and it names no symbol.
bool irelative(unsigned machine, uint64_t type) {
  return (machine == EM_X86_64 && type == R_X86_64_IRELATIVE) ||
         (machine == EM_AARCH64 && type == R_AARCH64_IRELATIVE);
}

// The name of the function symbol that starts at `addr` among `syms`, as load_symbols would
// choose it, or "" if none does.
std::string name_at(const std::vector<RawSym>& syms, uint64_t addr) {
  const RawSym* best = nullptr;
  for (const RawSym& s : syms)
    if (s.start == addr && (best == nullptr || better_name(s, *best))) best = &s;
  return best != nullptr ? without_default_version(best->raw) : std::string();
}

// Synthetic `callee@plt` symbols for the PLT entries of `elf` (link-time addresses; `bias`
// turns them into those of `out`'s symbols), named by the relocation of the GOT slot each entry
// jumps through (.rela.plt / .rela.dyn), as perf does. An IFUNC's slot (IRELATIVE: a static
// program's calls of memcpy or sin, libc's own) is named by its resolver's symbol, where perf
// has `*ABS*+0x...@plt` or the preceding symbol. x86-64: the entries of .plt, .plt.sec and
// .plt.got are found by their `jmp *disp(%rip)` through a named slot (a static program's .plt
// has 8-byte entries and no PLT0); elsewhere the entries of .plt after PLT0 follow .rela.plt
// in order.
void plt_symbols(Elf* elf, uint64_t bias, std::vector<RawSym>* out) {
  GElf_Ehdr eh;
  size_t shstrndx = 0;
  if (elf == nullptr || gelf_getehdr(elf, &eh) == nullptr || elf_getshdrstrndx(elf, &shstrndx) != 0)
    return;
  std::map<uint64_t, std::string> slot_name;  // GOT slot -> symbol
  std::vector<std::string> plt_order;         // .rela.plt's symbols in order
  struct Plt {
    std::string name;
    uint64_t addr, size, entsize;
    Elf_Data* data;
  };
  std::vector<Plt> plts;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr sh;
    const char* name = section_name(elf, shstrndx, scn, &sh);
    if (name == nullptr || sh.sh_type == SHT_NOBITS) continue;
    if (sh.sh_type == SHT_RELA || sh.sh_type == SHT_REL) {
      Elf_Scn* symscn = elf_getscn(elf, sh.sh_link);
      GElf_Shdr symsh;
      Elf_Data* data = elf_getdata(scn, nullptr);
      Elf_Data* syms = symscn != nullptr ? elf_getdata(symscn, nullptr) : nullptr;
      if (data == nullptr) continue;
      // A static program's .rela.plt links no symbol table: its relocations are IRELATIVE.
      if (syms != nullptr && gelf_getshdr(symscn, &symsh) == nullptr) continue;
      bool is_plt = std::strcmp(name, ".rela.plt") == 0 || std::strcmp(name, ".rel.plt") == 0;
      size_t n = sh.sh_entsize != 0 ? sh.sh_size / sh.sh_entsize : 0;
      for (size_t i = 0; i < n; ++i) {
        uint64_t offset = 0, info = 0;
        int64_t addend = 0;
        if (sh.sh_type == SHT_RELA) {
          GElf_Rela r;
          if (gelf_getrela(data, int(i), &r) == nullptr) break;
          offset = r.r_offset;
          info = r.r_info;
          addend = r.r_addend;
        } else {
          GElf_Rel r;
          if (gelf_getrel(data, int(i), &r) == nullptr) break;
          offset = r.r_offset;
          info = r.r_info;
        }
        const bool elf64 = eh.e_ident[EI_CLASS] == ELFCLASS64;
        size_t symi = elf64 ? GELF_R_SYM(info) : ELF32_R_SYM(info);
        uint64_t type = elf64 ? GELF_R_TYPE(info) : ELF32_R_TYPE(info);
        std::string sym;
        GElf_Sym s;
        if (symi != 0 && syms != nullptr && gelf_getsym(syms, int(symi), &s) != nullptr) {
          const char* sn = elf_strptr(elf, symsh.sh_link, s.st_name);
          if (sn != nullptr) sym = sn;
        } else if (symi == 0 && irelative(eh.e_machine, type) && sh.sh_type == SHT_RELA) {
          sym = name_at(*out, uint64_t(addend) + bias);
        }
        if (is_plt) plt_order.push_back(sym);
        if (!sym.empty()) slot_name.emplace(offset, sym);
      }
      continue;
    }
    if (std::strcmp(name, ".plt") == 0 || std::strcmp(name, ".plt.sec") == 0 ||
        std::strcmp(name, ".plt.got") == 0) {
      Elf_Data* data = elf_getdata(scn, nullptr);
      if (data == nullptr || data->d_buf == nullptr) continue;
      uint64_t ent = sh.sh_entsize != 0 ? sh.sh_entsize : 16;
      plts.push_back(
          Plt{name, sh.sh_addr, std::min<uint64_t>(sh.sh_size, data->d_size), ent, data});
    }
  }
  auto add = [&](const std::string& callee, uint64_t addr, uint64_t size) {
    RawSym r;
    r.raw = callee + "@plt";
    r.start = addr;
    r.size = size;
    r.rank = 0;
    out->push_back(std::move(r));
  };
  for (const Plt& p : plts) {
    const auto* bytes = static_cast<const unsigned char*>(p.data->d_buf);
    if (eh.e_machine == EM_X86_64) {
      // Each entry's `jmp *disp32(%rip)` (ff 25) through a named slot, possibly after endbr64
      // (f3 0f 1e fa) and bnd (f2); PLT0's jumps through a slot no relocation names.
      std::vector<std::pair<uint64_t, std::string>> found;  // entry offset, callee
      for (uint64_t i = 0; i + 6 <= p.size; ++i) {
        if (bytes[i] != 0xff || bytes[i + 1] != 0x25) continue;
        int32_t disp;
        std::memcpy(&disp, bytes + i + 2, 4);
        auto it = slot_name.find(p.addr + i + 6 + uint64_t(int64_t(disp)));
        if (it == slot_name.end()) continue;
        uint64_t at = i;
        if (at >= 1 && bytes[at - 1] == 0xf2) --at;
        if (at >= 4 && std::memcmp(bytes + at - 4, "\xf3\x0f\x1e\xfa", 4) == 0) at -= 4;
        found.emplace_back(at, it->second);
        i += 5;
      }
      for (size_t k = 0; k < found.size(); ++k) {
        uint64_t end = k + 1 < found.size() ? found[k + 1].first : p.size;
        add(found[k].second, p.addr + found[k].first, std::min(p.entsize, end - found[k].first));
      }
      continue;
    }
    uint64_t first = p.name == ".plt" ? (eh.e_machine == EM_AARCH64 ? 32 : p.entsize) : 0;
    for (uint64_t off = first, k = 0; off + p.entsize <= p.size; off += p.entsize, ++k) {
      if (p.name == ".plt" && k < plt_order.size() && !plt_order[k].empty())
        add(plt_order[k], p.addr + off, p.entsize);
    }
  }
}

// This process's vDSO image copied into a memfd (libdwfl reads ELF files from descriptors), or
// -1 with *why set.
int vdso_image_fd(std::string* why) {
  uintptr_t base = getauxval(AT_SYSINFO_EHDR);
  if (base == 0) {
    *why = "this process has no vDSO";
    return -1;
  }
  const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
    *why = "this process's vDSO is not an ELF image";
    return -1;
  }
  // The image ends with its section headers; its loaded segments are inside it too.
  uint64_t size = uint64_t(eh->e_shoff) + uint64_t(eh->e_shnum) * eh->e_shentsize;
  const auto* ph = reinterpret_cast<const ElfW(Phdr)*>(base + eh->e_phoff);
  for (int i = 0; i < eh->e_phnum; ++i)
    if (ph[i].p_type == PT_LOAD) size = std::max<uint64_t>(size, ph[i].p_offset + ph[i].p_filesz);
  int fd = memfd_create("sprofil-vdso", MFD_CLOEXEC);
  if (fd < 0) {
    *why = std::string("memfd_create: ") + std::strerror(errno);
    return -1;
  }
  const char* p = reinterpret_cast<const char*>(base);
  for (uint64_t done = 0; done < size;) {
    ssize_t n = ::write(fd, p + done, size - done);
    if (n <= 0) {
      *why = std::string("cannot copy the vDSO image: ") + std::strerror(errno);
      ::close(fd);
      return -1;
    }
    done += uint64_t(n);
  }
  return fd;
}

}  // namespace

std::string short_name(const std::string& name) {
  if (name.find_first_of("(<") == std::string::npos) return name;
  static const char kAnon[] = "(anonymous namespace)";
  std::string out;
  bool params_seen = false;
  size_t i = 0;
  auto skip_balanced = [&](size_t at) {
    int depth = 0;
    for (size_t k = at; k < name.size(); ++k) {
      char c = name[k];
      if (c == '(' || c == '<' || c == '[' || c == '{') ++depth;
      if (c == ')' || c == '>' || c == ']' || c == '}') --depth;
      if (depth == 0) return k + 1;
    }
    return name.size();
  };
  while (i < name.size()) {
    char c = name[i];
    if (name.compare(i, sizeof kAnon - 1, kAnon) == 0) {
      out += kAnon;
      i += sizeof kAnon - 1;
      continue;
    }
    if (c == '{') {  // {lambda(int)#1}: kept whole
      size_t e = skip_balanced(i);
      out.append(name, i, e - i);
      i = e;
      continue;
    }
    if (name.compare(i, 8, "operator") == 0 &&
        (i == 0 || name[i - 1] == ':' || name[i - 1] == ' ')) {
      size_t k = i + 8;
      if (name.compare(k, 2, "()") == 0) {
        k += 2;
      } else if (k < name.size() && name[k] == ' ') {  // operator new, operator bool
        ++k;
        while (k < name.size() &&
               (std::isalnum(static_cast<unsigned char>(name[k])) || name[k] == '_'))
          ++k;
        if (name.compare(k, 2, "[]") == 0) k += 2;
      } else {
        while (k < name.size() && std::strchr("<>=!+-*/%^&|~[],", name[k]) != nullptr) ++k;
      }
      out.append(name, i, k - i);
      i = k;
      continue;
    }
    if (c == '(' || c == '<') {
      if (c == '(') params_seen = true;
      i = skip_balanced(i);
      continue;
    }
    if (c == ' ') {
      if (params_seen) {
        // After the parameters: " const", " &", " [clone .cold]": keep only clone suffixes.
        size_t clone = name.find(" [clone ", i);
        if (clone != std::string::npos) out += name.substr(clone);
        break;
      }
      out.clear();  // a return type before the name
      ++i;
      continue;
    }
    out += c;
    ++i;
  }
  return out.empty() ? name : out;
}

std::string without_clone_suffix(const std::string& name) {
  static constexpr std::string_view kKinds[] = {"isra", "constprop", "part", "lto_priv", "cold"};
  auto is_kind = [](std::string_view k) {
    return std::find(std::begin(kKinds), std::end(kKinds), k) != std::end(kKinds);
  };
  std::string s = name;
  for (;;) {
    // " [clone .isra.0]": the demangler's, the last bracket of the name.
    const size_t clone = s.rfind(" [clone .");
    if (clone != std::string::npos && clone > 0 && s.find(']', clone) == s.size() - 1) {
      s.erase(clone);
      continue;
    }
    // ".constprop.0", ".cold": a C name's (a mangled one's would have been demangled above).
    const size_t dot = s.rfind('.');
    if (dot == std::string::npos || dot == 0) break;
    const std::string_view tail(s.data() + dot + 1, s.size() - dot - 1);
    size_t cut = std::string::npos;
    if (is_kind(tail)) {
      cut = dot;
    } else if (!tail.empty() && tail.find_first_not_of("0123456789") == std::string_view::npos) {
      const size_t kind = s.rfind('.', dot - 1);
      if (kind != std::string::npos && kind > 0 &&
          is_kind(std::string_view(s.data() + kind + 1, dot - kind - 1)))
        cut = kind;
    }
    if (cut == std::string::npos) break;
    s.erase(cut);
  }
  return s;
}

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
  std::vector<RawSym> entries;
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
    RawSym e;
    e.raw = name;
    e.start = addr;
    e.size = sym.st_size;
    e.rank = binding_rank(GELF_ST_BIND(sym.st_info));
    GElf_Shdr sh;
    Elf_Scn* scn = elf != nullptr && shndx < SHN_LORESERVE ? elf_getscn(elf, shndx) : nullptr;
    if (scn != nullptr && gelf_getshdr(scn, &sh) != nullptr && sh.sh_addr + bias <= addr)
      e.section_end = sh.sh_addr + bias + sh.sh_size;
    entries.push_back(std::move(e));
  }
  Dwarf_Addr main_bias = 0;
  Elf* main_elf = dwfl_module_getelf(mod_, &main_bias);
  plt_symbols(main_elf, main_bias, &entries);
  entry_symbol(main_elf, &entries);
  std::sort(entries.begin(), entries.end(), [](const RawSym& a, const RawSym& b) {
    if (a.start != b.start) return a.start < b.start;
    return better_name(a, b);
  });
  functions_.clear();
  std::vector<uint64_t> section_end;
  for (size_t i = 0; i < entries.size();) {
    size_t j = i;
    Symbol s;
    s.raw = entries[i].raw;
    s.start = entries[i].start;
    uint64_t size = 0, sec_end = 0;
    std::set<std::string> seen{without_default_version(s.raw)};
    for (; j < entries.size() && entries[j].start == s.start; ++j) {
      size = std::max(size, entries[j].size);
      sec_end = std::max(sec_end, entries[j].section_end);
      std::string alias = without_default_version(entries[j].raw);
      if (seen.insert(alias).second) s.aliases.push_back(demangle(alias));
    }
    s.end = s.start + size;
    functions_.push_back(std::move(s));
    section_end.push_back(sec_end);
    i = j;
  }
  for (size_t i = 0; i < functions_.size(); ++i) {
    Symbol& s = functions_[i];
    uint64_t next = i + 1 < functions_.size() ? functions_[i + 1].start : UINT64_MAX;
    if (s.end == s.start) {  // unsized: up to the next symbol or the end of its section
      s.end = next == UINT64_MAX ? s.start + 1 : next;
      if (section_end[i] > s.start) s.end = std::min(s.end, section_end[i]);
    }
    if (s.end > next) s.end = next;
    s.name = demangle(without_default_version(s.raw));
  }
  cfi_functions(mod_, main_elf, main_bias, &functions_);
}

namespace {
// A source file's name as a line table or a call site gives it, made absolute with the
// compilation unit's directory where it is relative (a program compiled as `gcc ../src/p.c`, or
// under ccache's CCACHE_BASEDIR), as addr2line and perf annotate resolve it: annotate then finds
// the file from any working directory, not only from the build's.
void make_absolute(std::string* file, const char* comp_dir) {
  if (file->empty() || (*file)[0] == '/' || comp_dir == nullptr || comp_dir[0] != '/') return;
  *file = (std::filesystem::path(comp_dir) / *file).lexically_normal().string();
}
}  // namespace

std::vector<Frame> Object::frames(uint64_t vaddr) const {
  std::vector<Frame> out;
  if (!ok_ || mod_ == nullptr) return out;  // (a perf map has no lines)
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
  Dwarf_Attribute comp_attr;
  const char* comp_dir =
      cu != nullptr ? dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &comp_attr)) : nullptr;
  make_absolute(&cur.file, comp_dir);
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
    f.raw = name != nullptr ? name : "";
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
      make_absolute(&cur.file, comp_dir);
    }
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) == 0) cur.line = int(v);
    if (dwarf_formudata(dwarf_attr(die, DW_AT_call_column, &attr), &v) == 0) cur.column = int(v);
  }
  std::free(scopes);
  if (out.empty() && (cur.line != 0 || !cur.file.empty())) out.push_back(cur);
  frame_cache_.emplace(vaddr, out);
  return out;
}

int Object::open_code(std::string* why) const {
  if (path_ == "[vdso]") {
    if (!ok_) {
      *why = !warning_.empty() ? warning_ : "[vdso]: not this kernel's vDSO";
      return -1;
    }
    return vdso_image_fd(why);
  }
  int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // never a FIFO or device
    if (fd >= 0) ::close(fd);
    *why = "cannot open " + path_ + " as a regular file";
    return -1;
  }
  return fd;
}

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

Object* Symbolizer::open(const std::string& path, const std::vector<uint8_t>& build_id) {
  std::string key = path + '\0' + hex(build_id);
  auto it = objects_.find(key);
  if (it != objects_.end()) return it->second.get();
  std::unique_ptr<Object> obj(new Object());
  obj->path_ = path;
  const bool vdso = path == "[vdso]";
  if (path.empty() || (path[0] == '[' && !vdso)) {
    return objects_.emplace(key, std::move(obj)).first->second.get();
  }
  if (is_perf_map_path(path)) {  // JIT code (SPROF_R_JIT): names from the JIT's perf map
    std::vector<PerfMapSymbol> syms;
    uint64_t skipped = 0;
    std::string why;
    if (!read_perf_map(path, &syms, &skipped, &why)) {
      obj->warning_ = path + ": " + why +
                      "; the JIT code's samples are reported as [unknown] (a JIT writes this "
                      "file when asked: node --perf-basic-prof, java "
                      "-XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit, "
                      "DOTNET_PerfMapEnabled=1)";
    } else {
      obj->ok_ = true;
      for (PerfMapSymbol& m : syms) {
        Symbol sym;
        sym.name = demangle(m.name);
        sym.raw = std::move(m.name);
        sym.start = m.start;
        sym.end = m.end;
        obj->functions_.push_back(std::move(sym));
      }
      if (skipped != 0)
        obj->warning_ = path + ": " + std::to_string(skipped) +
                        " lines that are not \"START SIZE NAME\" skipped";
    }
    if (!obj->warning_.empty()) warnings_.push_back(obj->warning_);
    return objects_.emplace(key, std::move(obj)).first->second.get();
  }

  // Candidates: the path itself (for the vDSO: this process's image), then by build-id: the
  // copy record kept in the build-id cache (profile/buildid_cache.hpp), the local debug file
  // (symbols and lines, no code, which is all we need) and debuginfod's executable.
  std::vector<std::string> candidates{path};
  std::string why;
  if (!build_id.empty() && !vdso) {
    if (std::string kept = profile::buildid_cache_file(build_id); !kept.empty())
      candidates.push_back(std::move(kept));
    std::string h = hex(build_id);
    candidates.push_back("/usr/lib/debug/.build-id/" + h.substr(0, 2) + "/" + h.substr(2) +
                         ".debug");
  }
  // A file at `path` of another build-id (the program rebuilt since the run) is the last resort:
  // the build-id's own files come first, where there are any.
  Dwfl* other_dwfl = nullptr;
  Dwfl_Module* other_mod = nullptr;
  for (size_t ci = 0; ci <= candidates.size() && obj->mod_ == nullptr; ++ci) {
    std::string file;
    int fd = -1;
    if (ci < candidates.size()) {
      file = candidates[ci];
      if (vdso) {
        fd = vdso_image_fd(&why);
        if (fd < 0) break;
      } else {
        // O_NONBLOCK and a regular-file check: a FIFO (or device) named as a region's path
        // must not hang the report.
        fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (fd >= 0 && (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
          ::close(fd);
          fd = -1;
          errno = EINVAL;
          if (ci == 0) why = "not a regular file";
          continue;
        }
      }
      if (fd < 0) {
        if (ci == 0) why = std::string(std::strerror(errno));
        continue;
      }
    } else {
      if (vdso) break;
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
    if (!vdso && !build_id.empty() && other_dwfl == nullptr) {
      const unsigned char* bits = nullptr;
      GElf_Addr vaddr = 0;
      const int len = dwfl_module_build_id(mod, &bits, &vaddr);
      if (len > 0 && std::vector<uint8_t>(bits, bits + len) != build_id) {
        other_dwfl = dwfl;
        other_mod = mod;
        continue;
      }
    }
    obj->dwfl_ = dwfl;
    obj->mod_ = mod;
  }
  if (obj->mod_ == nullptr && other_dwfl != nullptr) {
    obj->dwfl_ = other_dwfl;  // warned of below (build-id mismatch)
    obj->mod_ = other_mod;
  } else if (other_dwfl != nullptr) {
    dwfl_end(other_dwfl);
  }
  if (obj->mod_ == nullptr && vdso) {
    obj->warning_ = "[vdso]: cannot read this process's vDSO (" + why +
                    "); its samples are reported as [unknown]";
    warnings_.push_back(obj->warning_);
    return objects_.emplace(key, std::move(obj)).first->second.get();
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
  if (vdso) {
    // Another kernel's vDSO has other code at other addresses: unnamed rather than misnamed.
    std::vector<uint8_t> own =
        len > 0 ? std::vector<uint8_t>(bits, bits + len) : std::vector<uint8_t>();
    if (build_id.empty() || own != build_id) {
      obj->ok_ = false;
      if (build_id.empty()) {
        // Nothing to compare with: no names rather than perhaps wrong ones. Kept in
        // Object::warning() only (profiles from the agent always carry the vDSO's build-id).
        obj->warning_ =
            "[vdso]: the profile has no build-id for the vDSO; its samples are "
            "reported as [unknown]";
      } else {
        obj->warning_ = "[vdso]: the profile's vDSO (build-id " + hex(build_id) +
                        ") is not this kernel's (" + hex(own) +
                        "); its samples are reported as [unknown] (report on the machine and "
                        "kernel that recorded the profile)";
        warnings_.push_back(obj->warning_);
      }
      return objects_.emplace(key, std::move(obj)).first->second.get();
    }
  } else if (len > 0 && !build_id.empty()) {
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
    r.aliases = s->aliases;
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
