// Growing a malloc'd array of plain values, the runtime's one way of doing it (it has no
// libstdc++ containers): capacity doubles from `first` until `need` elements fit. Header only;
// libc only.
#pragma once

#include <stdlib.h>

#include <type_traits>

namespace sprofil::util {

// Makes room for `need` elements in *array (capacity *cap): true when they fit; false, with
// *array and *cap unchanged, when realloc fails.
template <class T, class N>
bool grow(T** array, N* cap, size_t need, size_t first = 32) {
  static_assert(std::is_trivially_copyable_v<T>, "realloc moves the elements bytewise");
  if (need <= static_cast<size_t>(*cap)) return true;
  size_t c = *cap > 0 ? static_cast<size_t>(*cap) * 2 : first;
  while (c < need) c *= 2;
  auto* p = static_cast<T*>(realloc(*array, c * sizeof(T)));
  if (!p) return false;
  *array = p;
  *cap = static_cast<N>(c);
  return true;
}

}  // namespace sprofil::util
