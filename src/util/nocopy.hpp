// A base for the classes that own something a copy would release twice (a held mutex, a saved
// signal mask, counters' memory, an open object, a thread): neither copyable nor movable.
// Header only; runtime code may use it.
#pragma once

namespace sprofil::util {

class NoCopy {
 public:
  NoCopy(const NoCopy&) = delete;
  NoCopy& operator=(const NoCopy&) = delete;

 protected:
  constexpr NoCopy() = default;
  ~NoCopy() = default;
};

}  // namespace sprofil::util
