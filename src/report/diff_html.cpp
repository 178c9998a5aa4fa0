// `sprofil diff --format html`: one self-contained page, diff_html_page.html, with the
// comparison embedded as the JSON of `--format json` (write_diff_json). The page draws the
// table itself: significant rows first, each change's 95% interval as an inline SVG bar on a
// scale shared by all rows, a filter, a "significant only" switch and sortable columns.
#include <sstream>
#include <string>
#include <string_view>

#include "report/diff.hpp"
#include "report/page.hpp"

namespace sprofil::report {
namespace {

constexpr std::string_view kPage =
#include "diff_html_page_html.inc"
    ;

}  // namespace

bool write_diff_html(const DiffTable& t, std::ostream& out) {
  std::ostringstream js;
  write_diff_json(t, js);
  std::string page;
  if (!fill_page(kPage, "sprofil diff", js.str(), &page)) return false;
  out << page;
  return static_cast<bool>(out);
}

}  // namespace sprofil::report
