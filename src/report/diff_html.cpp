// `sprofil diff --format html`: one self-contained page, diff_html_page.html, with the
// comparison embedded as the JSON of `--format json` (write_diff_json). The page draws the
// table itself: significant rows first, each change's 95% interval as an inline SVG bar on a
// scale shared by all rows, a filter, a "significant only" switch and sortable columns.
#include <sstream>
#include <string>
#include <string_view>

#include "report/diff.hpp"

namespace sprofil::report {
namespace {

constexpr std::string_view kPage =
#include "diff_html_page.inc"
    ;
constexpr std::string_view kMarker = "/*SPROFIL_DATA*/";

}  // namespace

bool write_diff_html(const DiffTable& t, std::ostream& out) {
  std::ostringstream js;
  write_diff_json(t, js);
  std::string data = js.str();
  // Inside <script>, "</" could end the element: JSON allows "<\/" for it.
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3)
    data.replace(at, 2, "<\\/");
  const size_t m = kPage.find(kMarker);
  if (m == std::string_view::npos) return false;
  out << kPage.substr(0, m) << data << kPage.substr(m + kMarker.size());
  return static_cast<bool>(out);
}

}  // namespace sprofil::report
