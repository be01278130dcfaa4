#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/color.h>
#include <fmt/format.h>

#include "pipesched/io/text.hpp"
#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

// Aligned text timeline: one row per stage, each op a block whose width is proportional to
// its duration, idle time shown as dots, a time axis underneath.
//
//   1f1b  p=2 m=2 v=1  makespan 6  bubble rate 33.3%
//   stage 0 |F0  F1  ....BW0 ....BW1 |
//   stage 1 |....F0  BW0 F1  BW1 ....|
//            0       2       4       6
//
// Every op keeps its full label, never a cut one. When the labels don't fit in one row of the
// width, the time axis is split into windows of even length: blocks of rows, each headed by
// its range ("steps 0 to 13 (1 of 3)"), each fitting the width, cut where no label is. Ops far
// shorter than the typical op (under 1/16 of the duration-weighted median: measured
// microsecond transfers among millisecond computations) don't set the scale; one too narrow
// for its label shows a one-letter key, explained under its window ("stage 1 keys: a=SEND_F3").
// An overlapped pair (one slot, two ops) is one block labelled with both: "F7.0|BW3.1".

namespace pipesched {

struct terminal_options {
  /// Total line width in characters; 0 = $COLUMNS when set to a number >= 20, else 100.
  std::size_t width = 0;
  bool color = false;    ///< ANSI colours per op kind (F blue, B cyan, W green, BW magenta)
  bool title = true;     ///< first line (more when narrow): name, shape, makespan, bubble rate
  bool axis = true;      ///< time labels under the rows (of each window)
  int chunk_label = -1;  ///< show the local chunk in labels ("F3.1"): 1 yes, 0 no, -1 when v > 1
  /// When the labels don't fit in one row of `width`: true splits the time axis into windows
  /// that each fit; false draws one block as wide as the labels need (longer lines than
  /// `width`, for a pager or a file).
  bool wrap = true;
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
    case op_kind::recompute:
      return fmt::bg(fmt::terminal_color::bright_blue) | fmt::fg(fmt::terminal_color::black);
    default:
      return fmt::bg(fmt::terminal_color::white) | fmt::fg(fmt::terminal_color::black);
  }
}

/// Keys for ops drawn too narrow for their label, one namespace per stage and window. B, F, R,
/// S and W are left out so that a key never reads as an op kind, digits so that it never
/// reads as a micro-batch.
inline constexpr std::string_view terminal_keys = "abcdefghijklmnopqrstuvwxyzACDEGHIJKLMNOPQTUVXYZ";

/// An op on the column grid: columns [c0, c1), label and a trailing space when it fits.
struct terminal_block {
  std::size_t c0 = 0;
  std::size_t c1 = 0;
  std::string label;
  op_kind kind = op_kind::forward;
  bool short_op = false;  ///< far shorter than the typical op: not used to choose the scale

  bool fits() const noexcept { return label.size() + 1 <= c1 - c0; }
};

struct terminal_grid {
  std::vector<std::vector<terminal_block>> rows;
  std::size_t cols = 0;
  bool pushed = false;  ///< some op was moved right to keep one column per op
};

/// The label of op i of a stage's row: "F3" ("F3.1" when chunked); an overlapped pair sharing
/// its slot (shares_slot_with_next) is one block labelled with both ops, "F7.0|BW3.1".
inline std::string terminal_label(std::span<const timed_op> row, std::size_t i, bool chunked) {
  std::string label = to_string(row[i].o, chunked);
  if (shares_slot_with_next(row, i)) {
    label += '|' + to_string(row[i + 1].o, chunked);
  }
  return label;
}

/// Whether op i of a row is the second op of a pair, drawn in the block of the op before it.
inline bool terminal_second_of_pair(std::span<const timed_op> row, std::size_t i) {
  return i > 0 && shares_slot_with_next(row, i - 1);
}

inline std::size_t terminal_col(double t, double scale) {
  return static_cast<std::size_t>(std::lround(std::max(t, 0.0) * scale));
}

