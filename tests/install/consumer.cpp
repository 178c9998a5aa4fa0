// A program built against an installed sprofil, through find_package or pkg-config.
#include <sprofil/hpux.h>

#include <cstdio>
#include <sprofil/sprofil.hpp>

int main() {
  sprofil::Profiler p;
  std::printf("sprofil %s, HP-UX profcnt max %ld\n", sprofil_version(), hpux_profil_max());
  return 0;
}
