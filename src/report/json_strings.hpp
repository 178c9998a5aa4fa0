// A list of strings as the JSON outputs write it (report, diff and annotate): an array of
// valid UTF-8 strings (labels.hpp's valid_utf8: invalid bytes become U+FFFD).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/labels.hpp"

namespace sprofil::report {

inline nlohmann::json json_strings(const std::vector<std::string>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const std::string& s : v) a.push_back(valid_utf8(s));
  return a;
}

}  // namespace sprofil::report
