// Sharing a whole number of units among weights in proportion to them, by largest remainder:
// each takes floor(total x weight / sum), and the units left go one each to the largest
// remainders (ties: the earlier). The shares sum to `total`; with total <= the weights' sum,
// no share passes its weight. Header-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sprofil::util {

inline std::vector<uint64_t> apportion(uint64_t total, const std::vector<uint64_t>& weights) {
  std::vector<uint64_t> share(weights.size(), 0);
  unsigned __int128 sum = 0;
  for (const uint64_t w : weights) sum += w;
  if (sum == 0 || total == 0) return share;
  std::vector<std::pair<uint64_t, size_t>> rest;  // remainder, index
  uint64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const unsigned __int128 x = static_cast<unsigned __int128>(total) * weights[i];
    share[i] = static_cast<uint64_t>(x / sum);
    given += share[i];
    rest.emplace_back(static_cast<uint64_t>(x % sum), i);
  }
  std::stable_sort(rest.begin(), rest.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total && k < rest.size(); ++k, ++given) ++share[rest[k].second];
  return share;
}

}  // namespace sprofil::util
