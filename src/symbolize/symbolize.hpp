// Symbolization of runtime addresses in profiled objects: ELF function symbols (demangled),
// source file:line and inline chains, through elfutils libdwfl in offline mode. Separate debug
// files are found by build-id (/usr/lib/debug/.build-id/...) or .gnu_debuglink, and through
// debuginfod when DEBUGINFOD_URLS is set. Objects are opened once and cached.
//
// Addresses: an Object works in the ELF's link-time addresses ("vaddr" = runtime - load_bias);
// Symbolizer::resolve takes runtime addresses and a load bias.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
#include "profile/buildid_cache.hpp"
#include "util/nocopy.hpp"

struct Dwfl;
struct Dwfl_Module;

namespace sprofil::symbolize {

// Demangles an Itanium C++ name (abi::__cxa_demangle); returns `name` unchanged otherwise.
std::string demangle(const std::string& name);

// An ELF function symbol. start/end are link-time addresses; [start, end) is the extent used
// for attribution (the symbol's size, clipped at the next symbol; an unsized symbol ends at the
// next symbol or the end of its section). Of several symbols at one address the public name is
// chosen, as perf does: sized over unsized, global over weak over local, (unlike perf) the
// current symbol version over a compatibility one (free, not cfree@GLIBC_2.2.5), fewer leading
// underscores, then the longer name (malloc, not __libc_malloc); the others are `aliases`. A
// default version suffix is not part of `name` (clock_gettime, not clock_gettime@@GLIBC_2.17).
// PLT entries get synthetic symbols named `callee@plt` from their relocations.
struct Symbol {
  std::string name;  // demangled
  std::string raw;   // as in the symbol table
  uint64_t start = 0, end = 0;
  std::vector<std::string> aliases;  // the other names at `start`, demangled
  uint64_t size() const { return end - start; }
};

// One source frame; a chain lists the innermost (inlined) frame first, the out-of-line
// function last.
struct Frame {
  std::string function;  // demangled name from DWARF; may be empty
  std::string raw;       // the name as DWARF spells it: the linkage (mangled) name where it has one
  std::string file;      // source file path as recorded in DWARF; empty if unknown
  int line = 0;
  int column = 0;
};

class Object : util::NoCopy {
 public:
  ~Object();

  const std::string& path() const { return path_; }
  // False for files that could not be opened (and a "[vdso]" that is not this kernel's): every
  // address is "[unknown]". A "[vdso]" region is read from this process's own vDSO image
  // (getauxval(AT_SYSINFO_EHDR)) when its build-id matches the profile's. A perf map's path
  // (/tmp/perf-PID.map: a JIT region's, SPROF_R_JIT) gives the JIT's function names at their
  // runtime addresses and no lines (perf_map.hpp).
  bool ok() const { return ok_; }
  // Why the object could not be opened, or a build-id mismatch; empty otherwise.
  const std::string& warning() const { return warning_; }
  // The function symbols sorted by start; extents do not overlap.
  const std::vector<Symbol>& functions() const { return functions_; }
  // The function whose extent contains `vaddr`, or nullptr.
  const Symbol* function_at(uint64_t vaddr) const;
  // Source frames at `vaddr`, innermost first (empty if there is no line information).
  std::vector<Frame> frames(uint64_t vaddr) const;
  // A descriptor of the file that holds the object's code, for its bytes (the caller closes
  // it): for "[vdso]", this process's vDSO image, the one its names come from, and only when
  // ok() (the profile's vDSO build-id is this kernel's); else the file at path(), when it is a
  // regular file (never a FIFO or a device). -1 with *why set.
  int open_code(std::string* why) const;

 private:
  friend class Symbolizer;
  Object() = default;
  void load_symbols();
  std::string path_;
  bool ok_ = false;
  std::string warning_;
  std::vector<Symbol> functions_;
  ::Dwfl* dwfl_ = nullptr;
  ::Dwfl_Module* mod_ = nullptr;
  mutable std::map<uint64_t, std::vector<Frame>> frame_cache_;
};

// The result of resolving one runtime address.
struct Resolved {
  bool known = false;                          // a function symbol covers the address
  std::string function;                        // demangled ELF symbol name, or "[unknown]"
  std::string raw_function;                    // symbol name as in the ELF symbol table
  std::vector<std::string> aliases;            // other names of the function (Symbol::aliases)
  uint64_t symbol_start = 0, symbol_size = 0;  // runtime addresses
  std::string file;                            // innermost frame's source file
  int line = 0;
  std::vector<Frame> inlined;  // innermost first; the last is the out-of-line function
};

class Symbolizer : util::NoCopy {
 public:
  Symbolizer();
  ~Symbolizer();

  // Opens (once) the object at `path`. Never null: an object that cannot be opened is returned
  // with ok() == false and a warning. When both the file and `build_id` have a build-id and they
  // differ, a warning is recorded and the file is used anyway.
  Object* open(const std::string& path, const std::vector<uint8_t>& build_id);

  // Convenience: resolves a runtime address in an object loaded with `load_bias`.
  Resolved resolve(const std::string& path, const std::vector<uint8_t>& build_id,
                   uint64_t load_bias, uint64_t runtime_address);

  // Warnings gathered so far (each once), and clears them.
  std::vector<std::string> take_warnings();

 private:
  std::map<std::string, std::unique_ptr<Object>> objects_;
  std::vector<std::string> warnings_;
};

using profile::hex;  // a build-id in hex

// A demangled C++ name without parameter lists, template arguments, return type and cv/ref
// qualifiers, as pprof shortens them: "long ns::f<int>(int const*) const" -> "ns::f". Names that
// are not C++ are returned unchanged; "(anonymous namespace)", lambdas and operators are kept.
std::string short_name(const std::string& name);

// A name without the suffixes GCC gives a function's clones and split-off parts, every one of
// them: the demangler's " [clone .isra.0]" (any " [clone .KIND...]"), and in a name that is not
// mangled (C) ".isra.N", ".constprop.N", ".part.N", ".lto_priv.N" and ".cold" (".cold.N"):
// "f(int) [clone .constprop.0] [clone .isra.0]" -> "f(int)", "spin.constprop.0" -> "spin",
// "std::__introsort_loop [clone .isra.0]" (a short name) -> "std::__introsort_loop". Other
// names are returned unchanged.
std::string without_clone_suffix(const std::string& name);

}  // namespace sprofil::symbolize
