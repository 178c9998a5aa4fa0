// SPROFIL_EXPORT: C linkage and default visibility, so that libsprofil.so exports the function
// although the runtime is compiled with -fvisibility=hidden. It marks what no public header
// declares: the interposers of libc and libdl functions (the exec family; the signal, mask,
// timer and sleeping calls; pthread_create and pthread_join; dlopen, dlmopen and dlclose) and
// sprofil_debug_engine_stats (api/api.cpp; the tests look it up with dlsym). It also marks
// sprofil_live_serve (live/api_source.cpp), which sprofil.h declares as well. The faces and the
// C API are exported by their public headers instead: each wraps its declarations in
// #pragma GCC visibility push(default) / pop (include/sprofil/*.h), and the file that defines
// them includes that header.
#pragma once

#define SPROFIL_EXPORT extern "C" __attribute__((visibility("default")))