/// Places the ops with a positive duration at `scale` columns per time unit. An op that would
/// get no column of its own is given one, pushing later ops of its stage right.
inline terminal_grid terminal_place(const timeline& tl,
                                    bool chunked,
                                    double scale,
                                    double short_below) {
  terminal_grid g;
  g.rows.resize(tl.stages.size());
  g.cols = terminal_col(tl.makespan(), scale);
  for (std::size_t s = 0; s < tl.stages.size(); ++s) {
    std::size_t next = 0;
    const auto& row = tl.stages[s];
    for (std::size_t i = 0; i < row.size(); ++i) {
      const timed_op& t = row[i];
      if (!(t.duration() > 0.0) || terminal_second_of_pair(row, i)) {
        continue;
      }
      const std::size_t c0 = std::max(terminal_col(t.start, scale), next);
      const std::size_t c1 = std::max(terminal_col(t.end, scale), c0 + 1);
      g.pushed = g.pushed || c0 != terminal_col(t.start, scale) || c1 != terminal_col(t.end, scale);
      g.rows[s].push_back(
          {c0, c1, terminal_label(row, i, chunked), t.o.kind, t.duration() < short_below});
      next = c1;
      g.cols = std::max(g.cols, c1);
    }
  }
  return g;
}

inline bool terminal_labels_fit(const terminal_grid& g, bool short_ops_too) {
  for (const auto& row : g.rows) {
    for (const terminal_block& b : row) {
      if (!b.fits() && (short_ops_too || !b.short_op)) {
        return false;
      }
    }
  }
  return true;
}

/// "12", "2.5", "0.33": a window boundary or axis time.
inline std::string terminal_time(double t) {
  return fmt::format("{}", std::round(t * 100.0) / 100.0);
}

/// Where the window starting at column `a` ends: at most `limit` columns on, with at most as
/// many narrow ops per stage as there are keys; see the ranking below.
inline std::size_t terminal_cut(const terminal_grid& g,
                                const std::vector<std::size_t>& first,
                                std::size_t a,
                                std::size_t limit) {
  const std::size_t rest = g.cols - a;
  std::size_t b_max = limit >= rest ? g.cols : a + limit;
  for (std::size_t s = 0; s < g.rows.size(); ++s) {
    // One key per stage stays free for a label cut at the window's end.
    std::size_t narrow = 0;
    for (std::size_t i = first[s]; i < g.rows[s].size() && g.rows[s][i].c0 < b_max; ++i) {
      const terminal_block& o = g.rows[s][i];
      if (o.c0 >= a && !o.fits() && ++narrow == terminal_keys.size()) {
        b_max = o.c0;
        break;
      }
    }
  }
  if (b_max == g.cols) {
    return b_max;
  }
  // Per candidate end x: whether a label would be cut, and how many stages have an op going on.
  std::vector<char> in_label(b_max - a + 1, 0);
  std::vector<std::size_t> in_op(b_max - a + 1, 0);
  for (std::size_t s = 0; s < g.rows.size(); ++s) {
    for (std::size_t i = first[s]; i < g.rows[s].size() && g.rows[s][i].c0 < b_max; ++i) {
      const terminal_block& o = g.rows[s][i];
      const std::size_t label_end = o.fits() ? o.c0 + o.label.size() : o.c0 + 1;
      for (std::size_t x = std::max(o.c0 + 1, a + 1); x < o.c1 && x <= b_max; ++x) {
        ++in_op[x - a];
        in_label[x - a] = static_cast<char>(in_label[x - a] || x < label_end);
      }
    }
  }
  // Best: no label cut, then a window of at least half the limit, then the fewest ops cut,
  // then the end nearest the even split (at or after it first, so the count doesn't grow).
  const std::size_t windows = limit >= rest ? 1 : (rest + limit - 1) / limit;
  const std::size_t even = a + (rest + windows - 1) / windows;
  const std::size_t half = a + (b_max - a) / 2;
  const auto rank = [&](std::size_t x) {
    const std::size_t off = x >= even ? x - even : (b_max - a) + (even - x);
    return std::tuple(in_label[x - a], x <= half, in_op[x - a], off);
  };
  std::size_t best = b_max;
  for (std::size_t x = a + 1; x <= b_max; ++x) {
    if (rank(x) < rank(best)) {
      best = x;
    }
  }
  return best;
}

/// What the scale is chosen from: the longest label, the shortest op, and the duration under
/// which an op counts as short (see terminal_short_below).
struct terminal_op_stats {
  std::size_t max_label = 1;
  double min_dur = 0.0;
  double short_below = 0.0;
};

/// 1/16 of the duration-weighted median: ops far shorter than it don't set the scale, since
/// they would stretch the picture by orders of magnitude (measured transfers next to
/// computations). 0 when there is no op with a positive duration.
inline double terminal_short_below(std::vector<double> durations) {
  if (durations.empty()) {
    return 0.0;
  }
  std::sort(durations.begin(), durations.end());
  double total = 0.0;
  for (double d : durations) {
    total += d;
  }
  double acc = 0.0;
  for (double d : durations) {
    acc += d;
    if (acc >= total / 2.0) {
      return d / 16.0;
    }
  }
  return 0.0;
}

