// A shared library linked into the demo.
#include "burn.hpp"

SPROFIL_BURN(demo_lib_compute)
