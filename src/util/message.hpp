// The runtime's messages in a profiled program (the agent's, the clock's): libc only.
#pragma once

#include <stddef.h>

namespace sprofil::util {

// Writes one line (n bytes) to the stderr the program had when the runtime loaded. A program
// that has since put another file on fd 2 (closed it and opened its own data file there, as a
// daemon may) gets nothing written into that file; nor does one started with fd 2 closed: the
// line is dropped (tests/harm `NoHarm.NoMessageIntoAFileThatTookFdTwo`).
void message(const char* line, size_t n);

}  // namespace sprofil::util
