#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/io/svg.hpp"
#include "pipesched/ir/error.hpp"

// SVG picture of sampled iteration times (`pipesched whatif --format svg`): the histogram
// (share of each series' samples per bin, the series' bars side by side in each bin) above the
// empirical CDF (a step path per series), one colour per series, both panels on one time axis,
// and a legend with each series' name, mean, p50 and p99 (stats_of, the numbers `whatif`
// prints). Deterministic and well-formed XML, like to_svg. Bars carry class="bar", CDF paths
// class="cdf", legend entries class="legend-entry"; each has data-series="i".

namespace pipesched {

/// One schedule's samples (e.g. robustness_result::samples).
struct distribution_series {
  std::string name;
  std::vector<double> samples;
};

struct distribution_svg_options {
  double plot_width = 720.0;    ///< pixels of the time axis
  double panel_height = 180.0;  ///< pixels of each panel (histogram, CDF)
  std::size_t bins = 0;         ///< histogram bins; 0: about sqrt(N) of the largest series, 5..50
  std::string unit = "time units";  ///< the time unit named on the axis
  std::string title{};              ///< overrides the generated title when not empty
};

namespace detail {

/// A round tick step (1, 2 or 5 times a power of ten) of at least `raw`.
inline double distribution_tick_step(double raw) {
  double step = std::pow(10.0, std::floor(std::log10(raw)));
  for (double f : {1.0, 2.0, 5.0, 10.0}) {
    if (step * f >= raw * (1.0 - 1e-12)) {
      return step * f;
    }
  }
  return step * 10.0;
}

/// Tick labels: up to six significant digits, so close values (108.15 and 108.2) stay apart.
inline std::string distribution_label(double v) {
  return std::abs(v) < 1e-12 ? std::string("0") : fmt::format("{:.6g}", v);
}

inline std::string series_colour(std::size_t i) {
  static constexpr std::array<std::string_view, 8> palette = {
      "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  return std::string(palette[i % palette.size()]);
}

}  // namespace detail

/// The histogram and CDF of each series' samples as one SVG document. An empty list, or a
/// series without samples, is drawn as an empty plot with the legend saying so. Throws
/// invalid_argument for a sample that is not finite (NaN, ±inf), naming the series and index,
/// and for non-positive plot sizes.
inline std::string to_distribution_svg(const std::vector<distribution_series>& series,
                                       const distribution_svg_options& opts = {}) {
  using detail::svg_num;
  if (!(opts.plot_width > 0.0) || !(opts.panel_height > 0.0) || !std::isfinite(opts.plot_width) ||
      !std::isfinite(opts.panel_height)) {
    detail::fail("to_distribution_svg: plot_width and panel_height must be finite and > 0");
  }
  double lo = 0.0;
  double hi = 0.0;
  std::size_t largest = 0;
  bool any = false;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& xs = series[k].samples;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (!std::isfinite(xs[i])) {
        detail::fail("to_distribution_svg: series \"", series[k].name, "\" sample ", i, " is ",
                     xs[i], ": every sample must be finite");
      }
      lo = any ? std::min(lo, xs[i]) : xs[i];
      hi = any ? std::max(hi, xs[i]) : xs[i];
      any = true;
    }
    largest = std::max(largest, xs.size());
  }
  if (!any) {
    lo = 0.0;
    hi = 1.0;
  } else if (hi - lo <= 1e-12 * std::max(1.0, std::abs(hi))) {
    // All samples equal (no noise, or one sample): a window of ±1 % around the value.
    const double pad = std::abs(hi) > 0.0 ? 0.01 * std::abs(hi) : 0.5;
    lo -= pad;
    hi += pad;
  }
  const std::size_t bins =
      opts.bins > 0
          ? opts.bins
          : std::clamp<std::size_t>(
                static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(largest)))), 5,
                50);
  const double bin_width = (hi - lo) / static_cast<double>(bins);
  auto bin_of = [&](double x) {
    const auto b = static_cast<std::size_t>(std::floor((x - lo) / bin_width));
    return std::min(b, bins - 1);
  };

  // Each series' share of its samples per bin, in percent.
  std::vector<std::vector<double>> share(series.size(), std::vector<double>(bins, 0.0));
  double top_share = 0.0;
  for (std::size_t k = 0; k < series.size(); ++k) {
    const auto& xs = series[k].samples;
    for (double x : xs) {
      share[k][bin_of(x)] += 100.0 / static_cast<double>(xs.size());
    }
    for (double s : share[k]) {
      top_share = std::max(top_share, s);
    }
  }
  const double share_step = detail::distribution_tick_step(std::max(top_share, 1.0) / 4.0);
  const double share_top = share_step * std::ceil(std::max(top_share, 1.0) / share_step);

  const double left = 72.0;
  const double hist_top = 48.0;
  const double panel = opts.panel_height;
  const double hist_bottom = hist_top + panel;
  const double cdf_top = hist_bottom + 40.0;
  const double cdf_bottom = cdf_top + panel;
  const double legend_y = cdf_bottom + 52.0;
  const double width = left + opts.plot_width + 32.0;
  const double height =
      legend_y + 20.0 * static_cast<double>(std::max<std::size_t>(series.size(), 1)) + 8.0;
  const double xscale = opts.plot_width / (hi - lo);
  auto x_of = [&](double t) { return left + (t - lo) * xscale; };

  std::string out;
  out += detail::svg_open(width, height);
  std::size_t total = 0;
  for (const auto& s : series) {
    total += s.samples.size();
  }
  const std::string title =
      opts.title.empty()
          ? fmt::format("Iteration time over {} sampled iterations: histogram and CDF", total)
          : opts.title;
  out += fmt::format("<text x=\"{}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                     svg_num(left), detail::xml_escape(title));

  // Panels: frame, y ticks and label.
  auto panel_frame = [&](double top, double bottom, double ytop, double ystep,
                         std::string_view label, std::string_view cls) {
    out += fmt::format("<g class=\"{}\">\n", cls);
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f7f7f7\" "
        "stroke=\"#333333\"/>\n",
        svg_num(left), svg_num(top), svg_num(opts.plot_width), svg_num(bottom - top));
    for (double k = 0.0; k * ystep <= ytop * (1.0 + 1e-9); k += 1.0) {
      const double y = bottom - k * ystep / ytop * (bottom - top);
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333333\"/><text x=\"{3}\" "
          "y=\"{1}\" text-anchor=\"end\" dominant-baseline=\"middle\">{4}</text>\n",
          svg_num(left - 4.0), svg_num(y), svg_num(left), svg_num(left - 6.0),
          detail::distribution_label(k * ystep));
    }
    out += fmt::format(
        "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}"
        "</text>\n",
        svg_num(left - 48.0), svg_num((top + bottom) / 2.0), label);
    out += "</g>\n";
  };
  panel_frame(hist_top, hist_bottom, share_top, share_step, "samples (%)", "histogram-axis");
  panel_frame(cdf_top, cdf_bottom, 100.0, 25.0, "cumulative (%)", "cdf-axis");

  // Histogram bars: in each bin, the series side by side.
  const double slot =
      bin_width * xscale / static_cast<double>(std::max<std::size_t>(series.size(), 1));
  for (std::size_t k = 0; k < series.size(); ++k) {
    out += fmt::format("<g class=\"histogram\" data-series=\"{}\" fill=\"{}\">\n", k,
                       detail::series_colour(k));
    for (std::size_t b = 0; b < bins; ++b) {
      if (share[k][b] <= 0.0) {
        continue;
      }
      const double h = share[k][b] / share_top * panel;
      const double x =
          x_of(lo + static_cast<double>(b) * bin_width) + slot * static_cast<double>(k);
      out += fmt::format(
          "<rect class=\"bar\" data-series=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">"
          "<title>{}: [{}, {}) {:.3g}%</title></rect>\n",
          k, svg_num(x), svg_num(hist_bottom - h), svg_num(std::max(slot - 0.5, 0.5)), svg_num(h),
          detail::xml_escape(series[k].name),
          detail::distribution_label(lo + static_cast<double>(b) * bin_width),
          detail::distribution_label(lo + static_cast<double>(b + 1) * bin_width), share[k][b]);
    }
    out += "</g>\n";
  }

  // Empirical CDF: a step up by 1/N at each sample.
  auto y_cdf = [&](double f) { return cdf_bottom - f * panel; };
  for (std::size_t k = 0; k < series.size(); ++k) {
    std::vector<double> xs = series[k].samples;
    if (xs.empty()) {
      continue;
    }
    std::sort(xs.begin(), xs.end());
    const double n = static_cast<double>(xs.size());
    std::string d = fmt::format("M{} {}", svg_num(x_of(lo)), svg_num(y_cdf(0.0)));
    for (std::size_t i = 0; i < xs.size(); ++i) {
      if (i + 1 < xs.size() && xs[i + 1] == xs[i]) {
        continue;  // equal samples: one step of their combined height
      }
      d += fmt::format("H{}V{}", svg_num(x_of(xs[i])),
                       svg_num(y_cdf(static_cast<double>(i + 1) / n)));
    }
    d += fmt::format("H{}", svg_num(x_of(hi)));
    out += fmt::format(
        "<path class=\"cdf\" data-series=\"{}\" d=\"{}\" fill=\"none\" stroke=\"{}\" "
        "stroke-width=\"1.5\"/>\n",
        k, d, detail::series_colour(k));
  }

  // The shared time axis under both panels.
  const double tick = detail::distribution_tick_step((hi - lo) * 90.0 / opts.plot_width);
  out += "<g class=\"axis\">\n";
  for (double axis_y : {hist_bottom, cdf_bottom}) {
    const double first = std::ceil(lo / tick - 1e-9);
    for (double k = 0.0; (first + k) * tick <= hi + 1e-9 * (hi - lo); k += 1.0) {
      const double t = (first + k) * tick;
      const double x = x_of(t);
      out += fmt::format(
          "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#333333\"/><text x=\"{0}\" "
          "y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
          svg_num(x), svg_num(axis_y), svg_num(axis_y + 4.0), svg_num(axis_y + 16.0),
          detail::distribution_label(t));
    }
  }
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">iteration time ({})</text>\n",
                     svg_num(left + opts.plot_width / 2.0), svg_num(cdf_bottom + 34.0),
                     detail::xml_escape(opts.unit));
  out += "</g>\n";

  // Legend: one line per series, with the numbers whatif prints.
  out += "<g class=\"legend\">\n";
  if (series.empty()) {
    out += fmt::format("<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">no samples</text>\n",
                       svg_num(left), svg_num(legend_y + 7.0));
  }
  for (std::size_t k = 0; k < series.size(); ++k) {
    const double y = legend_y + 20.0 * static_cast<double>(k);
    const sample_stats st = stats_of(series[k].samples);
    const std::string text =
        st.count == 0 ? fmt::format("{}: no samples", series[k].name)
                      : fmt::format("{}: mean {:.6g}, p50 {:.6g}, p99 {:.6g} ({} samples)",
                                    series[k].name, st.mean, st.p50, st.p99, st.count);
    out += fmt::format(
        "<g class=\"legend-entry\" data-series=\"{}\"><rect x=\"{}\" y=\"{}\" width=\"14\" "
        "height=\"14\" fill=\"{}\"/><text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\">{}</text>"
        "</g>\n",
        k, svg_num(left), svg_num(y), detail::series_colour(k), svg_num(left + 19.0),
        svg_num(y + 7.0), detail::xml_escape(text));
  }
  out += "</g>\n</svg>\n";
  return out;
}

}  // namespace pipesched
