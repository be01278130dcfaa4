#pragma once

// Reading the text views in tests: counting a piece of text, and checking that an SVG is one
// well-formed <svg> document.
#include <cstddef>
#include <string>
#include <vector>

namespace test_text {

/// How often `what` occurs in `s` (overlapping occurrences too).
inline std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t pos = s.find(what); pos != std::string::npos; pos = s.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

// Tag balance: every <x ...> closed by </x> in order, self-closing tags ignored, one root
// <svg>; returns "" or the first problem.
inline std::string check_xml(const std::string& s) {
  std::vector<std::string> stack;
  std::size_t roots = 0;
  for (std::size_t i = s.find('<'); i != std::string::npos; i = s.find('<', i + 1)) {
    const std::size_t j = s.find('>', i);
    if (j == std::string::npos) {
      return "unterminated tag";
    }
    const std::string tag = s.substr(i + 1, j - i - 1);
    if (tag.empty() || tag.find('<') != std::string::npos) {
      return "'<' inside a tag";
    }
    if (tag.front() == '/') {
      if (stack.empty() || stack.back() != tag.substr(1)) {
        return "unbalanced </" + tag.substr(1) + ">";
      }
      stack.pop_back();
    } else if (tag.back() != '/') {
      roots += stack.empty() ? 1u : 0u;
      stack.push_back(tag.substr(0, tag.find(' ')));
    }
    i = j;
  }
  if (roots != 1 || s.rfind("<svg ", 0) != 0) {
    return "not one <svg> root";
  }
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

}  // namespace test_text
