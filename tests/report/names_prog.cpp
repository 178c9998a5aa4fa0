// The program of the naming tests (tests/report/names_test.cpp), recorded with the real tool.
// Each phase is a bounded loop that spends its time where a name is under test:
//   plt     calls names_tiny() in libreport_names_lib.so through the PLT (names_tiny@plt)
//   malloc  malloc/free of small blocks (glibc's malloc, alias __libc_malloc)
//   vdso    clock_gettime(CLOCK_MONOTONIC) through the vDSO (__vdso_clock_gettime)
//   long    a function template with a long C++ name (parameter lists, template arguments)
//   alike   two instantiations of that template, whose short names are the same
// Usage: names_prog PHASE ITERATIONS
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

extern "C" long names_tiny(long x);

namespace names_demo {

template <typename K, typename V>
struct Table {
  std::map<K, std::vector<V>> rows;
};

// A name of ~200 characters once demangled (template arguments and parameter list).
template <typename K, typename V>
__attribute__((noinline)) long very_long_name_worker(
    const Table<K, V>& table, const std::map<std::string, std::vector<K>>& index, long n) {
  long s = static_cast<long>(table.rows.size() + index.size());
  for (long i = 0; i < n; ++i) s = s * 6364136223846793005L + 1442695040888963407L;
  return s;
}

}  // namespace names_demo

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s plt|malloc|vdso|long|alike ITERATIONS\n", argv[0]);
    return 2;
  }
  const long n = std::atol(argv[2]);
  long sink = 0;
  if (std::strcmp(argv[1], "plt") == 0) {
    for (long i = 0; i < n; ++i) sink += names_tiny(i);
  } else if (std::strcmp(argv[1], "malloc") == 0) {
    for (long i = 0; i < n; ++i) {
      void* volatile p = std::malloc(static_cast<size_t>(16 + (i & 255)));
      sink += reinterpret_cast<long>(p) & 1;
      std::free(p);
    }
  } else if (std::strcmp(argv[1], "vdso") == 0) {
    for (long i = 0; i < n; ++i) {
      timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      sink += ts.tv_nsec & 1;
    }
  } else if (std::strcmp(argv[1], "long") == 0) {
    names_demo::Table<std::string, std::vector<std::pair<int, double>>> t;
    std::map<std::string, std::vector<std::string>> index;
    sink += names_demo::very_long_name_worker(t, index, n);
  } else if (std::strcmp(argv[1], "alike") == 0) {
    names_demo::Table<std::string, std::vector<std::pair<int, double>>> t;
    std::map<std::string, std::vector<std::string>> index;
    names_demo::Table<int, std::vector<std::pair<long, float>>> u;
    std::map<std::string, std::vector<int>> by_number;
    sink += names_demo::very_long_name_worker(t, index, n);
    sink += names_demo::very_long_name_worker(u, by_number, n);
  } else {
    return 2;
  }
  std::printf("%ld\n", sink & 1);
  return 0;
}
