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

struct Dwfl;
struct Dwfl_Module;

namespace sprofil::symbolize {

// Demangles an Itanium C++ name (abi::__cxa_demangle); returns `name` unchanged otherwise.
std::string demangle(const std::string& name);

// An ELF function symbol. start/end are link-time addresses; [start, end) is the extent used
// for attribution (the symbol's size, clipped at the next symbol).
struct Symbol {
  std::string name;  // demangled
  std::string raw;   // as in the symbol table
  uint64_t start = 0, end = 0;
  uint64_t size() const { return end - start; }
};

// One source frame; a chain lists the innermost (inlined) frame first, the out-of-line
// function last.
struct Frame {
  std::string function;  // demangled name from DWARF; may be empty
  std::string file;      // source file path as recorded in DWARF; empty if unknown
  int line = 0;
  int column = 0;
};

class Object {
 public:
  ~Object();
  Object(const Object&) = delete;
  Object& operator=(const Object&) = delete;

  const std::string& path() const { return path_; }
  // False for "[vdso]" and files that could not be opened: every address is "[unknown]".
  bool ok() const { return ok_; }
  // Why the object could not be opened, or a build-id mismatch; empty otherwise.
  const std::string& warning() const { return warning_; }
  // The function symbols sorted by start; extents do not overlap.
  const std::vector<Symbol>& functions() const { return functions_; }
  // The function whose extent contains `vaddr`, or nullptr.
  const Symbol* function_at(uint64_t vaddr) const;
  // Source frames at `vaddr`, innermost first (empty if there is no line information).
  std::vector<Frame> frames(uint64_t vaddr) const;

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
  uint64_t symbol_start = 0, symbol_size = 0;  // runtime addresses
  std::string file;                            // innermost frame's source file
  int line = 0;
  std::vector<Frame> inlined;  // innermost first; the last is the out-of-line function
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Symbolizer(const Symbolizer&) = delete;
  Symbolizer& operator=(const Symbolizer&) = delete;

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

std::string hex(const std::vector<uint8_t>& bytes);

}  // namespace sprofil::symbolize
