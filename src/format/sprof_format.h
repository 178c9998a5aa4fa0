/* The .sprof profile file, version 1: the single definition shared by the runtime that writes
 * it (through a shared file mapping, so the counts survive a crash) and the host tools that
 * read it. docs/file-format.md describes it in prose; the static_asserts below pin every
 * offset. All integers are little-endian; every record starts on a 4096-byte boundary.
 *
 *   offset 0      sprof_header (4096 bytes)
 *   offset 4096   region record 0: sprof_region (4096 bytes), then its counters
 *                 (nbins * counter_width bytes, padded to 4096)
 *   ...           region record 1, 2, ... region_count - 1, one after another
 *
 * The runtime commits a region by writing its record in full and only then raising
 * header.region_count (a release store), after it has stored regions_end; so a reader that
 * sees region_count = n also sees a regions_end at or past the end of record n - 1, and it
 * trusts only the first region_count records. After a change to committed records (one marked
 * SPROF_R_UNLOADED, one loaded again at a new address) or a record added while one is marked
 * unloaded (it may lie where that one was), the runtime increments header.regions_changes
 * (release): a reader that keeps a table over the records while the program runs rebuilds it
 * when that number moves, and reads the records past those it has when region_count moves
 * (a record added while none is unloaded overlaps no other). Profiles written by the host tools
 * hold 0.
 * Counters and the header's sample tallies are updated in place while the program runs. */
#ifndef SPROFIL_SPROF_FORMAT_H
#define SPROFIL_SPROF_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define SPROF_MAGIC "SPROFIL" /* 8 bytes with the terminating NUL */
#define SPROF_VERSION 1u
#define SPROF_PAGE 4096u
#define SPROF_REGION_MAGIC 0x314e4752u /* "RGN1" */
#define SPROF_CMDLINE_MAX 3072u
#define SPROF_COMM_MAX 16u /* a command name (the kernel's TASK_COMM_LEN), NUL-padded */
#define SPROF_PATH_MAX 3840u
#define SPROF_BUILD_ID_MAX 64u

/* header.flags */
#define SPROF_F_FINISHED 0x1u /* the end fields were written by a clean exit or stop */
#define SPROF_F_CHILD 0x2u    /* written by a forked child (FILE.PID) */
/* The program installed a seccomp filter (through libc): the runtime made no system call of
 * its own after it. Threads and processes started later are not sampled; with a signal per
 * sample, sampling stopped there. */
#define SPROF_F_SANDBOXED 0x4u

/* header.clock: the one table of sampling clocks. Every layer (the runtime, the public API's
 * sprofil_clock, the host tools) derives its ids, names and descriptions from this list; the
 * numbers are on disk and in the public API and must never change. off_cpu: the clock also
 * ticks while a thread waits, so its samples are not CPU time (the reports say so).
 *   X(NAME, id, "name", "description", off_cpu) */
#define SPROF_CLOCKS(X)                                     \
  X(CPU, 0, "cpu", "per-thread CPU-time timers", 0)         \
  X(ITIMER, 1, "itimer", "process-wide ITIMER_PROF", 0)     \
  X(PERF, 2, "perf", "per-thread perf_event task clock", 0) \
  X(WALL, 3, "wall", "per-thread wall-clock timers", 1)     \
  X(SAMPLER, 4, "sampler", "per-thread hrtimers, CPU-time weights", 0)

#define SPROF_CLOCK_ENUM_(NAME, id, name, description, off_cpu) SPROF_CLOCK_##NAME = id,
enum sprof_clock { SPROF_CLOCKS(SPROF_CLOCK_ENUM_) SPROF_CLOCK_COUNT };
#undef SPROF_CLOCK_ENUM_

/* region.flags */
#define SPROF_R_MAIN 0x1u     /* the main executable */
#define SPROF_R_VDSO 0x2u     /* the kernel's vDSO */
#define SPROF_R_UNLOADED 0x4u /* dlclose'd; the counts are kept */
#define SPROF_R_DLOPEN 0x8u   /* loaded after profiling started */
#define SPROF_R_SYSTEM 0x10u  /* a system-time array follows the counters (system_offset) */
#define SPROF_R_JIT 0x20u     /* anonymous executable memory (JIT code): path is its perf map */

