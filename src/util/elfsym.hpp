// Finds the function symbol that contains an address of this process, from the object's
// full symbol table (.symtab) when it has one, else its dynamic symbols. Used by the modern
// API to profile "a function" without requiring it to be exported. libc only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sprofil::util {

struct FunctionExtent {
  uintptr_t lo = 0, hi = 0;  // runtime addresses [lo, hi)
  char name[256] = {};
};

// True if addr lies inside a sized STT_FUNC symbol of a loaded object.
bool function_extent(const void* addr, FunctionExtent* out);

}  // namespace sprofil::util