inline terminal_op_stats terminal_measure(const timeline& tl, bool chunked) {
  terminal_op_stats st;
  std::vector<double> durations;
  for (const auto& row : tl.stages) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      const timed_op& t = row[i];
      if (terminal_second_of_pair(row, i)) {
        continue;
      }
      st.max_label = std::max(st.max_label, terminal_label(row, i, chunked).size());
      if (t.duration() > 0.0) {
        durations.push_back(t.duration());
        if (st.min_dur == 0.0 || t.duration() < st.min_dur) {
          st.min_dur = t.duration();
        }
      }
    }
  }
  st.short_below = terminal_short_below(std::move(durations));
  return st;
}

/// The smallest scale at which the label of every op that isn't short fits its block, or, when
/// more, one label width per shortest such op as far as the width allows.
inline double terminal_label_scale(const timeline& tl,
                                   bool chunked,
                                   double short_below,
                                   std::size_t avail) {
  double full = 0.0;
  std::size_t long_label = 1;
  double long_min = 0.0;
  for (const auto& row : tl.stages) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      const timed_op& t = row[i];
      if (t.duration() > 0.0 && !(t.duration() < short_below) && !terminal_second_of_pair(row, i)) {
        const std::size_t len = terminal_label(row, i, chunked).size();
        full = std::max(full, static_cast<double>(len + 1) / t.duration());
        long_label = std::max(long_label, len);
        long_min = long_min == 0.0 ? t.duration() : std::min(long_min, t.duration());
      }
    }
  }
  return std::max(full, std::min(static_cast<double>(long_label + 1) / long_min,
                                 static_cast<double>(avail) / tl.makespan()));
}

/// The ops on the column grid and the scale (characters per time unit) that put them there.
struct terminal_layout {
  terminal_grid grid;
  double scale = 1.0;
};

/// First the scale of one block at the width (one label width per shortest op when that fits,
/// else whatever fits); when a label does not fit there, the smallest scale at which every
/// label fits, spread over windows.
inline terminal_layout terminal_lay_out(const timeline& tl, bool chunked, std::size_t avail) {
  const terminal_op_stats st = terminal_measure(tl, chunked);
  const double makespan = tl.makespan();
  terminal_layout lay;
  if (makespan > 0.0) {
    lay.scale = st.min_dur > 0.0 ? static_cast<double>(st.max_label + 1) / st.min_dur : 1.0;
    lay.scale = std::min(lay.scale, static_cast<double>(avail) / makespan);
  }
  lay.grid = terminal_place(tl, chunked, lay.scale, st.short_below);
  if (makespan > 0.0 && (lay.grid.pushed || !terminal_labels_fit(lay.grid, true))) {
    lay.scale = terminal_label_scale(tl, chunked, st.short_below, avail);
    // Rounding to columns (and ops pushed by short ones) can take a column from a label.
    for (int attempt = 0; attempt < 8; ++attempt) {
      lay.grid = terminal_place(tl, chunked, lay.scale, st.short_below);
      if (terminal_labels_fit(lay.grid, false)) {
        break;
      }
      lay.scale *= 1.02;
    }
  }
  return lay;
}

/// The title: one line when it fits, else the shape, then the figures (on one line or two).
inline std::string terminal_title(const schedule& sched,
                                  const timeline& tl,
                                  std::string_view unit,
                                  std::size_t width) {
  const double makespan = tl.makespan();
  const std::string shape = fmt::format("{}  p={} m={} v={}", sched.name(), sched.stages(),
                                        sched.microbatches(), sched.chunks());
  // The unit-step grid has no cost model: it counts steps and shows no makespan or bubble
  // rate, which would rank schedules by op count (a fused BW as one step) rather than time.
  const bool steps = unit == "steps";
  const std::string span =
      steps ? fmt::format("{:.6g} steps", makespan) : "makespan " + format_time(makespan);
  const std::string bubble = steps ? std::string("(one per op, untimed)")
                                   : fmt::format("bubble rate {:.1f}%", 100.0 * tl.bubble_rate());
  const std::string stats =
      span + (span.size() + 2 + bubble.size() <= width ? "  " : "\n") + bubble;
  return shape + (shape.size() + 2 + stats.size() <= width ? "  " : "\n") + stats + "\n";
}

