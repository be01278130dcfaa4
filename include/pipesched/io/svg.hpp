#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "pipesched/io/text.hpp"
#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

// SVG timeline, the figure the papers draw: a row per stage, a rectangle per op placed by time,
// colours by kind (F, B, W, BW, comm) with lighter shades for higher chunks, the micro-batch
// number inside each block where it fits, idle time as the grey row background, a time axis,
// a legend and a title; optionally each stage's live-memory curve under its row.
// Output is deterministic (fixed number formatting, no timestamps) and well-formed XML.
// Op rectangles carry class="op", legend swatches class="legend". An overlapped pair
// (shares_slot_with_next) is a <g class="pair"> holding its two ops as the upper and lower half
// of its slot and a frame (class="pair-frame") around both.

namespace pipesched {

struct svg_options {
  double plot_width = 960.0;  ///< pixels for the time range [0, makespan]
  double row_height = 24.0;   ///< pixels per stage row
  /// Live memory per stage (memory_curves() or the memory checker); drawn as a step curve
  /// under each row, all stages on one scale, when not null.
  const std::vector<std::vector<memory_sample>>* memory = nullptr;
  double memory_height = 28.0;  ///< pixels of each memory strip
  std::string title{};          ///< overrides the generated title when not empty
};

namespace detail {

/// Fixed formatting for coordinates: at most two decimals, no trailing zeros.
inline std::string svg_num(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') {
    s.pop_back();
  }
  if (s.back() == '.') {
    s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

inline std::string xml_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

struct rgb {
  int r, g, b;
};

inline rgb kind_colour(op_kind k) noexcept {
  switch (k) {
    case op_kind::forward:
      return {0x3b, 0x75, 0xaf};  // blue
    case op_kind::backward_input:
      return {0x2a, 0x9d, 0x8f};  // teal
    case op_kind::backward_weight:
      return {0x6a, 0xa8, 0x4f};  // green
    case op_kind::backward_full:
      return {0xd9, 0x5f, 0x43};  // red-orange
    case op_kind::recompute:
      return {0xe0, 0xa8, 0x2e};  // amber: a forward run again
    default:
      return {0x8c, 0x8c, 0x8c};  // grey: communication
  }
}

/// The kind's colour, mixed towards white by chunk: chunk 0 full, the last chunk about 45%.
inline std::string shade(op_kind k, std::uint32_t chunk, std::uint32_t chunks) {
  const rgb c = kind_colour(k);
  const double f = chunks > 1 ? 0.45 * static_cast<double>(chunk) / (chunks - 1) : 0.0;
  auto mix = [&](int x) { return static_cast<int>(std::lround(x + (255 - x) * f)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(c.r), mix(c.g), mix(c.b));
}

/// The document's opening tag and white background, `width` × `height` px (every pipesched SVG).
inline std::string svg_open(double width, double height) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect x=\"0\" y=\"0\" width=\"{0}\" "
      "height=\"{1}\" fill=\"#ffffff\"/>\n",
      svg_num(width), svg_num(height));
}

/// Where the parts of the timeline picture go, in px, and its time scale (px per time unit).
struct svg_frame {
  double makespan = 0.0;
  double scale = 1.0;
  double left = 72.0;  ///< x of time 0
  double top = 44.0;   ///< y of stage 0's row
  double gap = 6.0;
  double band = 0.0;  ///< px per stage: its row, its memory strip (if any) and gaps
  double axis_y = 0.0;
  double legend_y = 0.0;
  double width = 0.0;
  double height = 0.0;
};

inline svg_frame svg_frame_of(const timeline& tl, std::uint32_t p, const svg_options& opts) {
  svg_frame f;
  f.makespan = tl.makespan();
  f.scale = f.makespan > 0.0 ? opts.plot_width / f.makespan : 1.0;
  const bool mem = opts.memory != nullptr;
  f.band = opts.row_height + (mem ? opts.memory_height + f.gap : 0.0) + f.gap;
  const double plot_bottom = f.top + f.band * p;
  f.axis_y = plot_bottom + 4.0;
  f.legend_y = f.axis_y + 34.0;
  f.width = f.left + opts.plot_width + 24.0;
  f.height = f.legend_y + 28.0;
  return f;
}

/// One op's rectangle at (x, y), w × h px, with its micro-batch number inside where it fits
/// (smaller in a pair's halves).
inline std::string svg_op(const timed_op& o,
                          stage_index s,
                          std::uint32_t v,
                          double x,
                          double y,
                          double w,
                          double h,
                          bool pair) {
  std::string out = fmt::format(
      "<rect class=\"op\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
      "stroke=\"#ffffff\" stroke-width=\"0.5\"><title>stage {} op {}: {} chunk {} [{}, "
      "{}]</title></rect>\n",
      svg_num(x), svg_num(y), svg_num(w), svg_num(h), shade(o.o.kind, o.o.chunk, v), s, o.index,
      to_string(o.o), o.o.chunk, svg_num(o.start), svg_num(o.end));
  const std::string label = std::to_string(o.o.mb);
  // About 6.5 px per digit at font-size 11 (a pair's halves: 9), plus a little padding.
  const double font = pair ? 9.0 : 11.0;
  const double digit = pair ? 5.3 : 6.5;
  if (w >= digit * static_cast<double>(label.size()) + 3.0 && h >= font) {
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" dominant-baseline=\"middle\"{} "
        "fill=\"#ffffff\">{}</text>\n",
        svg_num(x + w / 2.0), svg_num(y + h / 2.0), pair ? " font-size=\"9\"" : "", label);
  }
  return out;
}

/// The slot of op i of stage s's row (top at y): the op, or, when it shares its slot with the
/// next op, the overlapped pair, its first op in the upper half and the second in the lower
/// half, framed together. Returns the ops it drew (1 or 2).
inline std::size_t svg_slot(std::string& out,
                            std::span<const timed_op> row,
                            std::size_t i,
                            stage_index s,
                            double y,
                            std::uint32_t v,
                            const svg_frame& f,
                            const svg_options& opts) {
  const timed_op& t = row[i];
  const double x = f.left + t.start * f.scale;
  // Zero-length ops (comm under a cost model) stay visible as a 1.5 px sliver.
  const double w = std::max(t.duration() * f.scale, 1.5);
  const bool pair = shares_slot_with_next(row, i);
  const std::size_t n = pair ? 2 : 1;
  const double h = opts.row_height / static_cast<double>(n);
  if (pair) {
    out += fmt::format(
        "<g class=\"pair\"><title>stage {} ops {} and {}: {} overlapped with {} [{}, "
        "{}]</title>\n",
        s, t.index, row[i + 1].index, to_string(t.o, v > 1), to_string(row[i + 1].o, v > 1),
        svg_num(t.start), svg_num(t.end));
  }
  for (std::size_t k = 0; k < n; ++k) {
    out += svg_op(row[i + k], s, v, x, y + h * static_cast<double>(k), w, h, pair);
  }
  if (pair) {
    out += fmt::format(
        "<rect class=\"pair-frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
        "fill=\"none\" stroke=\"#222222\" stroke-width=\"1\"/>\n</g>\n",
        svg_num(x), svg_num(y), svg_num(w), svg_num(opts.row_height));
  }
  return n;
}

/// A stage's live memory as a step curve in its strip under the row (top at y), on the scale
/// of `peak`, the highest of all stages, and the stage's own peak beside it.
inline std::string svg_memory_curve(std::span<const memory_sample> curve,
                                    double y,
                                    double peak,
                                    const svg_frame& f,
                                    const svg_options& opts) {
  const double base = y + opts.row_height + f.gap + opts.memory_height;
  auto point = [&](double t, double live) {
    return svg_num(f.left + t * f.scale) + "," + svg_num(base - live / peak * opts.memory_height);
  };
  std::string pts;
  double last = 0.0;
  for (const memory_sample& x : curve) {
    if (!pts.empty()) {
      pts += " " + point(x.time, last) + " ";  // a step: along, then up or down
    }
    pts += point(x.time, x.live);
    last = x.live;
  }
  pts += " " + point(f.makespan, last);
  return fmt::format(
             "<polyline class=\"memory\" points=\"{}\" fill=\"none\" stroke=\"#7b3294\" "
             "stroke-width=\"1.2\"/>\n",
             pts) +
         fmt::format(
             "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"9\" fill=\"#7b3294\">peak "
             "{}</text>\n",
             svg_num(f.left - 8.0), svg_num(base - 2.0), svg_num(peak_of(curve)));
}

/// Stage s's group: its name, its row (the background is the idle time: every op is drawn over
/// it), its ops, and its memory curve when there is one to draw.
inline std::string svg_stage(const timeline& tl,
                             stage_index s,
                             std::uint32_t v,
                             double peak,
                             const svg_frame& f,
                             const svg_options& opts) {
  const double y = f.top + f.band * s;
  std::string out = fmt::format("<g class=\"stage\" data-stage=\"{}\">\n", s);
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">stage "
      "{}</text>\n",
      svg_num(f.left - 8.0), svg_num(y + opts.row_height / 2.0), s);
  out += fmt::format(
      "<rect class=\"row\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ececec\"/>\n",
      svg_num(f.left), svg_num(y), svg_num(f.makespan * f.scale), svg_num(opts.row_height));
  const auto& row = tl.stages[s];
  for (std::size_t i = 0; i < row.size();) {
    i += svg_slot(out, row, i, s, y, v, f, opts);
  }
  if (opts.memory != nullptr && s < opts.memory->size() && peak > 0.0) {
    out += svg_memory_curve((*opts.memory)[s], y, peak, f, opts);
  }
  out += "</g>\n";
  return out;
}

