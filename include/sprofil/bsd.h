/* BSD/macOS profil(2) face. */
#ifndef SPROFIL_BSD_H
#define SPROFIL_BSD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

/* 16-bit bins; bin = ((pc - offset) / 2) * scale / 65536; scale 1..65536, 0 disables.
 * Returns 0, or -1 with errno EFAULT (samples not writable for size bytes) or EINVAL (scale
 * above 65536, samples not 2-byte aligned). */
int bsd_profil(char* samples, size_t size, unsigned long offset, unsigned int scale);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
