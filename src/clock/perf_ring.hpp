// Reading a perf ring buffer (the meta page, then 2^n data pages that the kernel fills with
// records): one loop for the agent's ring mode (perf.cpp, in the profiled program: header
// only, no allocation, libc only), record's drain mode (record/drain_rings.cpp) and record's
// default (record/agentless.cpp).
#pragma once

#include <linux/perf_event.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sprofil::rt::perf {

constexpr size_t kRingPage = 4096;

// Maps event fd's ring read-write (the reader moves the tail): the meta page and up to
// `data_pages` data pages (a power of two), half as many each time the locked-memory allowance
// (perf_event_mlock_kb per user, RLIMIT_MEMLOCK) refuses them, down to one. Its size in *bytes;
// MAP_FAILED where not even one data page could be mapped.
inline void* map_ring(int fd, size_t data_pages, size_t* bytes) {
  for (; data_pages >= 1; data_pages /= 2) {
    *bytes = (data_pages + 1) * kRingPage;
    void* p = mmap(nullptr, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) return p;
  }
  *bytes = 0;
  return MAP_FAILED;
}

// The data pages of a mapped ring, read at offsets that grow without wrapping (data_head's and
// data_tail's): a record may wrap at the end of the pages.
struct RingData {
  const unsigned char* data = nullptr;
  uint64_t size = 0;

  // Copies n bytes at ring offset `at`.
  void copy(uint64_t at, void* dst, size_t n) const {
    const size_t o = static_cast<size_t>(at % size);
    const size_t first = n < size - o ? n : static_cast<size_t>(size - o);
    memcpy(dst, data + o, first);
    if (first < n) memcpy(static_cast<unsigned char*>(dst) + first, data, n - first);
  }
  // The first n bytes of the body of the record at `at` whose header is h, zero past its end.
  void body(uint64_t at, const perf_event_header& h, void* dst, size_t n) const {
    const size_t have = h.size > sizeof h ? h.size - sizeof h : 0;
    memset(dst, 0, n);
    copy(at + sizeof h, dst, n < have ? n : have);
  }
};

// The data pages of the ring mapped at `base` with `data_bytes` bytes of them (kernels before
// 4.1 leave the meta page's data_offset and data_size 0).
inline RingData ring_data(void* base, uint64_t data_bytes) {
  const auto* meta = static_cast<const perf_event_mmap_page*>(base);
  const uint64_t off = meta->data_offset ? meta->data_offset : kRingPage;
  return RingData{static_cast<const unsigned char*>(base) + off,
                  meta->data_size ? meta->data_size : data_bytes};
}

// The bytes the ring mapped at `base` has free for the kernel's next records: a record that
// does not fit is dropped, and counted, and told (PERF_RECORD_LOST) only with the ring's next
// record that fits.
inline uint64_t ring_room(void* base, uint64_t data_bytes) {
  const auto* meta = static_cast<const perf_event_mmap_page*>(base);
  const uint64_t used = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE) - meta->data_tail;
  const uint64_t size = ring_data(base, data_bytes).size;
  return used < size ? size - used : 0;
}

// Calls f(header, ring data, the record's offset) for each complete record from the ring's
// tail to its head, then frees them (the tail moves past them). A header that cannot be one
// (shorter than itself, or past the head) ends the reading there.
template <class F>
void read_records(void* base, uint64_t data_bytes, F&& f) {
  auto* meta = static_cast<perf_event_mmap_page*>(base);
  const RingData d = ring_data(base, data_bytes);
  const uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = meta->data_tail;
  while (tail < head) {
    perf_event_header h;
    d.copy(tail, &h, sizeof h);
    if (h.size < sizeof h || tail + h.size > head) break;
    f(static_cast<const perf_event_header&>(h), d, tail);
    tail += h.size;
  }
  __atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
}

}  // namespace sprofil::rt::perf
