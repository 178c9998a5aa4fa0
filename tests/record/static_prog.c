/* A statically linked program for `sprofil record`'s refusal: it would write its argument. */
#include <stdio.h>
int main(int argc, char** argv) {
  if (argc > 1) {
    FILE* f = fopen(argv[1], "w");
    if (f) fclose(f);
  }
  return 0;
}
