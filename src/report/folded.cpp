// Folded stacks (`object;function count`), the input of flame graph tools.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "report/exporter.hpp"
#include "report/labels.hpp"

namespace sprofil::report {

namespace {
// A non-negative double as a count, saturating at UINT64_MAX (a cast beyond it is undefined).
uint64_t to_count(double x) {
  if (!(x > 0)) return 0;
  return x >= 18446744073709551615.0 ? UINT64_MAX : uint64_t(x);
}

// One frame of a stack: `;` separates frames and a newline ends the line, so a `;` in a name (an
// assembler's quoted symbol, a JIT's perf map) becomes `:`, as FlameGraph's stackcollapse-perf.pl
// does, and a newline `_`.
std::string frame(std::string name) {
  for (char& c : name)
    if (c == ';')
      c = ':';
    else if (c == '\n')
      c = '_';
  return name;
}
}  // namespace

void write_folded(const Table& t, std::ostream& out) {
  // Largest-remainder rounding keeps the sum equal to the rows' (integral) total.
  std::vector<uint64_t> n(t.rows.size());
  std::vector<std::pair<double, size_t>> rem;
  double sum = 0;
  uint64_t floor_sum = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    double s = t.rows[i].samples;
    sum += s;
    n[i] = to_count(std::floor(s + 1e-9));
    floor_sum = profile::sat_add(floor_sum, n[i]);
    rem.emplace_back(s - double(n[i]), i);
  }
  uint64_t target = to_count(std::round(sum));
  std::stable_sort(rem.begin(), rem.end(), [](auto& a, auto& b) { return a.first > b.first; });
  for (size_t k = 0; floor_sum < target && k < rem.size(); ++k, ++floor_sum) ++n[rem[k].second];
  for (size_t i = 0; i < t.rows.size(); ++i) {
    if (n[i] == 0) continue;
    const Row& r = t.rows[i];
    std::string stack;
    if (r.object.empty()) {
      stack = frame(r.name);
    } else if (t.by == By::kObject) {
      stack = frame(r.object);
    } else {
      stack = frame(r.object) + ";" + frame(r.name);
      if (t.by == By::kLine) {
        for (size_t k = r.frames.size(); k-- > 1;)
          if (!r.frames[k - 1].function.empty()) stack += ";" + frame(r.frames[k - 1].function);
        stack += ";" + frame(file_line(r.file, r.line));
      }
    }
    out << stack << " " << n[i] << "\n";
  }
}

const Exporter& folded_exporter() {
  static const RowsExporter e{"folded", "folded stacks for flame graphs", write_folded};
  return e;
}

}  // namespace sprofil::report
