// Locks its memory as a real-time program does (mlockall(MCL_CURRENT | MCL_FUTURE)), loads a
// library (argv[1]) and touches 1 MiB of heap, and prints how much of its memory is locked
// (VmLck, kB) after the lock and after the load. Exit status 3 if the lock fails, 4 if the
// load does.
#include <dlfcn.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

static long locked_kb() {
  FILE* f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmLck:", 6) == 0) kb = atol(line + 6);
  fclose(f);
  return kb;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) return 3;
  const long at_lock = locked_kb();
  if (!dlopen(argv[1], RTLD_NOW)) return 4;
  void* p = malloc(1 << 20);
  memset(p, 1, 1 << 20);
  printf("locked %ld %ld\n", at_lock, locked_kb());
  free(p);
  return 0;
}
