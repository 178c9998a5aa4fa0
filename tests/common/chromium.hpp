// Headless Chromium (Debian's chromium) for the tests that load sprofil's HTML pages
// (tests/interop/html_test.cpp, tests/report/diff_html_test.cpp).
#pragma once

#include <unistd.h>

#include <string>
#include <utility>

namespace sprofil::testproc {

// The browser's path, or nullptr where it is not installed (the tests skip, saying so).
inline const char* chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (::access(c, X_OK) == 0) return c;
  return nullptr;
}

// The command line that starts it: headless, as root, with nothing that reaches the network,
// bounded to 120 s; the caller adds --dump-dom or --screenshot and the page.
inline std::string chromium_cmd(const std::string& user_dir) {
  return std::string("timeout 120 ") + chromium() +
         " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
         " --disable-background-networking --disable-component-update --disable-sync"
         " --enable-logging=stderr --v=0 --user-data-dir='" +
         user_dir + "'";
}

// Text as it was before --dump-dom serialized it: the DOM's serializer escapes &, < and > in
// text and attributes, and " in attributes (a C++ name such as f(T const&) reads
// "f(T const&amp;)" in the dump).
inline std::string dom_text(std::string s) {
  static const struct {
    const char* entity;
    char c;
  } kEntities[] = {{"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&amp;", '&'}};
  for (const auto& e : kEntities) {
    const std::string ent = e.entity;
    std::string out;
    size_t from = 0;
    for (size_t at; (at = s.find(ent, from)) != std::string::npos; from = at + ent.size())
      out.append(s, from, at - from).push_back(e.c);
    out.append(s, from, std::string::npos);
    s = std::move(out);
  }
  return s;
}

}  // namespace sprofil::testproc
