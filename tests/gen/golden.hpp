#pragma once

#include <sstream>
#include <string>
#include <vector>

#include <pipesched/ir/schedule.hpp>

// Golden sequences of docs/model.md §6 (1-based micro-batches, as the paper prints them).
namespace golden {

inline std::string stage_line_1based(const pipesched::schedule& s, pipesched::stage_index st) {
  std::ostringstream out;
  bool first = true;
  for (const auto& o : s.ops(st)) {
    out << (first ? "" : " ") << to_string(o.kind) << (o.mb + 1);
    first = false;
  }
  return out.str();
}

inline const std::vector<std::string> one_f_one_b = {
    "F1 F2 F3 F4 BW1 F5 BW2 F6 BW3 F7 BW4 F8 BW5 BW6 BW7 BW8",
    "F1 F2 F3 BW1 F4 BW2 F5 BW3 F6 BW4 F7 BW5 F8 BW6 BW7 BW8",
    "F1 F2 BW1 F3 BW2 F4 BW3 F5 BW4 F6 BW5 F7 BW6 F8 BW7 BW8",
    "F1 BW1 F2 BW2 F3 BW3 F4 BW4 F5 BW5 F6 BW6 F7 BW7 F8 BW8"};
inline const std::vector<std::string> zb_h1 = {
    "F1 F2 F3 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 F8 B5 W5 B6 W6 B7 W7 B8 W8",
    "F1 F2 F3 B1 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 F8 B6 W5 B7 W6 B8 W7 W8",
    "F1 F2 B1 F3 B2 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 F8 B7 W5 B8 W6 W7 W8",
    "F1 B1 F2 B2 F3 B3 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 F8 B8 W5 W6 W7 W8"};
inline const std::vector<std::string> zb_h2 = {
    "F1 F2 F3 F4 F5 F6 F7 B1 W1 F8 B2 W2 B3 W3 B4 W4 B5 W5 B6 W6 B7 W7 B8 W8",
    "F1 F2 F3 F4 F5 B1 F6 B2 F7 B3 W1 F8 B4 W2 B5 W3 B6 W4 B7 W5 B8 W6 W7 W8",
    "F1 F2 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 W1 F8 B6 W2 B7 W3 B8 W4 W5 W6 W7 W8",
    "F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 W1 F8 B8 W2 W3 W4 W5 W6 W7 W8"};

}  // namespace golden
