// The agent's live source. Under `sprofil record --live` (SPROFIL_LIVE=1 with SPROFIL_OUTPUT)
// the agent's own .sprof file IS the snapshot: its counters and tallies are updated in place
// through a shared mapping, and region records are committed before region_count is raised
// (src/format/sprof_format.h). This source reads that file; live_agent_start() starts the
// service for it (called from this library's constructor, so src/agent needs no change).
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "clock/runtime.hpp"
#include "format/profile_name.hpp"
#include "live/live.hpp"

using namespace sprofil;

namespace {

char g_base[PATH_MAX];  // SPROFIL_OUTPUT made absolute

bool read_file(const char* path, live::Image* out) {
  const int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return false;
  sprof_header h;
  struct stat st;
  bool ok = pread(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h) &&
            memcmp(h.magic, SPROF_MAGIC, sizeof h.magic) == 0 && h.pid == getpid() &&
            fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && h.regions_end <= uint64_t(st.st_size);
  // Only up to regions_end as read in the header: later records are not committed in it.
  const size_t size =
      ok ? static_cast<size_t>(h.regions_end < SPROF_PAGE ? SPROF_PAGE : h.regions_end) : 0;
  if (ok) ok = live::image_begin(out, size, 0, 0, 0, 0, 0);
  size_t got = 0;
  while (ok && got < size) {
    const ssize_t n = pread(fd, out->data + got, size - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  if (ok && got == size) {
    memcpy(out->data, &h, sizeof h);  // the header as read first (region_count matches)
    out->used = size;
    return true;
  }
  if (ok) live::image_free(out);
  return false;
}

// This process's file: SPROFIL_OUTPUT for the first image, SPROFIL_OUTPUT.PID for a forked
// child, .PID.N for a later exec'd image (docs/agent.md); the last whose header names us.
bool agent_source(void*, live::Image* out) {
  char path[PATH_MAX + 32];
  bool have = false;
  live::Image cand;
  // The candidates in the order the agent makes them (format/profile_name.hpp): FILE,
  // FILE.PID, then FILE.PID.1, .2, ... up to the first that does not exist.
  const int pid = static_cast<int>(getpid());
  for (int i = 0; i <= naming::kMaxNameTries; ++i) {
    const int k = i == 0 ? 0 : i - 1;
    if (!naming::profile_name(path, sizeof path, g_base, i == 0 ? 0 : pid, k)) break;
    if (access(path, F_OK) != 0) {
      if (k >= 1) break;
      continue;
    }
    if (read_file(path, &cand)) {
      if (have) live::image_free(out);
      *out = cand;
      have = true;
    }
  }
  return have;
}

__attribute__((constructor)) void live_agent_start() {
  const char* live = secure_getenv("SPROFIL_LIVE");
  const char* output = secure_getenv("SPROFIL_OUTPUT");
  if (!live || strcmp(live, "1") != 0 || !output || !*output) return;
  if (!naming::absolute_base(output, g_base, sizeof g_base)) return;
  // Its hooks: a seccomp filter (src/clock/sandbox.cpp), a call for one thread (alone.cpp).
  if (live::start(agent_source, nullptr) == 0)
    rt::add_process_hooks(
        {.sandboxed = live::retire, .pause = live::pause, .resume = live::resume});
}

}  // namespace
