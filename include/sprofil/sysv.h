/* System V profil() face: 16-bit counters; profiling stops once a count reaches 32767. */
#ifndef SPROFIL_SYSV_H
#define SPROFIL_SYSV_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

/* Counter index = (((pc - offset) * scale) >> 16) / 2. scale 0 or 1 turns profiling off;
 * bufsiz 0 makes it ineffective. Returns 0, or -1 with errno EFAULT (buff not writable for
 * bufsiz bytes) or EINVAL (scale above 0x10000, buff not 2-byte aligned). */
int sysv_profil(unsigned short* buff, size_t bufsiz, unsigned long offset, unsigned int scale);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