/// The time axis with ticks at round values, about every 80 px.
inline std::string svg_axis(const svg_frame& f) {
  std::string out = "<g class=\"axis\">\n";
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333333\"/>\n",
                     svg_num(f.left), svg_num(f.axis_y), svg_num(f.left + f.makespan * f.scale),
                     svg_num(f.axis_y));
  if (f.makespan > 0.0) {
    const double raw = 80.0 / f.scale;
    double step = std::pow(10.0, std::floor(std::log10(raw)));
    for (double m : {1.0, 2.0, 5.0, 10.0}) {
      if (step * m >= raw) {
        step *= m;
        break;
      }
    }
    for (double k = 0.0; k * step <= f.makespan * (1.0 + 1e-9); k += 1.0) {
      const double x = f.left + k * step * f.scale;
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333333\"/><text x=\"{0}\" "
          "y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
          svg_num(x), svg_num(f.axis_y), svg_num(f.axis_y + 4.0), svg_num(f.axis_y + 16.0),
          svg_num(k * step));
    }
  }
  out += "</g>\n";
  return out;
}

/// The legend's entries in their fixed order: the op kinds (all comm kinds as one), then the
/// overlapped pair's frame.
inline constexpr std::array<op_kind, 6> svg_legend_kind = {
    op_kind::forward,       op_kind::backward_input, op_kind::backward_weight,
    op_kind::backward_full, op_kind::send_forward,   op_kind::recompute};
