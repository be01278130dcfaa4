#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <vector>

#include <fmt/color.h>
#include <fmt/format.h>

#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

// Aligned text timeline: one row per stage, each op a block whose width is proportional to
// its duration, idle time shown as dots, a time axis underneath.
//
//   1f1b  p=2 m=2 v=1  makespan 6  bubble rate 33.3%
//   stage 0 |F0  F1  ....BW0 ....BW1 |
//   stage 1 |....F0  BW0 F1  BW1 ....|
//            0       2       4       6

namespace pipesched {

struct terminal_options {
  /// Total line width in characters; 0 = $COLUMNS when set to a number >= 20, else 100.
  std::size_t width = 0;
  bool color = false;    ///< ANSI colours per op kind (F blue, B cyan, W green, BW magenta)
  bool title = true;     ///< first line: name, shape, makespan, bubble rate
  bool axis = true;      ///< last line: time labels
  int chunk_label = -1;  ///< show the local chunk in labels ("F3.1"): 1 yes, 0 no, -1 when v > 1
};

namespace detail {

inline std::size_t terminal_width(std::size_t requested) {
  if (requested != 0) {
    return requested;
  }
  if (const char* c = std::getenv("COLUMNS")) {
    char* end = nullptr;
    const long v = std::strtol(c, &end, 10);
    if (end != c && *end == '\0' && v >= 20 && v <= 100000) {
      return static_cast<std::size_t>(v);
    }
  }
  return 100;
}

inline fmt::text_style kind_style(op_kind k) {
  switch (k) {
    case op_kind::forward:
      return fmt::bg(fmt::terminal_color::blue) | fmt::fg(fmt::terminal_color::bright_white);
    case op_kind::backward_input:
      return fmt::bg(fmt::terminal_color::cyan) | fmt::fg(fmt::terminal_color::black);
    case op_kind::backward_weight:
      return fmt::bg(fmt::terminal_color::green) | fmt::fg(fmt::terminal_color::black);
    case op_kind::backward_full:
      return fmt::bg(fmt::terminal_color::magenta) | fmt::fg(fmt::terminal_color::bright_white);
    default:
      return fmt::bg(fmt::terminal_color::white) | fmt::fg(fmt::terminal_color::black);
  }
}

}  // namespace detail

/// Renders `tl` (the timing of `sched`) as text, scaled to the width: the scale is one label
/// width per shortest op when that fits, else whatever fits. Zero-length ops (comm ops under a
/// cost model) are not drawn. Deterministic for a given width; ends with a newline.
inline std::string render_timeline(const schedule& sched,
                                   const timeline& tl,
                                   const terminal_options& opts = {}) {
  const bool chunked = opts.chunk_label == 1 || (opts.chunk_label == -1 && sched.chunks() > 1);
  const std::size_t p = tl.stages.size();
  const std::string last_label = fmt::format("stage {} |", p == 0 ? 0 : p - 1);
  const std::size_t prefix = last_label.size();
  const std::size_t width = detail::terminal_width(opts.width);
  const std::size_t avail = width > prefix + 1 + 8 ? width - prefix - 1 : 8;
  const double makespan = tl.makespan();

  std::size_t max_label = 1;
  double min_dur = 0.0;
  for (const auto& st : tl.stages) {
    for (const timed_op& t : st) {
      max_label = std::max(max_label, to_string(t.o, chunked).size());
      if (t.duration() > 0.0 && (min_dur == 0.0 || t.duration() < min_dur)) {
        min_dur = t.duration();
      }
    }
  }
  double scale = 1.0;  // characters per time unit
  if (makespan > 0.0) {
    scale = min_dur > 0.0 ? static_cast<double>(max_label + 1) / min_dur : 1.0;
    scale = std::min(scale, static_cast<double>(avail) / makespan);
  }
  const auto col = [&](double t) { return static_cast<std::size_t>(std::lround(t * scale)); };
  const std::size_t cols = col(makespan);

  std::string out;
  if (opts.title) {
    out += fmt::format("{}  p={} m={} v={}  makespan {:.6g}  bubble rate {:.1f}%\n", sched.name(),
                       sched.stages(), sched.microbatches(), sched.chunks(), makespan,
                       100.0 * tl.bubble_rate());
  }
  for (std::size_t s = 0; s < p; ++s) {
    // One cell per column: the text, and the op kind colouring it (none for idle).
    std::string row(cols, '.');
    std::vector<int> kind(cols, -1);
    for (const timed_op& t : tl.stages[s]) {
      if (!(t.duration() > 0.0)) {
        continue;
      }
      const std::size_t c0 = std::min(col(t.start), cols);
      std::size_t c1 = std::min(std::max(col(t.end), c0 + 1), cols);
      if (c0 >= c1) {
        continue;
      }
      const std::size_t w = c1 - c0;
      std::string label = to_string(t.o, chunked);
      if (label.size() > (w > 1 ? w - 1 : 1)) {
        label.resize(w > 1 ? w - 1 : 1);
      }
      for (std::size_t c = c0; c < c1; ++c) {
        row[c] = c - c0 < label.size() ? label[c - c0] : ' ';
        kind[c] = static_cast<int>(t.o.kind);
      }
    }
    out += fmt::format("{:>{}}", fmt::format("stage {} |", s), prefix);
    if (!opts.color) {
      out += row;
    } else {
      std::size_t c = 0;
      while (c < cols) {
        std::size_t e = c;
        // A run of one kind; a new block of the same kind starts where its label starts, which
        // is fine to merge: only the colour is applied to the run.
        while (e < cols && kind[e] == kind[c]) {
          ++e;
        }
        const std::string piece = row.substr(c, e - c);
        if (kind[c] < 0) {
          out += piece;
        } else {
          out += fmt::format(detail::kind_style(static_cast<op_kind>(kind[c])), "{}", piece);
        }
        c = e;
      }
    }
    out += "|\n";
  }
  if (opts.axis && cols > 0) {
    // Labels at round times, at least 8 columns apart.
    std::string axis(prefix + cols + 8, ' ');
    const double raw = 8.0 / scale;
    double step = std::pow(10.0, std::floor(std::log10(raw)));
    for (double f : {1.0, 2.0, 5.0, 10.0}) {
      if (step * f >= raw) {
        step *= f;
        break;
      }
    }
    std::size_t used_until = 0;
    for (double k = 0.0; k * step <= makespan * (1.0 + 1e-9); k += 1.0) {
      const double t = k * step;
      const std::string lab = fmt::format("{}", t);
      const std::size_t at = prefix + col(t);
      if (at < used_until || at + lab.size() > axis.size()) {
        continue;
      }
      axis.replace(at, lab.size(), lab);
      used_until = at + lab.size() + 1;
    }
    while (!axis.empty() && axis.back() == ' ') {
      axis.pop_back();
    }
    out += axis;
    out += '\n';
  }
  return out;
}

/// A schedule alone, drawn on the unit-step grid (every op one step, see unit_step_timeline).
inline std::string render_schedule(const schedule& sched, const terminal_options& opts = {}) {
  return render_timeline(sched, unit_step_timeline(sched), opts);
}

}  // namespace pipesched
