// The sampling engine: regions of text, their counter arrays, and the lookup that turns a
// program counter into one counter increment. The engine makes no system call of its own; its
// only library calls are malloc (alloc_regions, Table::create) and free (Table::destroy, also
// reached from exchange() and ~Engine through free_retired()), which may enter the kernel
// (brk, mmap, munmap). None of them is on the signal path. Everything here is testable with
// synthetic pcs.
//
// Signal-safety contract (audited in engine.cpp): Engine::sample() and everything it calls
// run inside the profiling signal handler. They use only plain loads of immutable Table
// memory, std::atomic / std::atomic_ref operations on counters and tallies, and an
// initial-exec TLS hint. No allocation, locks, errno changes or library calls.
//
// Tables are immutable once published. A face, the API or the agent builds a new Table,
// publishes it with Engine::exchange() (a seq_cst store), and destroys the old one only after
// no handler still reads it (a per-channel reader count, see Engine::exchange). exchange()
// never sleeps or gives up the CPU: it reads the channel's reader count at most kSpin times,
// with a CPU pause hint between reads. If it sees the count at zero, it frees the channel's
// retired tables (free(), which may take malloc's lock or unmap memory) and hands the old
// table back; otherwise it retires the old table and returns null. A retired table is freed
// by a later exchange() on its channel that sees no reader, or by ~Engine; the number of
// retired tables is not bounded (Stats::leaked counts those past kRetiredMax).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include "util/nocopy.hpp"

namespace sprofil::engine {

// What an increment does when the counter would pass its limit.
enum class Policy : uint8_t {
  kSaturate,  // stay at the limit (HP-UX, AIX, Tru64, modern API)
  kWrap,      // wrap modulo 2^width (BSD, Nintendo 64 16-bit counters)
  kStopAll,   // stay at the limit and stop the whole table (System V at 32767)
};

// pc -> element index: ((((pc - base) >> pre_shift) * scale) >> 16) >> post_shift.
// Every seed's formula is one instance: HP-UX/Tru64/AIX/System V compute a byte offset
// ((pc - off) * scale) >> 16 and divide by the element width (post_shift = log2 width); BSD
// halves first (pre_shift = 1); scale 0 maps every pc to element 0.
struct BinMap {
  uintptr_t base = 0;
  uint64_t scale = 65536;
  uint8_t pre_shift = 0;
  uint8_t post_shift = 0;

  uint64_t index(uintptr_t pc) const { return static_cast<uint64_t>(wide_index(pc)); }

  // The index before truncation to 64 bits: monotonic in pc (from base up), so checking a
  // range's two ends against the counter array checks every pc between them.
  __extension__ unsigned __int128 wide_index(uintptr_t pc) const {
    __extension__ using u128 = unsigned __int128;
    const u128 d = static_cast<u128>((pc - base) >> pre_shift);
    return ((d * scale) >> 16) >> post_shift;
  }
};

// A counter array and how it counts.
struct Counters {
  void* base = nullptr;  // aligned to width
  uint64_t nelems = 0;
  uint8_t width = 4;  // 2, 4 or 8 bytes
  Policy policy = Policy::kSaturate;
  uint64_t limit = 0;  // saturation value; 0 means the width's maximum
};

// A text range [lo, last] (inclusive, so the top of the address space is expressible) that
// maps through `map` into `counters`. Invariant, checked by Table::create: every pc in the
// range maps to an index below counters.nelems.
struct Region {
  uintptr_t lo = 0;
  uintptr_t last = 0;
  BinMap map;
  Counters counters;
  // Optional: a second array laid out like counters (same width, element count and
  // alignment) that takes the system part of each sample (see Engine::sample). It saturates
  // at the width's maximum and never exceeds what counters took at the same index.
  void* system = nullptr;
};

// Running tallies of one table, weighted by samples. The agent points a table's tallies at
// its profile file's header, whose fields overflow, delivered, lost have this order.
struct Tallies {
  uint64_t overflow = 0;   // fell in no region (counted in the overflow bin if there is one)
  uint64_t delivered = 0;  // every sample offered to the table
  uint64_t lost = 0;       // not added: counter at its limit, or the table stopped
};

// Result codes of the engine's validation (the faces map them to their own errno).
// What Table::build rejects; error_name (engine.cpp's table, one message each) says what each
// means. kOverlap stays last.
enum class Error : uint8_t {
  kOk = 0,
  kNoMemory,
  kBadWidth,
  kMisaligned,
  kEmptyRange,  // last < lo, or no counters
  kIndexOutside,
  kUnsorted,
  kOverlap,
};
const char* error_name(Error e);

// Room for n regions (at least one), each default-constructed: no system array until the
// caller sets one. Memory from malloc() holds whatever was there before, and a garbage
// `system` pointer is written through by the first sample with a kernel part. free() it.
Region* alloc_regions(size_t n);

class Table {
 public:
  // Builds a table from regions sorted ascending by lo and not overlapping. `overflow`, if
  // given, is a one-element counter for pcs in no region. `tallies`, if given, is external
  // storage for the tallies (it must outlive the table); otherwise the table keeps its own.
  static Error create(const Region* regions, size_t n, const Counters* overflow, Tallies* tallies,
                      Table** out);
  static void destroy(Table* t);