inline constexpr std::array<std::string_view, 6> svg_legend_text = {
    "F forward", "B input gradient", "W weight gradient", "BW full backward",
    "comm",      "R recompute"};

/// The legend entry of an op kind: an index into svg_legend_kind.
inline std::size_t svg_legend_slot(op_kind k) noexcept {
  switch (k) {
    case op_kind::forward:
      return 0;
    case op_kind::backward_input:
      return 1;
    case op_kind::backward_weight:
      return 2;
    case op_kind::backward_full:
      return 3;
    case op_kind::recompute:
      return 5;
    default:
      return 4;
  }
}

/// The legend: the kinds the schedule uses and the overlapped pair when it has one, each entry
/// as wide as its text; "lighter = later chunk" when v > 1.
inline std::string svg_legend(const timeline& tl, std::uint32_t v, const svg_frame& f) {
  std::array<bool, svg_legend_kind.size()> used{};
  bool pairs = false;
  for (const auto& st : tl.stages) {
    for (std::size_t i = 0; i < st.size(); ++i) {
      used[svg_legend_slot(st[i].o.kind)] = true;
      pairs = pairs || shares_slot_with_next(st, i);
    }
  }
  std::string out = "<g class=\"legend\">\n";
  const double y = f.legend_y;
  double lx = f.left;
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) {
      continue;
    }
    out += fmt::format(
        "<rect class=\"legend\" x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/><text "
        "x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n",
        svg_num(lx), svg_num(y), shade(svg_legend_kind[i], 0, 1), svg_num(lx + 19.0),
        svg_num(y + 7.0), svg_legend_text[i]);
    lx += 40.0 + 6.5 * static_cast<double>(svg_legend_text[i].size());
  }
  if (pairs) {
    static constexpr std::string_view pair_text = "overlapped pair";
    out += fmt::format(
        "<rect class=\"legend pair-frame\" x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" "
        "fill=\"#ffffff\" stroke=\"#222222\" stroke-width=\"1\"/><line x1=\"{}\" y1=\"{}\" "
        "x2=\"{}\" y2=\"{}\" stroke=\"#222222\" stroke-width=\"0.5\"/><text x=\"{}\" y=\"{}\" "
        "dominant-baseline=\"middle\">{}</text>\n",
        svg_num(lx), svg_num(y), svg_num(lx), svg_num(y + 7.0), svg_num(lx + 14.0),
        svg_num(y + 7.0), svg_num(lx + 19.0), svg_num(y + 7.0), pair_text);
    lx += 40.0 + 6.5 * static_cast<double>(pair_text.size());
  }
  if (v > 1) {
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\" fill=\"#555555\">lighter = later "
        "chunk</text>\n",
        svg_num(lx), svg_num(y + 7.0));
  }
  out += "</g>\n";
  return out;
}

}  // namespace detail

