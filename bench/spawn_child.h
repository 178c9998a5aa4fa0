// What bench/spawn_cpu.c and bench/spawn_serve.c share: how they start CMD (stdout to
// /dev/null) and how they read a child's CPU time from wait4's rusage.
#pragma once
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>

// File actions for posix_spawn: CMD's stdout to /dev/null.
static void spawn_to_null(posix_spawn_file_actions_t* fa) {
  posix_spawn_file_actions_init(fa);
  posix_spawn_file_actions_addopen(fa, 1, "/dev/null", O_WRONLY, 0);
}

// A child's user + system time, in microseconds.
static long child_cpu_us(const struct rusage* ru) {
  return (ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1000000L + ru->ru_utime.tv_usec +
         ru->ru_stime.tv_usec;
}
