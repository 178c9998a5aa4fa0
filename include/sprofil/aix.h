/* AIX profil subroutine face, forms 1 and 2. */
#ifndef SPROFIL_AIX_H
#define SPROFIL_AIX_H

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

struct aix_prof {
  void* p_low;            /* low sampling address */
  void* p_high;           /* high sampling address; 0 ends the array */
  unsigned short* p_buff; /* counters; the buffers lie one after another */
  int p_bufsize;          /* buffer size in bytes */
  unsigned int p_scale;   /* as Scale in form 1, or (unsigned)-1: computed */
};

/* Form 1: buf is unsigned short[bufsize / 2], index = (((pc - offset) * (scale & 0xffff))
 * >> 16) rounded down to an even byte offset; counts stay at USHRT_MAX. Form 2: bufsize ==
 * -1, buf is an array of struct aix_prof ended by p_high == 0. Returns 0, or -1 with errno
 * EFAULT (a buffer is not valid memory, or the p_buff buffers are not contiguous) or EINVAL
 * (p_high not ascending). */
int aix_profil(void* buf, int bufsize, unsigned long offset, unsigned int scale);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
