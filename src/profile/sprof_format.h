/* The .sprof format moved to src/format/sprof_format.h (shared by the runtime and the host
 * tools). This name is kept only for src/record/record.cpp's include until it names the new
 * one; nothing else includes it. */
#include "format/sprof_format.h"
