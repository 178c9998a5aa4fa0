#include "report/page.hpp"

#include <algorithm>
#include <iterator>

namespace sprofil::report {
namespace {

constexpr std::string_view kBaseCss =
#include "page_base_css.inc"
    ;
constexpr std::string_view kBaseJs =
#include "page_base_js.inc"
    ;

}  // namespace

bool fill_page(std::string_view page, const std::string& json, std::string* out) {
  std::string data = json;
  // Inside <script>, "</" could end the element: JSON allows "<\/" for it.
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3)
    data.replace(at, 2, "<\\/");
  struct Fill {
    std::string_view marker, text;
    size_t at;
  };
  Fill fills[] = {{"/*SPROFIL_BASE_CSS*/", kBaseCss, 0},
                  {"/*SPROFIL_BASE_JS*/", kBaseJs, 0},
                  {"/*SPROFIL_DATA*/", data, 0}};
  for (Fill& f : fills)
    if ((f.at = page.find(f.marker)) == std::string_view::npos) return false;
  std::sort(std::begin(fills), std::end(fills),
            [](const Fill& a, const Fill& b) { return a.at < b.at; });
  std::string s;
  s.reserve(page.size() + kBaseCss.size() + kBaseJs.size() + data.size());
  size_t from = 0;
  for (const Fill& f : fills) {
    s.append(page.substr(from, f.at - from));
    s.append(f.text);
    from = f.at + f.marker.size();
  }
  s.append(page.substr(from));
  *out = std::move(s);
  return true;
}

}  // namespace sprofil::report
