// The HTML pages' assembly, shared by `report --format html` (html.cpp, html_page.html) and
// `diff --format html` (diff_html.cpp, diff_html_page.html). Each page is embedded at build
// time and holds only what is its own: a <style> of its rules, then its body. The frame comes
// from here: the doctype, <head> with the meta lines, the title and the style both pages share
// (page_base.css), and the body's start (the title heading and the errors box) in place of
// the page's <!--SPROFIL_BODY--> marker. Two more markers are filled: /*SPROFIL_BASE_JS*/ gets
// the script start both pages share (page_base.js), and /*SPROFIL_DATA*/ (inside
// <script type="application/json">) the page's JSON.
#pragma once

#include <string>
#include <string_view>

namespace sprofil::report {

// The page in its frame, titled `title`, with its markers filled; "</" in `json` is written
// "<\/" so that it cannot end the script element. False (and *out untouched) if the page lacks
// a marker: a build error.
bool fill_page(std::string_view page, std::string_view title, const std::string& json,
               std::string* out);

}  // namespace sprofil::report
