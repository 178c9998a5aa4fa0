// Live profiles (docs/live.md): the runtime's I/O service. One thread per process, started on
// request (osProfileInit, sprofil_live_serve, SPROFIL_LIVE=1 under the agent), serves
// snapshots of the current histograms as .sprof images on a Unix-domain socket in a per-user
// directory. libc and pthread only; nothing here runs in, or is waited for by, the signal
// handler.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "format/sprof_format.h"

namespace sprofil::live {

// Protocol (docs/live.md). Every integer little-endian.
constexpr uint32_t kVersion = 1;
constexpr char kRequestMagic[4] = {'S', 'P', 'L', 'Q'};
constexpr char kAnswerMagic[4] = {'S', 'P', 'L', 'A'};
enum Op : uint32_t { kOpSnapshot = 1, kOpPush = 2 };
enum Status : uint32_t {
  kOk = 0,
  kBadRequest = 1,
  kRefused = 2,
  kBadVersion = 3,
  kNoData = 4,
  kNoMemory = 5,
};
struct Message {  // a request or an answer: 24 bytes, then `length` bytes of payload
  char magic[4];
  uint32_t version;
  uint32_t op_or_status;
  uint32_t reserved;  // zero
  uint64_t length;    // request: 0 (snapshot) or the pushed image's size; answer: payload
};
static_assert(sizeof(Message) == 24, "protocol message");

// A .sprof v1 image under construction (malloc'd, zero-filled).
struct Image {
  uint8_t* data = nullptr;
  size_t size = 0;  // allocated = final size
  size_t used = 0;  // header + records appended so far
  uint32_t count = 0;
};
// Bytes one region record takes: its page and its counters padded to a page.
size_t record_bytes(uint64_t nbins, uint32_t width);
// Allocates `total` bytes (4096 + the records' record_bytes) and fills the header with the
// process's identity (pid, ppid, cmdline) and the given tallies. False on no memory.
bool image_begin(Image* im, size_t total, uint32_t clock, uint64_t tick_ns, uint64_t overflow,
                 uint64_t delivered, uint64_t lost);
// Appends a region [start, end) of nbins = ceil((end - start) / bin_size) counters of `width`
// bytes; returns where its counters go (zero-filled), or nullptr if it does not fit.
uint8_t* image_region(Image* im, uint64_t start, uint64_t end, uint32_t bin_size, uint32_t width);
// Completes the header (region_count, regions_end) and names each region's object (path,
// build-id, load bias, file offset) from the loaded objects. Call it without holding locks
// that a dlopen'ing thread could wait for.
void image_finish(Image* im);
void image_free(Image* im);

// A snapshot source: fills *out (image_begin ... image_finish) with one consistent snapshot,
// or returns false (nothing to serve yet). Called on the I/O thread.
using Source = bool (*)(void* ctx, Image* out);

// Serves one accepted connection `fd` of the protocol above from `source` (the peer's uid
// checked, the request read and answered, each step bounded in time); does not close fd. The
// service's own, and `sprofil record`'s for the processes it samples from outside.
void serve_connection(int fd, Source source, void* ctx);

// Starts the I/O service (once per process; again in a forked child) serving `source`
// (replacing the previous source). Returns 0 or an errno value.
int start(Source source, void* ctx);
// Around a system call that the kernel allows a process of one thread only (unshare, setns:
// src/clock/alone.cpp): pause() ends the I/O thread (its socket removed; false if none runs in
// this process), resume() starts it again if there is a source to serve.
bool pause();
void resume();
// Stops serving `source` if it is the current one (the thread stays; requests get kNoData).
void forget(Source source, void* ctx);
// Ends the service for good in this process and its future children, before the program
// installs a seccomp filter (src/clock/sandbox.cpp): the socket removed, its thread ended,
// nothing started again in a forked child, no unlink at exit (each a system call the filter
// may deny).
void retire();

// The per-user directory (created 0700 if missing; refused unless it is a real directory of
// ours with no group/other access). Writes its path to buf; false with errno on failure.
bool user_dir(char* buf, size_t n);
// The gperf server's socket: SPROFIL_GPERF_SOCKET, else <user_dir>/gperf.sock.
bool gperf_socket(char* buf, size_t n);
// Pushes an image to the gperf server without ever blocking for long: a non-blocking connect
// (no server: fails at once), then at most `timeout_ms` to send it. MSG_NOSIGNAL: never
// SIGPIPE. Returns 0 or an errno value (ECONNREFUSED/ENOENT: no server).
int push(const Image& im, int timeout_ms);

}  // namespace sprofil::live

// Called by sprofil_destroy (src/api/api.cpp): the live service forgets the session.
extern "C" void sprofil_live_session_gone(struct sprofil_session* s);
