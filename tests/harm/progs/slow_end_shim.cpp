// Preloaded into `sprofil record` by NoHarm.ProgramStartingAsTheRunEndsPrintsNothing (the
// command inherits it): holds record's end and a background job's agent at the points of a race
// that a loaded machine hit once in a few hundred runs, so that the test takes that path every
// time.
// - In the process named "sprofil" (record): the first opendir() of a directory whose name has
//   ".sprofil-" in it (record reading the run's directory at its end) waits 1.5 s first, and an
//   rmdir() of such a directory waits 1 s first.
// - In a process with SLOW_END_JOB in its environment (the job's program): a rename of a file
//   being made (".sprofil-tmp-...", the agent publishing its profile file) waits until that file
//   is gone, at most 5 s, then goes on (and fails).
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

namespace {

void wait_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

bool in_record(const char* path) {
  return strstr(path, ".sprofil-") && !strstr(path, ".sprofil-tmp-") &&
         strcmp(program_invocation_short_name, "sprofil") == 0;
}

void until_gone(int dirfd, const char* name) {
  if (!getenv("SLOW_END_JOB") || strncmp(name, ".sprofil-tmp-", 13) != 0) return;
  for (int i = 0; i < 500 && faccessat(dirfd, name, F_OK, 0) == 0; ++i) wait_ms(10);
}

template <typename F>
F real(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" DIR* opendir(const char* path) {
  static auto next = real<DIR* (*)(const char*)>("opendir");
  static bool waited = false;
  if (!waited && in_record(path)) {
    waited = true;
    wait_ms(1500);
  }
  return next(path);
}

extern "C" int rmdir(const char* path) {
  static auto next = real<int (*)(const char*)>("rmdir");
  if (in_record(path)) wait_ms(1000);
  return next(path);
}

extern "C" int renameat(int from_dir, const char* from, int to_dir, const char* to) {
  static auto next = real<int (*)(int, const char*, int, const char*)>("renameat");
  until_gone(from_dir, from);
  return next(from_dir, from, to_dir, to);
}

extern "C" int renameat2(int from_dir, const char* from, int to_dir, const char* to,
                         unsigned flags) {
  static auto next = real<int (*)(int, const char*, int, const char*, unsigned)>("renameat2");
  until_gone(from_dir, from);
  return next(from_dir, from, to_dir, to, flags);
}