/// Moves each stage's first block past the blocks that end by column `b`: they are drawn.
inline void terminal_skip_ended(const terminal_grid& g,
                                std::vector<std::size_t>& first,
                                std::size_t b) {
  for (std::size_t s = 0; s < g.rows.size(); ++s) {
    while (first[s] < g.rows[s].size() && g.rows[s][first[s]].c1 <= b) {
      ++first[s];
    }
  }
}

/// The windows [a, b) of columns, each at most `limit` wide (see terminal_cut); one at least.
inline std::vector<std::pair<std::size_t, std::size_t>> terminal_windows(const terminal_grid& g,
                                                                         std::size_t limit) {
  std::vector<std::pair<std::size_t, std::size_t>> windows;
  std::vector<std::size_t> first(g.rows.size(), 0);
  std::size_t a = 0;
  do {
    const std::size_t b = terminal_cut(g, first, a, limit);
    windows.emplace_back(a, b);
    terminal_skip_ended(g, first, b);
    a = b;
  } while (a < g.cols);
  return windows;
}

/// The time at column `b`, a window's end; the last window ends at the makespan, which the
/// column grid may have rounded down.
inline double terminal_end_time(const terminal_layout& lay, double makespan, std::size_t b) {
  const double t = static_cast<double>(b) / lay.scale;
  return b == lay.grid.cols ? std::max(makespan, t) : t;
}

/// One stage's row in the window [a, b): one cell per column with the op kind colouring it
/// (-1 for idle), and the keys of the ops too narrow for their label ("a=SEND_F3.0").
struct terminal_row {
  std::string text;
  std::vector<int> kind;
  std::vector<std::string> keys;
};

/// Draws the blocks from `first` on that start before `b`.
inline terminal_row terminal_draw_row(std::span<const terminal_block> blocks,
                                      std::size_t first,
                                      std::size_t a,
                                      std::size_t b) {
  const std::size_t n = b - a;
  terminal_row r{std::string(n, '.'), std::vector<int>(n, -1), {}};
  for (std::size_t i = first; i < blocks.size() && blocks[i].c0 < b; ++i) {
    const terminal_block& o = blocks[i];
    for (std::size_t c = std::max(o.c0, a); c < std::min(o.c1, b); ++c) {
      r.text[c - a] = ' ';
      r.kind[c - a] = static_cast<int>(o.kind);
    }
    if (o.c0 < a) {
      continue;  // continued from the previous window, labelled there
    }
    if (o.fits() && o.c0 + o.label.size() <= b) {
      r.text.replace(o.c0 - a, o.label.size(), o.label);
    } else {
      PIPESCHED_ASSERT(r.keys.size() < terminal_keys.size(),
                       "render_timeline: a window holds more narrow ops than keys");
      const char key = terminal_keys[r.keys.size()];
      r.text[o.c0 - a] = key;
      r.keys.push_back(fmt::format("{}={}", key, o.label));
    }
  }
  return r;
}

/// The row's text in the colours of its op kinds, run by run.
inline std::string terminal_paint(const terminal_row& r) {
  std::string out;
  const std::size_t n = r.text.size();
  std::size_t c = 0;
  while (c < n) {
    std::size_t e = c;
    // A run of one kind; a new block of the same kind starts where its label starts, which is
    // fine to merge: only the colour is applied to the run.
    while (e < n && r.kind[e] == r.kind[c]) {
      ++e;
    }
    const std::string piece = r.text.substr(c, e - c);
    if (r.kind[c] < 0) {
      out += piece;
    } else {
      out += fmt::format(kind_style(static_cast<op_kind>(r.kind[c])), "{}", piece);
    }
    c = e;
  }
  return out;
}

/// Appends stage s's keys to `legend`: "stage 1 keys: a=SEND_F3 b=...", wrapped at the width
/// under the head.
inline void terminal_key_legend(std::size_t s,
                                const std::vector<std::string>& keys,
                                std::size_t width,
                                std::vector<std::string>& legend) {
  if (keys.empty()) {
    return;
  }
  const std::string head = fmt::format("stage {} keys:", s);
  std::string line = head;
  for (const std::string& k : keys) {
    if (line.size() > head.size() && line.size() + 1 + k.size() > width) {
      legend.push_back(line);
      line.assign(head.size(), ' ');
    }
    line += ' ';
    line += k;
  }
  legend.push_back(line);
}