/// Renders `tl` (the timing of `sched`) as a standalone SVG document.
inline std::string to_svg(const schedule& sched, const timeline& tl, const svg_options& opts = {}) {
  using detail::svg_num;
  if (tl.stages.size() != sched.stages()) {
    detail::fail("to_svg: timeline has ", tl.stages.size(), " stages, schedule ", sched.stages());
  }
  if (!(opts.plot_width > 0.0) || !(opts.row_height > 0.0) || !(opts.memory_height >= 0.0)) {
    detail::fail("to_svg: plot_width, row_height must be > 0 and memory_height >= 0");
  }
  const std::uint32_t p = sched.stages();
  const std::uint32_t v = sched.chunks();
  const detail::svg_frame f = detail::svg_frame_of(tl, p, opts);

  std::string out = detail::svg_open(f.width, f.height);
  const std::string title =
      opts.title.empty()
          ? fmt::format("{}: p={} m={} v={}, makespan {}, bubble rate {:.1f}%", sched.name(), p,
                        sched.microbatches(), v, format_time(f.makespan), 100.0 * tl.bubble_rate())
          : opts.title;
  out += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                     svg_num(f.left), detail::xml_escape(title));
  // One memory scale for all stages: the highest peak.
  double peak = 0.0;
  if (opts.memory != nullptr) {
    for (const auto& curve : *opts.memory) {
      peak = std::max(peak, peak_of(curve));
    }
  }
  for (stage_index s = 0; s < p; ++s) {
    out += detail::svg_stage(tl, s, v, peak, f, opts);
  }
  out += detail::svg_axis(f);
  out += detail::svg_legend(tl, v, f);
  out += "</svg>\n";
  return out;
}

/// A report_schedule() result as SVG: its simulated timeline with the memory checker's curve
/// under each stage (opts.memory is replaced by it). Throws invalid_argument when the schedule
/// did not run to the end (picture_of).
inline std::string to_svg(const schedule& sched,
                          const schedule_report& rep,
                          const svg_options& opts = {}) {
  const report_picture pic = picture_of(sched, rep, "to_svg");
  svg_options o = opts;
  o.memory = &pic.memory;
  return to_svg(sched, pic.tl, o);
}

}  // namespace pipesched
