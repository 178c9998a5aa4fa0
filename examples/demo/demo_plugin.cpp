// A plugin the demo loads with dlopen (and unloads before it exits).
#include "burn.hpp"

SPROFIL_BURN(demo_plugin_compute)
