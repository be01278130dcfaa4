#pragma once

#include <string>

#include "pipesched/ir/schedule.hpp"

namespace pipesched {

/// The text listing of `pipesched generate --format text`: one line per stage,
/// `stage 0: F0 F1 F2 F3 B0 W0 F4 ...`, micro-batches 0-based; with several chunks per stage
/// each op carries its local chunk after a dot: `F0.1`.
inline std::string format_schedule_text(const schedule& s) {
  std::string out;
  const bool chunked = s.chunks() > 1;
  for (stage_index st = 0; st < s.stages(); ++st) {
    out += "stage " + std::to_string(st) + ":";
    for (const op& o : s.ops(st)) {
      out += ' ';
      out += to_string(o, chunked);
    }
    out += '\n';
  }
  return out;
}

}  // namespace pipesched
