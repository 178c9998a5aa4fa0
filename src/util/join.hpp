// Bounded string building without stdio, for the agent's start: every process image runs it,
// and snprintf's formatting code is pages of libc that a program which does not format with
// stdio itself never touches (two to three page faults a process, docs/benchmarks.md, "After
// 6515f65"). Header-only, libc only.
#pragma once

#include <cstddef>

namespace sprofil::util {

// Appends to out[0, n) and keeps it NUL-terminated; ok() is false once something did not fit
// (what fitted is kept, cut short).
class Join {
 public:
  Join(char* out, size_t n) : out_(out), n_(n) {
    if (n_) out_[0] = '\0';
    ok_ = n_ > 0;
  }
  Join& add(const char* s) {
    for (; *s && ok_; ++s) {
      if (len_ + 1 >= n_) {
        ok_ = false;
        break;
      }
      out_[len_++] = *s;
    }
    if (n_) out_[len_] = '\0';
    return *this;
  }
  Join& add(long v) {  // decimal
    char digits[24];
    char* p = digits + sizeof digits;
    *--p = '\0';
    const bool neg = v < 0;
    unsigned long u = neg ? 0ul - static_cast<unsigned long>(v) : static_cast<unsigned long>(v);
    do *--p = static_cast<char>('0' + u % 10);
    while (u /= 10);
    if (neg) *--p = '-';
    return add(p);
  }
  bool ok() const { return ok_; }

 private:
  char* out_;
  size_t n_;
  size_t len_ = 0;
  bool ok_;
};

}  // namespace sprofil::util
