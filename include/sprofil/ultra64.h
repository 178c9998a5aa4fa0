/* Nintendo 64 libultra osProfile face. */
#ifndef SPROFIL_ULTRA64_H
#define SPROFIL_ULTRA64_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

typedef uint16_t u16;
typedef uint32_t u32;

typedef struct {
  u16* histo_base; /* counters: one per 32-bit word of the segment */
  u32 histo_size;  /* number of counters */
  u32* text_start; /* first instruction of the segment */
  u32* text_end;   /* last instruction of the segment */
} OSProf;

/* The shortest timer period osProfileStart accepts, in microseconds. */
#define PROF_MIN_INTERVAL 50
/* The most segments osProfileInit accepts. */
#define PROF_MAX_SEGMENTS 4096

/* Error codes reported by osProfileLastError() (0: the last call succeeded). */
#define ERR_OSPROFILEINIT_STR 1    /* counter running: call osProfileStop before Init */
#define ERR_OSPROFILEINIT_CNT 2    /* profcnt is an illegal value */
#define ERR_OSPROFILEINIT_ALN 3    /* histo_base is not 32-bit aligned */
#define ERR_OSPROFILEINIT_ORD 4    /* text_start >= text_end */
#define ERR_OSPROFILEINIT_SIZ 5    /* histo_size is an illegal size */
#define ERR_OSPROFILESTART_TIME 6  /* microseconds < PROF_MIN_INTERVAL */
#define ERR_OSPROFILESTART_FLAG 7  /* profiling has already been started */
#define ERR_OSPROFILESTOP_FLAG 8   /* profiling has already been stopped */
#define ERR_OSPROFILESTOP_TIMER 9  /* no profile timer to stop */
#define ERR_OSPROFILEINIT_OVL 10   /* segments overlap (the seed's BUGS wish) */
#define ERR_OSPROFILESTART_INIT 11 /* osProfileInit has not been called */
#define ERR_OSPROFILESTART_SYS 12  /* the system refused the timer (see errno) */
/* osProfileFlush: no host tool in server mode took the snapshot (none runs, or it did not
 * read it within a second); returned at once, the counters are unchanged (docs/live.md). */
#define ERR_OSPROFILEFLUSH_HOST 13

/* osProfileInitEx flag: histo_base points at u32 counters (the seed's BUGS wish). */
#define OS_PROFILE_U32 0x1u

void osProfileInit(OSProf* profp, u32 profcnt);
void osProfileInitEx(OSProf* profp, u32 profcnt, u32 flags);
void osProfileStart(u32 microseconds);
void osProfileStop(void);
/* Takes a snapshot (osProfileFlushSnapshot) and sends it to `sprofil gperf --serve`, found at
 * $SPROFIL_GPERF_SOCKET or in the per-user directory (docs/live.md). */
void osProfileFlush(void);

int osProfileLastError(void);
u32 osProfileOverflowCount(void);
/* How many times osProfileFlush has taken a snapshot. */
u32 osProfileFlushCount(void);
/* Copies up to `bytes` bytes of the last osProfileFlush snapshot (the counters of every
 * segment, one after another, in osProfileInit order) to dst; returns the bytes copied (0
 * before the first Flush after Init). */
u32 osProfileFlushSnapshot(void* dst, u32 bytes);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
