// Marks a function libsprofil.so exports (the library is built with -fvisibility=hidden):
// the interposers of libc functions (exec, signals, dlopen, pthread_create) and the C APIs.
#pragma once

#define SPROFIL_EXPORT extern "C" __attribute__((visibility("default")))