  // Counts one sample of weight w at pc, of which system_w (<= w) was spent in the kernel.
  // Signal-safe. `hint` is the caller's last-hit cache.
  void record(uintptr_t pc, uint64_t w, uint64_t system_w, uint64_t* hint);
  void record(uintptr_t pc, uint64_t w, uint64_t* hint) { record(pc, w, 0, hint); }

  // Counts w samples as delivered but lost. Signal-safe.
  void record_lost(uint64_t w);

  // The region holding pc, or nullptr. Signal-safe. Uses and updates *hint.
  const Region* find(uintptr_t pc, uint64_t* hint) const;

  size_t size() const { return n_; }
  const Region& region(size_t i) const { return regions_[i]; }
  bool stopped() const { return stopped_.load(std::memory_order_relaxed) != 0; }
  const Tallies& tallies() const { return *tallies_; }
  uint32_t generation() const { return generation_; }
  // Whether some region has a system-time array.
  bool has_system() const { return has_system_; }

 private:
  friend class Engine;
  Table() = default;
  Table* retired_next_ = nullptr;  // Engine's list of retired tables of one channel
  size_t n_ = 0;
  uint32_t generation_ = 0;
  bool has_overflow_ = false;
  bool has_system_ = false;
  std::atomic<uint32_t> stopped_{0};
  Counters overflow_;
  Tallies own_tallies_;
  Tallies* tallies_ = nullptr;
  uintptr_t* los_ = nullptr;  // regions_[i].lo, packed for the binary search
  Region* regions_ = nullptr;
};

// Adds w to element `index` of `c` with c's policy. Returns the weight actually added and
// sets *at_limit when the counter is now at its limit. Signal-safe.
uint64_t bump(const Counters& c, uint64_t index, uint64_t w, bool* at_limit);

// Reads element `index` of `c` (an atomic load of c's width, relaxed), widened to 64 bits:
// what readers of live counters (snapshots) use while handlers bump them. Signal-safe.
uint64_t load(const Counters& c, uint64_t index);

// Independent users of the engine each own one channel; a sample is offered to every
// channel that has a table.
enum Channel : unsigned { kFaceChannel = 0, kApiChannel = 1, kAgentChannel = 2, kChannels = 3 };

class Engine : util::NoCopy {
 public:
  // Offers one sample of weight w to every channel; system_w of it (<= w) was spent in the
  // kernel before the thread returned to user space at pc. Signal-safe.
  void sample(uintptr_t pc, uint64_t w, uint64_t system_w = 0);

  // Records w samples that were taken but whose pc is unknown (the kernel dropped them).
  void lost(uint64_t w);

  // Publishes `next` (may be null) on channel ch. Returns the previous table if no handler
  // can still be reading it (the caller then owns it and destroys it), else null: the previous
  // table is retired and freed by the engine later. Not signal-safe; callers serialise per
  // channel.
  Table* exchange(Channel ch, Table* next);

  Table* current(Channel ch) const { return tables_[ch].load(std::memory_order_acquire); }
  bool any() const;
  // Whether a published table takes system parts: the clocks that pay a system call per sample
  // for the system part (getrusage) ask first. Signal-safe.
  bool wants_system() const { return system_channels_.load(std::memory_order_relaxed) != 0; }

  // What exchange() did so far, for tests and diagnostics: its calls; the tables it could not
  // hand back because a handler still read them (retired: freed by a later exchange() on the
  // channel that finds no reader, or by ~Engine; the process-wide engine is never destroyed);
  // and, of those, the ones retired while kRetiredMax or more others were already held on
  // their channel ("leaked": kept past the bound, and still freed the same way).
  struct Stats {
    uint64_t exchanges = 0;
    uint64_t retired = 0;
    uint64_t leaked = 0;
  };
  Stats stats() const;

  // How long exchange() spins for readers to leave (pause instructions) before retiring.
  static constexpr int kSpin = 4096;
  // Retired tables held per channel from which retiring one more counts in Stats::leaked.
  static constexpr int kRetiredMax = 16;

  constexpr Engine() = default;
  ~Engine();

 private:
  template <class F>
  void for_each_table(F f);

  std::atomic<Table*> tables_[kChannels] = {};
  std::atomic<uint32_t> system_channels_{0};  // bit ch: tables_[ch] has_system()
  std::atomic<uint32_t> readers_[kChannels] = {};
  // Retired tables, per channel, linked through Table::retired_next_: touched only by
  // exchange() (callers serialise per channel) and the destructor.
  Table* retired_[kChannels] = {};
  int nretired_[kChannels] = {};
  void free_retired(Channel ch);
  std::atomic<uint64_t> exchanges_{0}, retired_count_{0}, leaked_{0};
};

// The process-wide engine used by the clocks, faces, API and agent.
Engine& global();

}  // namespace sprofil::engine
