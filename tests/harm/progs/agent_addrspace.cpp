// A program that fits an address-space limit (RLIMIT_AS, `ulimit -v`) with a few megabytes to
// spare: `agent_addrspace vmsize` prints its VmSize (kB) at main; `agent_addrspace alloc MB`
// maps MB MiB, touches every page, works a little and prints "ok", or "no memory" when the
// mapping fails. A test sets the limit from a native run's VmSize: whatever sprofil maps into
// the program comes out of the room it had natively.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <fstream>
#include <string>

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "vmsize") == 0) {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("VmSize:", 0) == 0) printf("%ld\n", strtol(line.c_str() + 7, nullptr, 10));
    return 0;
  }
  if (argc != 3 || strcmp(argv[1], "alloc") != 0) {
    fprintf(stderr, "usage: agent_addrspace vmsize | alloc MB\n");
    return 2;
  }
  const size_t bytes = strtoul(argv[2], nullptr, 10) << 20;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    printf("no memory\n");
    return 1;
  }
  volatile char* p = static_cast<char*>(m);
  for (int round = 0; round < 40; ++round)
    for (size_t i = 0; i < bytes; i += 4096) p[i] = static_cast<char>(p[i] + round);
  printf("ok\n");
  return 0;
}
