#pragma once

#include <cstddef>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched {

/// The unit of a schedule's times when no seconds are known: the units its costs were given in.
inline constexpr std::string_view cost_units = "cost units";

/// A time for a reader, with `digits` significant digits and its unit: "16.4148 cost units",
/// "2.1065 s", "362.679 trace units". The one spelling of times in the text of simulate,
/// generate, whatif and analyze (their JSON keeps bare numbers).
inline std::string format_time(double t, std::string_view unit = cost_units, int digits = 6) {
  char number[48];
  std::snprintf(number, sizeof number, "%.*g", digits, t);
  std::string out = number;
  out += ' ';
  out += unit;
  return out;
}

/// The note after a table header whose columns are times: "(times in cost units)".
inline std::string times_in(std::string_view unit) {
  return "(times in " + std::string(unit) + ")";
}

/// One stage's ops, space-separated: `F0 F1 B0 W0`, with the local chunk after a dot when
/// `chunked` (`F0.1`). An overlapped pair (an op marked overlaps_next and the op after it) is
/// one entry in parentheses, as PyTorch writes `(0F7;7B3)OVERLAP_F_B`: `(F7.0;BW3.1)`.
inline std::string format_stage_ops(std::span<const op> ops, bool chunked) {
  std::string out;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    out += i == 0 ? "" : " ";
    if (overlaps_next(ops[i]) && i + 1 < ops.size()) {
      out += '(' + to_string(ops[i], chunked) + ';' + to_string(ops[i + 1], chunked) + ')';
      ++i;  // a mark on the pair's second op starts no chain
    } else {
      out += to_string(ops[i], chunked);
    }
  }
  return out;
}

/// The text listing of `pipesched generate --format text`: one line per stage,
/// `stage 0: F0 F1 F2 F3 B0 W0 F4 ...`, micro-batches 0-based; with several chunks per stage
/// each op carries its local chunk after a dot: `F0.1`; overlapped pairs as format_stage_ops.
inline std::string format_schedule_text(const schedule& s) {
  std::string out;
  const bool chunked = s.chunks() > 1;
  for (stage_index st = 0; st < s.stages(); ++st) {
    out += "stage " + std::to_string(st) + ":";
    if (!s.ops(st).empty()) {
      out += ' ' + format_stage_ops(s.ops(st), chunked);
    }
    out += '\n';
  }
  return out;
}

}  // namespace pipesched
