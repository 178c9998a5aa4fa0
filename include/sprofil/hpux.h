/* HP-UX sprofil(2) and profil(2) face. See docs/faces.md for every rule and its test. */
#ifndef SPROFIL_HPUX_H
#define SPROFIL_HPUX_H

#include <stddef.h>
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

struct hpux_prof {
  void* pr_base;         /* buffer base */
  unsigned int pr_size;  /* buffer size in bytes */
  void* pr_offset;       /* pc offset: start of the profiled text */
  unsigned int pr_scale; /* pc scaling, 16.16 fixed point */
};

/* Element size of the counters: exactly one of these is the flags argument. */
#define PROF_USHORT 1u
#define PROF_UINT 2u
#define PROF_UINT64 4u

/* The largest profcnt (HP-UX's sysconf(_SC_PROFIL_MAX)). */
#define HPUX_PROFIL_MAX 65536
long hpux_profil_max(void);

/* Profiles the regions of profp[0..profcnt-1]; profcnt 0 disables profiling. Returns 0, or -1
 * with errno E2BIG (profcnt < 0 or > HPUX_PROFIL_MAX), EFAULT (profp, tvp or a pr_base is not
 * valid memory), EINVAL (flags, pr_size, overflow descriptor, ordering or overlap). */
int hpux_sprofil(struct hpux_prof* profp, int profcnt, struct timeval* tvp, unsigned int flags);

/* sprofil() with one entry, tvp NULL and PROF_USHORT. */
int hpux_profil(void* buff, size_t bufsiz, void* offset, unsigned int scale);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
