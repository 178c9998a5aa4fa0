# cmake -DIN=file -DOUT=file.inc -P EmbedText.cmake: writes IN's text as one C++ raw string
# literal, for `#include "file.inc"` in an initializer.
file(READ "${IN}" content)
file(WRITE "${OUT}" "R\"SPROFIL_EMBED(${content})SPROFIL_EMBED\"\n")
