#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "pipesched/io/job_spec_json.hpp"
#include "pipesched/io/plan_text.hpp"
#include "pipesched/model/kernel_calibration.hpp"
#include "pipesched/plan/calibration.hpp"

// What `pipesched calibrate --trace` reports (docs/formats.md, "Calibration JSON"): the time by
// kernel category, the GEMMs by shape with their efficiency, the fitted curve, the memory-bound
// rate and the cluster written. Text for a reader (every number with its unit), JSON for tools.

namespace pipesched {

inline constexpr int calibration_json_version = 1;

/// What the trace was and where the calibrated cluster went, beside the calibration itself.
struct calibration_source {
  std::string trace;             ///< the trace's path as given
  std::string shapes;            ///< the shapes file's path, empty for none
  std::string gpu;               ///< the --gpu as given (preset name or file)
  std::string output;            ///< where the cluster JSON was written, empty: not written
  kernel_measurements measured;  ///< what the trace measured (counts and format)
};

namespace detail {

inline nlohmann::json seconds_by_category_json(const trace_calibration& f) {
  nlohmann::json out = nlohmann::json::object();
  for (const kernel_category c : kernel_categories) {
    out[std::string(to_string(c))] = f.seconds_by_category[static_cast<std::size_t>(c)];
  }
  return out;
}

/// "1.24 ms", "310 us", "2.50 s": three significant digits in the unit that fits.
inline std::string seconds_text(double s) {
  const double a = s < 0 ? -s : s;
  if (a >= 1.0 || a == 0.0) {
    return fmt::format("{:.3g} s", s);
  }
  if (a >= 1e-3) {
    return fmt::format("{:.3g} ms", s * 1e3);
  }
  return fmt::format("{:.3g} us", s * 1e6);
}

/// "2.10 GFLOP", "16.8 MFLOP": a GEMM's work with three significant digits.
inline std::string flop_text(double f) {
  const char* unit[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
  int i = 0;
  while (f >= 999.5 && i < 5) {
    f /= 1000.0;
    ++i;
  }
  return fmt::format("{:.3g} {}", f, unit[i]);
}

/// "1.24 TB/s": decimal bytes per second (as HBM bandwidths are quoted).
inline std::string bandwidth_text(double bytes_per_s) {
  const char* unit[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s"};
  int i = 0;
  while (bytes_per_s >= 999.5 && i < 4) {
    bytes_per_s /= 1000.0;
    ++i;
  }
  return fmt::format("{:.3g} {}", bytes_per_s, unit[i]);
}

inline std::string percent_text(double fraction) {
  return fraction >= 0.0995 ? fmt::format("{:.1f} %", fraction * 100.0)
                            : fmt::format("{:.2g} %", fraction * 100.0);
}

}  // namespace detail

/// The calibration as JSON (version 1, docs/formats.md "Calibration JSON"): the trace, the GPU
/// and its peaks, seconds by category, the GEMM counts, every (shape, precision) measured, the
/// fit's bins and curve, the memory-bound rate, the cluster written (or null) and the notes.
inline nlohmann::json calibration_to_json(const calibration_source& src,
                                          const cluster_spec& gpu,
                                          const cluster_calibration& cal) {
  const trace_calibration& f = cal.fit;
  const kernel_measurements& m = src.measured;
  nlohmann::json peaks = nlohmann::json::object();
  for (const gemm_precision p : {gemm_precision::fp8, gemm_precision::bf16, gemm_precision::fp16,
                                 gemm_precision::tf32, gemm_precision::fp32}) {
    peaks[std::string(to_string(p))] = cal.peaks.of(p);
  }
  nlohmann::json by_precision = nlohmann::json::object();
  for (std::size_t p = 0; p < f.gemms_by_precision.size(); ++p) {
    if (f.gemms_by_precision[p] > 0) {
      by_precision[std::string(to_string(static_cast<gemm_precision>(p)))] =
          f.gemms_by_precision[p];
    }
  }
  nlohmann::json shapes = nlohmann::json::array();
  for (const gemm_shape_measurement& s : f.shapes) {
    shapes.push_back({{"batch", s.shape.batch},
                      {"m", s.shape.m},
                      {"n", s.shape.n},
                      {"k", s.shape.k},
                      {"precision", std::string(to_string(s.precision))},
                      {"count", s.count},
                      {"flops", s.flops},
                      {"seconds", s.seconds},
                      {"seconds_per_op", s.seconds / static_cast<double>(s.count)},
                      {"achieved_flops_per_s", s.achieved()},
                      {"peak_flops_per_s", s.peak},
                      {"efficiency", s.efficiency()}});
  }
  nlohmann::json bins = nlohmann::json::array();
  for (const gemm_efficiency_bin& b : f.bins) {
    bins.push_back({{"flops_lo", b.lo},
                    {"flops_hi", b.hi},
                    {"flops", b.size},
                    {"count", b.count},
                    {"seconds", b.seconds},
                    {"measured", b.measured},
                    {"fitted", b.fitted}});
  }
  nlohmann::json memory = {
      {"ops", f.memory_ops},
      {"bytes", f.memory_bytes},
      {"seconds", f.memory_seconds},
      {"achieved_bytes_per_s",
       f.memory_seconds > 0.0 ? nlohmann::json(f.memory_bytes / f.memory_seconds) : nullptr},
      {"hbm_bandwidth", gpu.hbm_bandwidth},
      {"efficiency",
       f.memory_efficiency ? nlohmann::json(*f.memory_efficiency) : nlohmann::json(nullptr)}};
  return {{"version", calibration_json_version},
          {"mode", "trace"},
          {"trace",
           {{"path", src.trace},
            {"shapes", src.shapes.empty() ? nlohmann::json(nullptr) : nlohmann::json(src.shapes)},
            {"format", m.format},
            {"device_kernels", m.device_kernels},
            {"events", m.events}}},
          {"gpu", {{"name", gpu.name}, {"given", src.gpu}, {"peak_flops", peaks}}},
          {"seconds_by_category", detail::seconds_by_category_json(f)},
          {"gemms",
           {{"measured", f.gemms},
            {"fitted", f.gemms_fitted},
            {"by_precision", by_precision},
            {"without_time", f.gemms_without_time},
            {"without_peak", f.gemms_without_peak},
            {"without_shapes", m.gemm_ops_without_shapes},
            {"without_kernels", m.gemm_ops_without_kernels},
            {"kernels_outside_ops", m.gemm_kernels_outside_ops},
            {"shapes_above_peak", f.shapes_above_peak}}},
          {"gemm_shapes", shapes},
          {"gemm_efficiency_bins", bins},
          {"gemm_efficiency", detail::efficiency_curve_to_json(f.gemm_efficiency)},
          {"memory", memory},
          {"output", src.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(src.output)},
          {"cluster", cluster_spec_to_json(cal.cluster)},
          {"notes", cal.notes}};
}

/// The calibration for a reader: the trace, time by category, the GEMMs by shape (each with
/// its FLOPs, time, achieved rate and efficiency against the peak named), the fitted curve,
/// the memory-bound rate, the notes and the cluster written.
inline std::string calibration_text(const calibration_source& src,
                                    const cluster_spec& gpu,
                                    const cluster_calibration& cal) {
  const trace_calibration& f = cal.fit;
  const kernel_measurements& m = src.measured;
  std::string out;
  out += fmt::format("calibrate: {} ({} format, {}{}), GPU {}\n", src.trace, m.format,
                     m.device_kernels ? "GPU kernels timed" : "a CPU-only run: op times",
                     src.shapes.empty() ? "" : ", shapes from " + src.shapes, gpu.name);
  double total = 0.0;
  for (const double s : f.seconds_by_category) {
    total += s;
  }
  out +=
      fmt::format("\n{} by category ({}):\n", m.device_kernels ? "GPU kernel time" : "CPU op time",
                  m.device_kernels ? "kernels summed over all streams, which may overlap"
                                   : "each op's own time, its children's taken out");
  for (const kernel_category c : kernel_categories) {
    const double s = f.seconds_by_category[static_cast<std::size_t>(c)];
    out += fmt::format("  {:<14} {:>10}  {:>7}\n", to_string(c), detail::seconds_text(s),
                       total > 0.0 ? detail::percent_text(s / total) : "-");
  }
  out += fmt::format("  {:<14} {:>10}\n", "total", detail::seconds_text(total));

  std::string used;
  for (std::size_t p = 0; p < f.gemms_by_precision.size(); ++p) {
    if (f.gemms_by_precision[p] > 0) {
      const auto prec = static_cast<gemm_precision>(p);
      used += fmt::format("{}{} {} ({} GEMMs)", used.empty() ? "" : ", ", to_string(prec),
                          detail::flops(cal.peaks.of(prec)), f.gemms_by_precision[p]);
    }
  }
  out += fmt::format("\nGEMMs measured: {} in {} shapes, {} in the fit; peaks used: {}\n", f.gemms,
                     f.shapes.size(), f.gemms_fitted, used);
  out += fmt::format("  {:>6} {:>7} {:>7} {:>7} {:>5} {:>11} {:>10} {:>14} {:>9}\n", "batch", "M",
                     "N", "K", "count", "work/op", "time/op", "achieved", "of peak");
  for (const gemm_shape_measurement& s : f.shapes) {
    out += fmt::format(
        "  {:>6} {:>7} {:>7} {:>7} {:>5} {:>11} {:>10} {:>14} {:>9} {}\n", s.shape.batch, s.shape.m,
        s.shape.n, s.shape.k, s.count, detail::flop_text(s.flops),
        detail::seconds_text(s.seconds / static_cast<double>(s.count)), detail::flops(s.achieved()),
        detail::percent_text(s.efficiency()), to_string(s.precision));
  }
  out +=
      "\nGEMM efficiency by size (bins of log10 FLOPs; a bin's FLOPs over its time at the "
      "peak; made non-decreasing, at most 1):\n";
  out += fmt::format("  {:>11} {:>6} {:>10} {:>9} {:>9}\n", "work", "GEMMs", "time", "measured",
                     "fitted");
  for (const gemm_efficiency_bin& b : f.bins) {
    out += fmt::format("  {:>11} {:>6} {:>10} {:>9} {:>9}\n", detail::flop_text(b.size), b.count,
                       detail::seconds_text(b.seconds), detail::percent_text(b.measured),
                       detail::percent_text(b.fitted));
  }
  if (f.memory_ops > 0) {
    out += fmt::format("\nMemory-bound: {} elementwise ops moving at least {} each: {} in {}, {}",
                       f.memory_ops, detail::gib(f.options.min_memory_bytes),
                       detail::gib(f.memory_bytes), detail::seconds_text(f.memory_seconds),
                       detail::bandwidth_text(f.memory_bytes / f.memory_seconds));
    out += f.memory_efficiency
               ? fmt::format(", {} of hbm_bandwidth {}: memory_efficiency {:.3f}\n",
                             detail::percent_text(*f.memory_efficiency),
                             detail::bandwidth_text(gpu.hbm_bandwidth), *f.memory_efficiency)
               : std::string("\n");
  }
  if (!cal.notes.empty()) {
    out += "\n";
    for (const std::string& n : cal.notes) {
      out += "note: " + n + "\n";
    }
  }
  out += src.output.empty()
             ? std::string("\nno cluster written (give -o FILE to write it)\n")
             : fmt::format(
                   "\nwrote {}: {} with gemm_efficiency ({} points), memory_efficiency {:.3g}, "
                   "achieved_fraction 1\n",
                   src.output, cal.cluster.name, cal.cluster.gemm_efficiency.points.size(),
                   cal.cluster.memory_efficiency);
  return out;
}

}  // namespace pipesched