struct sprof_header {
  char magic[8];                   /* "SPROFIL\0" */
  uint32_t version;                /* SPROF_VERSION */
  uint32_t header_size;            /* 4096 */
  uint32_t flags;                  /* SPROF_F_* */
  uint32_t clock;                  /* enum sprof_clock */
  uint32_t requested_hz;           /* samples per second asked for */
  uint32_t region_count;           /* committed region records */
  uint64_t tick_ns;                /* time one count stands for */
  uint64_t effective_hz_milli;     /* delivered samples per CPU-second x 1000; 0 = unknown */
  uint64_t start_ns;               /* CLOCK_REALTIME at start */
  uint64_t end_ns;                 /* CLOCK_REALTIME at end; 0 = did not end cleanly */
  uint64_t cpu_ns;                 /* process CPU time (user + sys) at end; 0 = unknown */
  int32_t pid;                     /* the profiled process */
  int32_t ppid;                    /* its parent */
  uint64_t regions_end;            /* offset just past the last committed record */
  uint64_t overflow;               /* samples that fell in no region (weighted) */
  uint64_t delivered;              /* samples delivered to the handler (weighted) */
  uint64_t lost;                   /* delivered, not added: at its limit, stopped, dropped */
  uint32_t cmdline_len;            /* bytes used in cmdline */
  uint32_t regions_changes;        /* bumped (release) after records change: see below */
  uint64_t start_cpu_ns;           /* the runtime's: process CPU time when this image's header
                                      was filled. The CPU clock goes on across an exec: an
                                      exec'd image's cpu_ns and this include the images' before
                                      it. 0 in files the host tools write, whose cpu_ns is the
                                      image's own (sprofil record subtracts the image before) */
  char cmdline[SPROF_CMDLINE_MAX]; /* argv, each argument NUL-terminated */
  char comm[SPROF_COMM_MAX];       /* the kernel's command name of the image (a script's name,
                                      not its interpreter's), NUL-padded; all zero: not told
                                      (the basename of argv[0] stands in) */
  uint8_t reserved[SPROF_PAGE - 128 - SPROF_CMDLINE_MAX - SPROF_COMM_MAX]; /* zero */
};

struct sprof_region {
  uint32_t magic;           /* SPROF_REGION_MAGIC */
  uint32_t flags;           /* SPROF_R_* */
  uint64_t record_size;     /* this page plus the padded counters */
  uint64_t counters_offset; /* file offset of the counters (record offset + 4096) */
  uint64_t start;           /* runtime address range [start, end) */
  uint64_t end;
  uint64_t load_bias;     /* runtime address - ELF virtual address */
  uint64_t file_offset;   /* offset in the object file that maps to `start` */
  uint64_t nbins;         /* counters */
  uint32_t bin_size;      /* bytes of text per counter: bin = (pc - start) / bin_size */
  uint32_t counter_width; /* 2, 4 or 8 bytes, unsigned */
  uint64_t load_ns;       /* CLOCK_REALTIME when the region was added */
  uint64_t unload_ns;     /* when it was dlclose'd, or 0 */
  uint32_t build_id_len;  /* bytes used in build_id */
  uint32_t path_len;      /* bytes used in path, without a NUL */
  uint8_t build_id[SPROF_BUILD_ID_MAX];
  char path[SPROF_PATH_MAX]; /* the object's path; "[vdso]" for the vDSO */
  /* With SPROF_R_SYSTEM: file offset (4096-aligned, inside this record) of a second array of
   * nbins counters of counter_width bytes: the part of each bin's count that the thread spent
   * in the kernel before it returned to user space at that pc. Each is at most the bin's count
   * (the main array holds user + system). 0 without the flag. */
  uint64_t system_offset;
  uint8_t reserved[SPROF_PAGE - 168 - SPROF_PATH_MAX]; /* zero */
};

/* The run profile: what one `sprofil record` writes. It holds every process of the run that
 * took a sample, each as a complete v1 image (above), so that one file is one run.
 * docs/file-format.md describes it.
 *
 *   offset 0      sprof_run_header (4096 bytes)
 *   offset 4096   the process table: process_count sprof_run_process entries (128 bytes
 *                 each), padded to 4096
 *   ...           each process's image at its entry's image_offset, its internal offsets
 *                 (counters_offset, regions_end) relative to the image
 * Version 3 (what the tools write) stores each image packed: only its 8-byte units that hold
 * data, after a table of extents (sprof_run_extent) that says where they go in the image;
 * every other byte of the image reads as zero. A v1 image's counter space is mostly zero pages
 * (a library's every bin), which version 1 stored in full, as file holes: a file of a few
 * megabytes of data had an apparent size of gigabytes, which every copy that does not keep
 * holes (an upload, an archive, scp) wrote out. Version 2 packed whole pages: a process of a
 * few samples still stored its header's page, one page per region record and one per counter
 * hit, and a page of extents (24 KiB for a few hundred bytes of data: `sprofil record` of
 * 3,000 short processes wrote 63 MB; version 3 writes them in 1.9 MB: docs/file-format.md).
 * Version 1 stores each image as it is, in full, at image_offset; readers read all three.
 * The host tools write it once (temporary file + rename); it is never updated in place. */
#define SPROF_RUN_MAGIC "SPRFRUN"  /* 8 bytes with the terminating NUL */
#define SPROF_RUN_VERSION 3u       /* written; 1 and 2 are read too */
#define SPROF_RUN_VERSION_PAGES 2u /* images packed by pages */
#define SPROF_RUN_VERSION_FULL 1u  /* images stored in full */
#define SPROF_RUN_UNIT 8u          /* version 3's extent unit, bytes (version 2's: SPROF_PAGE) */
#define SPROF_RUN_ENTRY 128u
#define SPROF_RUN_EXTENT 16u
#define SPROF_RUN_NAME_MAX 32u

