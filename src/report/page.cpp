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
// The frame's head, up to the title (the page's own <style> follows the shared one).
constexpr std::string_view kHead =
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";

}  // namespace

bool fill_page(std::string_view page, std::string_view title, const std::string& json,
               std::string* out) {
  std::string data = json;
  // Inside <script>, "</" could end the element: JSON allows "<\/" for it.
  for (size_t at = 0; (at = data.find("</", at)) != std::string::npos; at += 3)
    data.replace(at, 2, "<\\/");
  const std::string body = "</head>\n<body data-status=\"loading\">\n<h1 id=\"title\">" +
                           std::string(title) + "</h1>\n<div id=\"errors\"></div>";
  struct Fill {
    std::string_view marker, text;
    size_t at;
  };
  Fill fills[] = {{"<!--SPROFIL_BODY-->", body, 0},
                  {"/*SPROFIL_BASE_JS*/", kBaseJs, 0},
                  {"/*SPROFIL_DATA*/", data, 0}};
  for (Fill& f : fills)
    if ((f.at = page.find(f.marker)) == std::string_view::npos) return false;
  std::sort(std::begin(fills), std::end(fills),
            [](const Fill& a, const Fill& b) { return a.at < b.at; });
  std::string s;
  s.reserve(kHead.size() + title.size() + kBaseCss.size() + page.size() + body.size() +
            kBaseJs.size() + data.size() + 64);
  s.append(kHead).append(title).append("</title>\n<style>\n").append(kBaseCss);
  s.append("</style>\n");
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
