/* sprofil: the modern C API. Sample the program counter of every thread into histograms over
 * chosen text regions. Functions return 0 (or a pointer) on success and -1 (or NULL) with
 * errno on failure; a failed call changes nothing. */
#ifndef SPROFIL_SPROFIL_H
#define SPROFIL_SPROFIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default)

/* The sampling clock. The numbers are part of the ABI and never change; a new clock takes the
 * next number. */
typedef enum {
  SPROFIL_CLOCK_CPU = 0,    /* per-thread CPU-time timers (default) */
  SPROFIL_CLOCK_ITIMER = 1, /* process-wide ITIMER_PROF */
  SPROFIL_CLOCK_PERF = 2,   /* per-thread perf_event task clock, user space */
  SPROFIL_CLOCK_WALL = 3,   /* per-thread wall-clock timers: on- and off-CPU time */
  SPROFIL_CLOCK_AUTO = 4,   /* perf where perf_event_open works, else SPROFIL_CLOCK_SAMPLER */
  SPROFIL_CLOCK_SAMPLER = 5 /* per-thread hrtimers weighted by CPU time (no perf events) */
} sprofil_clock;

typedef struct {
  sprofil_clock clock;    /* default SPROFIL_CLOCK_CPU */
  unsigned hz;            /* samples per second per thread; default 1000 */
  unsigned counter_width; /* 2, 4 or 8 bytes; default 4 (saturating) */
  unsigned bin_bytes;     /* bytes of text per counter, a power of two; default 4 */
} sprofil_options;

typedef struct sprofil_session sprofil_session;

typedef struct {
  uintptr_t lo, hi;       /* text range [lo, hi) */
  unsigned bin_bytes;     /* bytes per counter */
  size_t nbins;           /* counters */
  const uint64_t* counts; /* nbins counts */
  const char* name;       /* what was added: symbol, object path, or "" */
} sprofil_region_counts;

typedef struct {
  size_t nregions;
  const sprofil_region_counts* regions;
  uint64_t delivered; /* samples taken while the session ran */
  uint64_t outside;   /* samples in none of its regions (the engine's overflow tally) */
  uint64_t lost;      /* samples not added (counter at its limit) */
  uint64_t tick_ns;   /* time one count stands for */
} sprofil_snapshot;

const char* sprofil_version(void);
void sprofil_options_init(sprofil_options* opt);

sprofil_session* sprofil_create(const sprofil_options* opt); /* NULL: defaults */
void sprofil_destroy(sprofil_session* s);                    /* stops it first */

/* Regions: they may be added while the session runs. Overlapping an earlier region: EINVAL. */
int sprofil_add_range(sprofil_session* s, const void* lo, const void* hi, const char* name);
int sprofil_add_function(sprofil_session* s, const void* fn); /* its ELF symbol's extent */
int sprofil_add_symbol(sprofil_session* s, const char* name); /* a dynamic symbol by name */
int sprofil_add_object(sprofil_session* s, const void* addr); /* the object holding addr */
int sprofil_add_all_objects(sprofil_session* s);              /* all code loaded now */

int sprofil_start(sprofil_session* s); /* EBUSY: another session runs */
int sprofil_stop(sprofil_session* s);
int sprofil_reset(sprofil_session* s); /* zero the counts */

/* A copy of the counts; valid until sprofil_snapshot_free. */
sprofil_snapshot* sprofil_snapshot_take(sprofil_session* s);
void sprofil_snapshot_free(sprofil_snapshot* snap);

/* Live profiles (docs/live.md), opt-in: serves the session's counts to `sprofil fetch PID`,
 * `sprofil gperf PID` and `sprofil top PID` while the program runs, through an I/O thread and
 * a Unix-domain socket of this process (same user or root only). NULL stops serving; a
 * destroyed session is no longer served. One session is served at a time (the last). */
int sprofil_live_serve(sprofil_session* s);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
