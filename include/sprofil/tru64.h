/* Tru64 UNIX profil(2) face, traditional and extended forms. */
#ifndef SPROFIL_TRU64_H
#define SPROFIL_TRU64_H

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

struct tru64_profil_args {
  unsigned int* buffer; /* unsigned int counters */
  void* highpc;         /* end of the range (exclusive) */
  void* lowpc;          /* start of the range */
  void* offset;         /* pc offset */
  unsigned int scale;   /* 16.16 fixed point */
};

#define TRU64_PROFIL_MAX_ARGS 64

/* Traditional: buffer is unsigned short[buffer_size / 2]; byte index =
 * ((pc - offset) * scale) >> 16; scale 2 maps every pc to the first element; 0 or 1 stop.
 * Extended: offset == (void *)-1, buffer is struct tru64_profil_args[buffer_size] (at most
 * 64), ranges ordered by decreasing lowpc and not overlapping; scale_or_flags must be 0.
 * tru64_profil(0, 0, 0, 0) stops either form. Returns 0, or -1 with errno EFAULT or EINVAL. */
int tru64_profil(void* buffer, unsigned int buffer_size, void* offset,
                 unsigned long scale_or_flags);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