/// The time axis under the window [a, b) (n = b - a > 0 columns): labels at round times, at
/// least 8 columns apart, within the width; no trailing spaces.
inline std::string terminal_axis(const terminal_layout& lay,
                                 double makespan,
                                 std::size_t a,
                                 std::size_t b,
                                 std::size_t prefix,
                                 std::size_t width) {
  const std::size_t n = b - a;
  std::string axis(std::min(prefix + n + 8, std::max(width, prefix + n + 1)), ' ');
  const double raw = 8.0 / lay.scale;
  double step = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    if (step * f >= raw) {
      step *= f;
      break;
    }
  }
  const double t_end = terminal_end_time(lay, makespan, b);
  std::size_t used_until = 0;
  for (double k = std::max(0.0, std::ceil(static_cast<double>(a) / lay.scale / step - 1e-9));
       k * step <= t_end * (1.0 + 1e-9); k += 1.0) {
    const double t = k * step;
    const std::string lab = fmt::format("{}", t);
    const std::size_t c = terminal_col(t, lay.scale);
    if (c < a) {
      continue;
    }
    const std::size_t at = prefix + c - a;
    if (at < used_until || at + lab.size() > axis.size()) {
      continue;
    }
    axis.replace(at, lab.size(), lab);
    used_until = at + lab.size() + 1;
  }
  while (!axis.empty() && axis.back() == ' ') {
    axis.pop_back();
  }
  return axis;
}

inline std::string render_terminal(const schedule& sched,
                                   const timeline& tl,
                                   const terminal_options& opts,
                                   std::string_view unit) {
  const bool chunked = opts.chunk_label == 1 || (opts.chunk_label == -1 && sched.chunks() > 1);
  const std::size_t p = tl.stages.size();
  const std::size_t prefix = fmt::format("stage {} |", p == 0 ? 0 : p - 1).size();
  const std::size_t width = terminal_width(opts.width);
  const std::size_t avail = width > prefix + 1 + 8 ? width - prefix - 1 : 8;
  const double makespan = tl.makespan();
  const terminal_layout lay = terminal_lay_out(tl, chunked, avail);
  const terminal_grid& g = lay.grid;

  std::string out;
  if (opts.title) {
    out += terminal_title(sched, tl, unit, width);
  }
  const std::size_t limit = opts.wrap ? avail : std::numeric_limits<std::size_t>::max();
  const std::vector<std::pair<std::size_t, std::size_t>> windows = terminal_windows(g, limit);
  std::vector<std::size_t> first(p, 0);
  for (std::size_t w = 0; w < windows.size(); ++w) {
    const auto [a, b] = windows[w];
    if (windows.size() > 1) {
      out += fmt::format("{}{} {} to {} ({} of {})\n", w == 0 ? "" : "\n", unit,
                         terminal_time(static_cast<double>(a) / lay.scale),
                         terminal_time(terminal_end_time(lay, makespan, b)), w + 1, windows.size());
    }
    std::vector<std::string> legend;
    for (std::size_t s = 0; s < p; ++s) {
      const terminal_row r = terminal_draw_row(g.rows[s], first[s], a, b);
      out += fmt::format("{:>{}}", fmt::format("stage {} |", s), prefix);
      out += opts.color ? terminal_paint(r) : r.text;
      out += "|\n";
      terminal_key_legend(s, r.keys, width, legend);
    }
    terminal_skip_ended(g, first, b);
    if (opts.axis && b > a) {
      out += terminal_axis(lay, makespan, a, b, prefix, width);
      out += '\n';
    }
    for (const std::string& line : legend) {
      out += line;
      out += '\n';
    }
  }
  return out;
}

}  // namespace detail

/// Renders `tl` (the timing of `sched`) as text: one block scaled to the width when every label
/// fits (one label width per shortest op, or less), else windows at the scale where the labels
/// fit (see above). Zero-length ops (comm ops under a cost model) are not drawn. Deterministic
/// for a given width; ends with a newline.
inline std::string render_timeline(const schedule& sched,
                                   const timeline& tl,
                                   const terminal_options& opts = {}) {
  return detail::render_terminal(sched, tl, opts, "time");
}

/// A schedule alone, drawn on the unit-step grid (every op one step, see unit_step_timeline).
inline std::string render_schedule(const schedule& sched, const terminal_options& opts = {}) {
  return detail::render_terminal(sched, unit_step_timeline(sched), opts, "steps");
}

}  // namespace pipesched