struct sprof_run_header {
  char magic[8];                    /* "SPRFRUN\0" */
  uint32_t version;                 /* SPROF_RUN_VERSION */
  uint32_t header_size;             /* 4096 */
  uint32_t process_count;           /* entries in the process table; the first is the run's root */
  uint32_t flags;                   /* zero */
  uint64_t table_offset;            /* 4096 */
  uint64_t run_cpu_ns;              /* CPU (user + sys) of the whole run, every process, from
                                       wait4's rusage; 0 = unknown */
  uint64_t dropped_processes;       /* processes that took no sample, not stored */
  uint64_t start_ns;                /* CLOCK_REALTIME when the command was started */
  uint64_t end_ns;                  /* when it ended */
  int32_t exit_status;              /* the command's exit status (128 + signal if killed) */
  uint32_t cmdline_len;             /* bytes used in cmdline */
  uint64_t throttled;               /* times the kernel throttled the sampling (perf clock:
                                       PERF_RECORD_THROTTLE); their time is in the images'
                                       `lost`. 0 = none seen (or not known: older writers) */
  char cmdline[SPROF_CMDLINE_MAX];  /* the recorded command, each argument NUL-terminated */
  uint64_t unsampled_threads;       /* threads that ended before their first sample (sampled from
                                       outside), whose time is at their creators' last pc */
  uint64_t unsampled_thread_ticks;  /* their time so credited, in samples (ticks); 0 = none */
  uint64_t unsampled_processes;     /* processes whose program ended before its first sample
                                       (sampled from outside), whose time is at its entry point */
  uint64_t unsampled_process_ticks; /* their time so credited, in samples (ticks); 0 = none */
  uint8_t reserved[SPROF_PAGE - 112 - SPROF_CMDLINE_MAX]; /* zero */
};

struct sprof_run_process {
  int32_t pid;
  int32_t ppid;
  uint64_t image_offset;         /* the image (version 1), or its extent table followed by its
                                    stored units (versions 2, 3); aligned to the version's unit
                                    (4096 in versions 1 and 2, 8 in version 3) */
  uint64_t image_size;           /* the image's bytes, a multiple of 4096 (in versions 2 and 3,
                                    the bytes not stored included) */
  char comm[SPROF_COMM_MAX];     /* command name (basename of argv[0]), NUL-padded */
  char name[SPROF_RUN_NAME_MAX]; /* the runtime's file-name suffix ("", ".PID", ".PID.N") */
  uint64_t stored_size;          /* versions 2, 3: bytes at image_offset, a multiple of the
                                    unit: the extent table (padded to 4096 in version 2), then
                                    the stored units */
  uint32_t extent_count;         /* versions 2, 3: entries in the extent table */
  uint32_t reserved0;            /* zero */
  uint8_t reserved[SPROF_RUN_ENTRY - 88]; /* zero */
};

/* Versions 2 and 3: units [first, first + count) of an image (unit n is its bytes
 * [n * unit, (n + 1) * unit): SPROF_PAGE in version 2, SPROF_RUN_UNIT in version 3), stored one
 * after the other in the order of the table (sorted, not overlapping, count >= 1). */
struct sprof_run_extent {
  uint64_t first;
  uint64_t count;
};

#ifdef __cplusplus
static_assert(sizeof(sprof_run_header) == SPROF_PAGE, "run header is one page");
static_assert(offsetof(sprof_run_header, cmdline) == 80, "run header layout");
static_assert(offsetof(sprof_run_header, unsampled_threads) == 3152, "run header layout");
static_assert(offsetof(sprof_run_header, unsampled_processes) == 3168, "run header layout");
static_assert(sizeof(sprof_run_process) == SPROF_RUN_ENTRY, "run process entry");
static_assert(offsetof(sprof_run_process, name) == 40, "run process layout");
static_assert(offsetof(sprof_run_process, stored_size) == 72, "run process layout");
static_assert(offsetof(sprof_run_process, extent_count) == 80, "run process layout");
static_assert(sizeof(sprof_run_extent) == SPROF_RUN_EXTENT, "run extent");
static_assert(sizeof(sprof_header) == SPROF_PAGE, "header is one page");
static_assert(offsetof(sprof_header, tick_ns) == 32, "header layout");
static_assert(offsetof(sprof_header, pid) == 72, "header layout");
static_assert(offsetof(sprof_header, overflow) == 88, "header layout");
static_assert(offsetof(sprof_header, cmdline) == 128, "header layout");
static_assert(offsetof(sprof_header, comm) == 3200, "header layout");
static_assert(sizeof(sprof_region) == SPROF_PAGE, "region record is one page");
static_assert(offsetof(sprof_region, nbins) == 56, "region layout");
static_assert(offsetof(sprof_region, build_id) == 96, "region layout");
static_assert(offsetof(sprof_region, path) == 160, "region layout");
static_assert(offsetof(sprof_region, system_offset) == 4000, "region layout");
#endif

#endif /* SPROFIL_SPROF_FORMAT_H */
