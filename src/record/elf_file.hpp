// What record reads of a mapped file, once per file: its executable segments (the program
// headers) and its GNU build-id. Read by record rather than by the kernel (attr.build_id makes
// every mmap record parse the file's notes in the program's time). Record's default
// (agentless_state.hpp) places each mapping's samples with them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sprofil::record {

struct Segment {
  uint64_t vaddr = 0, offset = 0, memsz = 0;
};
struct ElfFile {
  bool read = false;
  uint64_t entry = 0;  // e_entry: where an exec'd program starts
  std::vector<Segment> text;
  std::vector<uint8_t> build_id;
  // The executable segment that a mapping at file offset pgoff, len bytes long, holds.
  const Segment* holding(uint64_t pgoff, uint64_t len) const {
    for (const Segment& s : text)
      if (s.offset >= pgoff && s.offset < pgoff + len) return &s;
    return nullptr;
  }
};

// The file at path, if it is the one mapped (inode ino; 0: not checked).
ElfFile read_elf(const std::string& path, uint64_t ino);

// The vDSO's build-id: record's own, the kernel's one image in every process (a special
// mapping's record carries none; the report names its functions only with it).
std::vector<uint8_t> vdso_build_id();

}  // namespace sprofil::record
