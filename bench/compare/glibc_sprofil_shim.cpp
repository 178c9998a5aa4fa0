/* LD_PRELOAD shim that profiles a program with glibc's own sprofil(3) (<sys/profil.h>), the
 * multi-region profil(3): one region per executable segment of every object loaded at
 * startup (the executable, its shared libraries, the vDSO; objects dlopen'd later are not
 * covered), 4 bytes of text per 32-bit counter (pr_scale 0x10000, PROF_UINT). glibc arms the
 * process-wide ITIMER_PROF itself (measured here: about 250 signals per CPU-second, the kernel
 * tick, though sprofil() reports a 10 ms tick through its tvp argument); with CMP_PROFIL_HZ=N the
 * shim re-arms ITIMER_PROF at N Hz after sprofil() (glibc's handler stays: it only counts the pc).
 *
 * At exit the non-zero counters are written to $CMP_PROFIL_OUT as text:
 *   hz REQUESTED_HZ
 *   region PATH LOAD_BIAS
 *   VADDR COUNT          (link-time address of the counter's first byte, hex)
 * Environment: CMP_PROFIL_OUT (required; the shim does nothing without it), CMP_PROFIL_HZ. */
#include <link.h>
#include <sys/profil.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define MAX_REGIONS 64

namespace {

struct prof g_prof[MAX_REGIONS];
char g_path[MAX_REGIONS][512];
uintptr_t g_bias[MAX_REGIONS];
int g_n;
unsigned g_hz;

int add_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  (void)data;
  for (int i = 0; i < info->dlpi_phnum && g_n < MAX_REGIONS; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    const uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~uintptr_t{3};
    const uintptr_t hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    const size_t nbins = (hi - lo + 3) / 4;
    void* buf = calloc(nbins, sizeof(unsigned));  // never freed: read at exit
    if (!buf) return 1;
    g_prof[g_n].pr_base = buf;
    g_prof[g_n].pr_size = nbins * sizeof(unsigned);
    g_prof[g_n].pr_off = lo;
    // glibc scales to buffer bytes: (pc - pr_off) * pr_scale / 65536 is the byte offset of the
    // counter, so with 4-byte counters 0x10000 gives one counter per 4 bytes of text.
    g_prof[g_n].pr_scale = 0x10000;
    g_bias[g_n] = info->dlpi_addr;
    const char* name = info->dlpi_name;
    if (g_n == 0 && (!name || !*name)) {
      const ssize_t k = readlink("/proc/self/exe", g_path[g_n], sizeof g_path[g_n] - 1);
      g_path[g_n][k > 0 ? k : 0] = '\0';
    } else {
      snprintf(g_path[g_n], sizeof g_path[g_n], "%s", name && *name ? name : "[vdso]");
    }
    ++g_n;
  }
  return 0;
}

void dump() {
  const char* out = getenv("CMP_PROFIL_OUT");
  sprofil(nullptr, 0, nullptr, 0); /* stop */
  FILE* f = fopen(out, "w");
  if (!f) return;
  fprintf(f, "hz %u\n", g_hz);
  for (int r = 0; r < g_n; ++r) {
    fprintf(f, "region %s %lx\n", g_path[r], static_cast<unsigned long>(g_bias[r]));
    const unsigned* c = static_cast<const unsigned*>(g_prof[r].pr_base);
    const size_t n = g_prof[r].pr_size / sizeof(unsigned);
    for (size_t i = 0; i < n; ++i)
      if (c[i])
        fprintf(f, "%lx %u\n", static_cast<unsigned long>(g_prof[r].pr_off + i * 4 - g_bias[r]),
                c[i]);
  }
  fclose(f);
}

}  // namespace

__attribute__((constructor)) static void cmp_glibc_sprofil_start() {
  if (!getenv("CMP_PROFIL_OUT")) return;
  dl_iterate_phdr(add_object, nullptr);
  struct timeval tick;
  if (sprofil(g_prof, g_n, &tick, PROF_UINT) != 0) {
    perror("cmp glibc sprofil shim: sprofil");
    return;
  }
  g_hz = tick.tv_usec ? static_cast<unsigned>(1000000 / tick.tv_usec) : 0;
  const char* hz = getenv("CMP_PROFIL_HZ");
  if (hz && atoi(hz) > 0) {
    g_hz = static_cast<unsigned>(atoi(hz));
    struct itimerval it;
    it.it_interval.tv_sec = 0;
    it.it_interval.tv_usec = 1000000 / g_hz;
    if (it.it_interval.tv_usec == 0) it.it_interval.tv_usec = 1;
    it.it_value = it.it_interval;
    setitimer(ITIMER_PROF, &it, nullptr);
  }
  atexit(dump);
}
