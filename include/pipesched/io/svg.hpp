#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

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
  const double makespan = tl.makespan();
  const double scale = makespan > 0.0 ? opts.plot_width / makespan : 1.0;
  const bool mem = opts.memory != nullptr;
  const double left = 72.0;
  const double top = 44.0;
  const double gap = 6.0;
  const double band = opts.row_height + (mem ? opts.memory_height + gap : 0.0) + gap;
  const double plot_bottom = top + band * p;
  const double axis_y = plot_bottom + 4.0;
  const double legend_y = axis_y + 34.0;
  const double width = left + opts.plot_width + 24.0;
  const double height = legend_y + 28.0;

  std::string out;
  out += detail::svg_open(width, height);
  const std::string title =
      opts.title.empty()
          ? fmt::format("{}: p={} m={} v={}, makespan {}, bubble rate {:.1f}%", sched.name(), p,
                        sched.microbatches(), v, svg_num(makespan), 100.0 * tl.bubble_rate())
          : opts.title;
  out += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                     svg_num(left), detail::xml_escape(title));

  double peak = 0.0;
  if (mem) {
    for (const auto& curve : *opts.memory) {
      peak = std::max(peak, peak_of(curve));
    }
  }
  for (stage_index s = 0; s < p; ++s) {
    const double y = top + band * s;
    out += fmt::format("<g class=\"stage\" data-stage=\"{}\">\n", s);
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">stage "
        "{}</text>\n",
        svg_num(left - 8.0), svg_num(y + opts.row_height / 2.0), s);
    // The row background is the idle time: every op is drawn over it.
    out += fmt::format(
        "<rect class=\"row\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ececec\"/>\n",
        svg_num(left), svg_num(y), svg_num(makespan * scale), svg_num(opts.row_height));
    const auto& row = tl.stages[s];
    for (std::size_t i = 0; i < row.size(); ++i) {
      const timed_op& t = row[i];
      const double x = left + t.start * scale;
      // Zero-length ops (comm under a cost model) stay visible as a 1.5 px sliver.
      const double w = std::max(t.duration() * scale, 1.5);
      // An overlapped pair shares one slot: its first op in the upper half, the second in
      // the lower half, framed together.
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
        const timed_op& o = row[i + k];
        const double oy = y + h * static_cast<double>(k);
        out += fmt::format(
            "<rect class=\"op\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
            "stroke=\"#ffffff\" stroke-width=\"0.5\"><title>stage {} op {}: {} chunk {} [{}, "
            "{}]</title></rect>\n",
            svg_num(x), svg_num(oy), svg_num(w), svg_num(h), detail::shade(o.o.kind, o.o.chunk, v),
            s, o.index, to_string(o.o), o.o.chunk, svg_num(o.start), svg_num(o.end));
        const std::string label = std::to_string(o.o.mb);
        // About 6.5 px per digit at font-size 11 (a pair's halves: 9), plus a little padding.
        const double font = pair ? 9.0 : 11.0;
        const double digit = pair ? 5.3 : 6.5;
        if (w >= digit * static_cast<double>(label.size()) + 3.0 && h >= font) {
          out += fmt::format(
              "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" dominant-baseline=\"middle\"{} "
              "fill=\"#ffffff\">{}</text>\n",
              svg_num(x + w / 2.0), svg_num(oy + h / 2.0), pair ? " font-size=\"9\"" : "", label);
        }
      }
      if (pair) {
        out += fmt::format(
            "<rect class=\"pair-frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
            "fill=\"none\" stroke=\"#222222\" stroke-width=\"1\"/>\n</g>\n",
            svg_num(x), svg_num(y), svg_num(w), svg_num(opts.row_height));
        ++i;
      }
    }
    if (mem && s < opts.memory->size() && peak > 0.0) {
      const double base = y + opts.row_height + gap + opts.memory_height;
      const auto& curve = (*opts.memory)[s];
      auto point = [&](double t, double live) {
        return svg_num(left + t * scale) + "," + svg_num(base - live / peak * opts.memory_height);
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
      pts += " " + point(makespan, last);
      out += fmt::format(
          "<polyline class=\"memory\" points=\"{}\" fill=\"none\" stroke=\"#7b3294\" "
          "stroke-width=\"1.2\"/>\n",
          pts);
      out += fmt::format(
          "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"9\" fill=\"#7b3294\">peak "
          "{}</text>\n",
          svg_num(left - 8.0), svg_num(base - 2.0), svg_num(peak_of(curve)));
    }
    out += "</g>\n";
  }

  // Time axis with ticks at round values, about every 80 px.
  out += "<g class=\"axis\">\n";
  out += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333333\"/>\n",
                     svg_num(left), svg_num(axis_y), svg_num(left + makespan * scale),
                     svg_num(axis_y));
  if (makespan > 0.0) {
    const double raw = 80.0 / scale;
    double step = std::pow(10.0, std::floor(std::log10(raw)));
    for (double f : {1.0, 2.0, 5.0, 10.0}) {
      if (step * f >= raw) {
        step *= f;
        break;
      }
    }
    for (double k = 0.0; k * step <= makespan * (1.0 + 1e-9); k += 1.0) {
      const double x = left + k * step * scale;
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333333\"/><text x=\"{0}\" "
          "y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
          svg_num(x), svg_num(axis_y), svg_num(axis_y + 4.0), svg_num(axis_y + 16.0),
          svg_num(k * step));
    }
  }
  out += "</g>\n";

  // Legend: the kinds the schedule uses, in a fixed order.
  std::array<bool, 6> used{};
  auto slot = [](op_kind k) -> std::size_t {
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
  };
  bool pairs = false;
  for (const auto& st : tl.stages) {
    for (std::size_t i = 0; i < st.size(); ++i) {
      used[slot(st[i].o.kind)] = true;
      pairs = pairs || shares_slot_with_next(st, i);
    }
  }
  static constexpr std::array<op_kind, 6> legend_kind = {
      op_kind::forward,       op_kind::backward_input, op_kind::backward_weight,
      op_kind::backward_full, op_kind::send_forward,   op_kind::recompute};
  static constexpr std::array<std::string_view, 6> legend_text = {
      "F forward", "B input gradient", "W weight gradient", "BW full backward",
      "comm",      "R recompute"};
  out += "<g class=\"legend\">\n";
  double lx = left;
  for (std::size_t i = 0; i < used.size(); ++i) {
    if (!used[i]) {
      continue;
    }
    out += fmt::format(
        "<rect class=\"legend\" x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" fill=\"{}\"/><text "
        "x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>\n",
        svg_num(lx), svg_num(legend_y), detail::shade(legend_kind[i], 0, 1), svg_num(lx + 19.0),
        svg_num(legend_y + 7.0), legend_text[i]);
    lx += 40.0 + 6.5 * static_cast<double>(legend_text[i].size());
  }
  if (pairs) {
    static constexpr std::string_view pair_text = "overlapped pair";
    out += fmt::format(
        "<rect class=\"legend pair-frame\" x=\"{}\" y=\"{}\" width=\"14\" height=\"14\" "
        "fill=\"#ffffff\" stroke=\"#222222\" stroke-width=\"1\"/><line x1=\"{}\" y1=\"{}\" "
        "x2=\"{}\" y2=\"{}\" stroke=\"#222222\" stroke-width=\"0.5\"/><text x=\"{}\" y=\"{}\" "
        "dominant-baseline=\"middle\">{}</text>\n",
        svg_num(lx), svg_num(legend_y), svg_num(lx), svg_num(legend_y + 7.0), svg_num(lx + 14.0),
        svg_num(legend_y + 7.0), svg_num(lx + 19.0), svg_num(legend_y + 7.0), pair_text);
    lx += 40.0 + 6.5 * static_cast<double>(pair_text.size());
  }
  if (v > 1) {
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\" fill=\"#555555\">lighter = later "
        "chunk</text>\n",
        svg_num(lx), svg_num(legend_y + 7.0));
  }
  out += "</g>\n</svg>\n";
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
