// A static program that calls IFUNCs (strchr, strlen, memchr) through its PLT: the entries
// of a static program's .plt are 8 bytes, with no PLT0, and jump through IRELATIVE slots that
// name no symbol (names_test.cpp, Names.StaticProgramsIfuncStubsAreNamed).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  char text[16] = "profil";
  volatile long sum = 0;
  for (long i = 0; i < n; ++i) {
    text[0] = (char)('a' + i % 8);
    sum += strchr(text, 'l') - text;
    sum += (long)strlen(text);
    sum += (const char*)memchr(text, 'o', sizeof text) - text;
  }
  printf("%ld\n", (long)sum);
  return 0;
}
