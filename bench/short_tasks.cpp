// A thread per small task: ROUNDS rounds of PAR std::async tasks, each WORK iterations of a
// square root in work() (about 0.5 ms at 200,000 on the 2-core VM of docs/benchmarks.md),
// joined before the next round. Its threads end before a 1 ms period ends (bench/short_tasks.sh).
// Usage: short_tasks [ROUNDS] [PAR] [WORK]  (defaults: 2000, 2, 200000)
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <vector>

__attribute__((noinline)) double work(int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += std::sqrt(i * 1.0);
  return s;
}

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 2000;
  const int par = argc > 2 ? std::atoi(argv[2]) : 2;
  const int n = argc > 3 ? std::atoi(argv[3]) : 200000;
  double t = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::future<double>> f;
    for (int k = 0; k < par; ++k) f.push_back(std::async(std::launch::async, work, n));
    for (auto& x : f) t += x.get();
  }
  std::printf("%g\n", t);
  return 0;
}
