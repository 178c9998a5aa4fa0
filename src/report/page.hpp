// The HTML pages' assembly, shared by `report --format html` (html.cpp, html_page.html) and
// `diff --format html` (diff_html.cpp, diff_html_page.html): each page is embedded at build
// time and has three markers, filled here: /*SPROFIL_BASE_CSS*/ and /*SPROFIL_BASE_JS*/ get
// the style and the script start both pages share (page_base.css, page_base.js), and
// /*SPROFIL_DATA*/ (inside <script type="application/json">) gets the page's JSON.
#pragma once

#include <string>
#include <string_view>

namespace sprofil::report {

// The page with its markers filled; "</" in `json` is written "<\/" so that it cannot end the
// script element. False (and *out untouched) if the page lacks a marker: a build error.
bool fill_page(std::string_view page, const std::string& json, std::string* out);

}  // namespace sprofil::report
