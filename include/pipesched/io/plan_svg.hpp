#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/core.h>

#include "pipesched/io/distribution_svg.hpp"
#include "pipesched/io/plan_text.hpp"
#include "pipesched/io/svg.hpp"
#include "pipesched/plan/plan_types.hpp"

// The planner's Pareto frontier as a picture (`pipesched plan --format svg`): step time against
// the peak memory per GPU of the plans no other evaluated plan beats on both, the usable
// memory as a wall, the chosen plan and the baseline marked.

namespace pipesched {

/// The frontier of `r` for `job` as a standalone SVG document. With nothing evaluated (every
/// candidate over the memory by its bound) and no baseline, a picture of the reason instead
/// (plan_misfit_text): nothing fitting is an answer, in every format.
inline std::string plan_frontier_svg(const training_job& job, const plan_result& r) {
  if (r.frontier.empty() && !r.baseline) {
    return detail::svg_open(720.0, 60.0) +
           fmt::format("<text x=\"10\" y=\"34\" font-size=\"13\">{}: {}</text>\n</svg>\n",
                       detail::xml_escape(job.model.name),
                       detail::xml_escape(plan_misfit_text(job, r)));
  }
  constexpr double gib = 1024.0 * 1024.0 * 1024.0;
  const double usable = job.cluster.usable_memory() / gib;
  double x_max = usable;
  double y_max = 0.0;
  double y_min = std::numeric_limits<double>::infinity();
  auto include = [&](double mem, double t) {
    x_max = std::max(x_max, mem / gib);
    y_max = std::max(y_max, t);
    y_min = std::min(y_min, t);
  };
  for (const plan_frontier_point& f : r.frontier) {
    include(f.peak_memory_bytes, f.step_time_s);
  }
  if (r.baseline) {
    include(r.baseline->peak_memory_bytes, r.baseline->step_time_s);
  }
  // Round axes: memory from 0, time from a round value below the fastest plan.
  const double x_step = detail::distribution_tick_step(x_max * 1.05 / 6.0);
  const double x_top = std::ceil(x_max * 1.05 / x_step) * x_step;
  const double y_span = std::max(y_max - y_min, y_max * 0.05);
  const double y_step = detail::distribution_tick_step(y_span * 1.2 / 5.0);
  const double y_low = std::max(0.0, std::floor((y_min - 0.1 * y_span) / y_step) * y_step);
  const double y_top = std::ceil((y_max + 0.1 * y_span) / y_step) * y_step;
  const double left = 70.0, top = 40.0, width = 640.0, height = 360.0;
  auto px = [&](double mem_gib) { return left + width * mem_gib / x_top; };
  auto py = [&](double t) { return top + height * (1.0 - (t - y_low) / (y_top - y_low)); };
  using detail::svg_num;
  std::string out = detail::svg_open(left + width + 90.0, top + height + 60.0);
  out += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"13\">{}: step time against peak memory per GPU, "
      "{} GPUs ({} plans on the frontier)</text>\n",
      svg_num(left), detail::xml_escape(job.model.name), job.gpus, r.frontier.size());
  // Axes and ticks.
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>\n",
      svg_num(left), svg_num(top), svg_num(width), svg_num(height));
  for (double x = 0.0; x <= x_top + 1e-9; x += x_step) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#eee\"/><text x=\"{0}\" "
        "y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        svg_num(px(x)), svg_num(top), svg_num(top + height), svg_num(top + height + 16),
        detail::distribution_label(x));
  }
  for (double y = y_low; y <= y_top + 1e-9 * y_top; y += y_step) {
    out += fmt::format(
        "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#eee\"/><text x=\"{3}\" "
        "y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
        svg_num(left), svg_num(py(y)), svg_num(left + width), svg_num(left - 6), svg_num(py(y) + 4),
        detail::distribution_label(y));
  }
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">peak memory per GPU (GiB)</text>\n"
      "<text x=\"18\" y=\"{}\" transform=\"rotate(-90 18 {})\" text-anchor=\"middle\">step time "
      "(s)</text>\n",
      svg_num(left + width / 2), svg_num(top + height + 36), svg_num(top + height / 2),
      svg_num(top + height / 2));
  // The memory wall.
  out += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#d62728\" "
      "stroke-dasharray=\"5,4\"/><text x=\"{3}\" y=\"{4}\" fill=\"#d62728\">usable {5} "
      "GiB</text>\n",
      svg_num(px(usable)), svg_num(top), svg_num(top + height), svg_num(px(usable) + 4),
      svg_num(top + 14), fmt::format("{:.1f}", usable));
  // The frontier: a staircase through its points, fitting ones filled.
  std::string path;
  for (std::size_t i = 0; i < r.frontier.size(); ++i) {
    const plan_frontier_point& f = r.frontier[i];
    const double x = px(f.peak_memory_bytes / gib);
    const double y = py(f.step_time_s);
    if (i == 0) {
      path += fmt::format("M{} {}", svg_num(x), svg_num(y));
    } else {
      path += fmt::format(" V{} H{}", svg_num(y), svg_num(x));
    }
  }
  out +=
      fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\"/>\n", path);
  for (const plan_frontier_point& f : r.frontier) {
    out += fmt::format(
        "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{}\" stroke=\"#1f77b4\"><title>{}: {}, "
        "{}{}</title></circle>\n",
        svg_num(px(f.peak_memory_bytes / gib)), svg_num(py(f.step_time_s)),
        f.fits ? "#1f77b4" : "#ffffff", detail::xml_escape(f.label), detail::seconds(f.step_time_s),
        detail::gib(f.peak_memory_bytes), f.fits ? "" : " (does not fit)");
  }
  auto mark = [&](const plan_entry& e, const char* colour, const std::string& text) {
    const double x = px(e.peak_memory_bytes / gib);
    const double y = py(e.step_time_s);
    out += fmt::format(
        "<circle cx=\"{0}\" cy=\"{1}\" r=\"7\" fill=\"none\" stroke=\"{2}\" "
        "stroke-width=\"2\"/><text x=\"{3}\" y=\"{4}\" fill=\"{2}\" "
        "text-anchor=\"end\">{5}</text>\n",
        svg_num(x), svg_num(y), colour, svg_num(x - 10), svg_num(y - 8), detail::xml_escape(text));
  };
  if (r.baseline) {
    mark(*r.baseline, "#ff7f0e",
         fmt::format("baseline: {} ({})", detail::plan_label(r.baseline->choice),
                     detail::seconds(r.baseline->step_time_s)));
  }
  if (!r.plans.empty() && r.plans.front().fits) {
    mark(r.plans.front(), "#2ca02c",
         fmt::format("best: {} ({})", detail::plan_label(r.plans.front().choice),
                     detail::seconds(r.plans.front().step_time_s)));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace pipesched
