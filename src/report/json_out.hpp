// How the JSON outputs (report, diff and annotate) write what they share: lists of strings,
// the name and object that identify a row, and the document itself. Every string is made
// valid UTF-8 first (labels.hpp's valid_utf8: invalid bytes become U+FFFD).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "report/labels.hpp"

namespace sprofil::report {

inline nlohmann::json json_strings(const std::vector<std::string>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (const std::string& s : v) a.push_back(valid_utf8(s));
  return a;
}

// A row's identity: its function (or line's function) and the object it is in.
inline nlohmann::json json_named(const std::string& name, const std::string& object) {
  return {{"name", valid_utf8(name)}, {"object", valid_utf8(object)}};
}

// The whole document, indented by 2, with a newline. `replace` is the last guard against an
// exception where a string escaped valid_utf8.
inline void write_json_document(const nlohmann::json& j, std::ostream& out) {
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace sprofil::report
