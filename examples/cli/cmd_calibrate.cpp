// `pipesched calibrate`: measurements in, a cluster description whose efficiencies match them
// out (docs/model.md §10.4-10.5), for `pipesched plan --gpu FILE`. One input mode per run:
// --trace (a torch.profiler trace: the GEMM efficiency curve fitted to its GEMMs,
// plan/calibration.hpp) or --runs (measured step times or throughputs: the compute and network
// factors fitted to them, plan/runs_calibration.hpp).
// The command only parses and prints: io/profiler_trace.hpp reads, calibrate_cluster() fits,
// io/calibration_report.hpp prints.

#include <array>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <pipesched/io/calibration_report.hpp>
#include <pipesched/io/job_spec_json.hpp>
#include <pipesched/io/profiler_trace.hpp>
#include <pipesched/io/runs_json.hpp>
#include <pipesched/plan/calibration.hpp>

#include "cli_support.hpp"

namespace pipesched::cli {

namespace {

/// The options of `pipesched calibrate`, as text.
struct calibrate_cli {
  // --runs mode
  std::optional<std::string> runs;
  std::optional<std::string> only;
  bool compute_only = false;
  // --trace mode
  std::optional<std::string> trace;
  std::optional<std::string> shapes;
  std::optional<std::string> bins_per_decade;
  // shared
  std::optional<std::string> gpu;
  std::string output;
  bool json = false;
};

/// Writes the calibrated cluster to -o (when given), then the report: on stdout, or on stderr
/// when the cluster itself goes to stdout (-o -), so that stdout stays one JSON document.
void write_calibration(const calibrate_cli& o,
                       const cluster_spec& gpu,
                       const cluster_calibration& cal,
                       calibration_source src) {
  if (!o.output.empty()) {
    write_output(o.output, cluster_spec_to_json(cal.cluster).dump(2) + "\n");
    src.output = is_stdout(o.output) ? std::string("standard output") : o.output;
  }
  const std::string report =
      o.json ? calibration_to_json(src, gpu, cal).dump(2) + "\n" : calibration_text(src, gpu, cal);
  if (!o.output.empty() && is_stdout(o.output)) {
    std::fputs(report.c_str(), stderr);
  } else {
    write_output("-", report);
  }
}

int run_trace(const calibrate_cli& o, const cluster_spec& gpu) {
  calibration_options opts;
  if (o.bins_per_decade) {
    opts.bins_per_decade =
        static_cast<std::uint32_t>(parse_count(*o.bins_per_decade, "--bins-per-decade", 100, 1));
  }
  calibration_source src;
  src.trace = *o.trace;
  src.shapes = o.shapes.value_or("");
  src.gpu = *o.gpu;
  try {
    src.measured = load_profiler_trace(src.trace, src.shapes);
  } catch (const pipesched::invalid_argument& e) {
    // Errors start with the file they concern: the shapes file's are --shapes'.
    const std::string what = e.what();
    const bool in_shapes = !src.shapes.empty() && what.rfind(src.shapes + ": ", 0) == 0;
    usage_error((in_shapes ? "--shapes: " : "--trace: ") + what);
  }
  cluster_calibration cal;
  try {
    cal = calibrate_cluster(gpu, src.measured, opts);
  } catch (const pipesched::invalid_argument& e) {
    usage_error("--trace: " + src.trace + ": " + e.what());
  }
  write_calibration(o, gpu, cal, std::move(src));
  return 0;
}

std::string runs_text(const std::vector<run_prediction>& v) {
  std::string out;
  for (const run_prediction& p : v) {
    const bool step = p.metric == run_metric::step_time;
    out += fmt::format("  {:<24} {:>10.3f} {:<9} measured {:>10.3f}  error {:+6.1f} %  {}\n", p.id,
                       p.predicted, step ? "s" : "TFLOP/s", p.measured, 100.0 * p.error, p.plan);
  }
  return out;
}

int run_runs(const calibrate_cli& o, const cluster_spec& gpu) {
  std::vector<reference_run> runs;
  try {
    runs = read_reference_runs(read_text_file(*o.runs), gpu, o.only.value_or(""));
  } catch (const pipesched::invalid_argument& e) {
    usage_error("--runs: " + *o.runs + ": " + e.what());
  }
  if (runs.empty()) {
    usage_error("--runs: " + *o.runs + " has no run on \"" + gpu.name + "\"" +
                (o.only ? " whose id starts with \"" + *o.only + "\"" : std::string()) +
                " (a run's \"gpu\" must name the --gpu cluster)");
  }
  runs_calibration c;
  try {
    c = calibrate_runs(runs, gpu, {!o.compute_only});
  } catch (const run_does_not_fit& e) {
    // The model's answer about a valid run, as plan's "no plan fits": exit 1.
    std::fprintf(stderr, "error: --runs: %s: %s\n", o.runs->c_str(), e.what());
    return 1;
  } catch (const pipesched::invalid_argument& e) {
    usage_error("--runs: " + *o.runs + ": " + e.what());
  }
  c.cluster.name = gpu.name + "-calibrated";
  if (!o.output.empty()) {
    write_output(o.output, cluster_spec_to_json(c.cluster).dump(2) + "\n");
  }
  std::string report;
  if (o.json) {
    report = runs_calibration_to_json(c).dump(2) + "\n";
  } else {
    report = fmt::format("{} runs on {} from {}\nbefore (mean |error| {:.2f} %):\n{}", runs.size(),
                         gpu.name, *o.runs, 100.0 * mean_abs_error(c.before), runs_text(c.before));
    report += fmt::format(
        "fitted: compute kernels' rate x {:.4f} (achieved_fraction {:.4f}), network bandwidth x "
        "{:.4f} (intra-node {:.1f} GB/s, inter-node {:.1f} GB/s)\n",
        c.compute_scale, c.cluster.achieved_fraction, c.network_scale,
        c.cluster.intra_node_bandwidth / 1e9, c.cluster.inter_node_bandwidth / 1e9);
    report += fmt::format("after (mean |error| {:.2f} %):\n{}", 100.0 * mean_abs_error(c.after),
                          runs_text(c.after));
  }
  if (!o.output.empty() && is_stdout(o.output)) {
    std::fputs(report.c_str(), stderr);
  } else {
    write_output("-", report);
  }
  return 0;
}

/// The input modes: each is given by its option and runs on its own. Another mode (measured
/// step times) is one more entry, and the messages below name it.
struct calibrate_mode {
  const char* option;
  const char* what;
  bool (*given)(const calibrate_cli&);
  int (*run)(const calibrate_cli&, const cluster_spec&);
};

const std::array<calibrate_mode, 2> modes = {{
    {"--trace PROFILE.json", "a torch.profiler trace: the GEMM efficiency curve from its GEMMs",
     [](const calibrate_cli& o) { return o.trace.has_value(); }, run_trace},
    {"--runs RUNS.json", "measured runs: the compute and network factors fitted to them",
     [](const calibrate_cli& o) { return o.runs.has_value(); }, run_runs},
}};

int cmd_calibrate(const calibrate_cli& o) {
  const calibrate_mode* mode = nullptr;
  std::string known;
  for (const calibrate_mode& m : modes) {
    known += (known.empty() ? "" : "; ") + std::string(m.option) + " (" + m.what + ")";
    if (m.given(o)) {
      if (mode != nullptr) {
        usage_error(std::string("calibrate: one input at a time: ") + mode->option + " and " +
                    m.option);
      }
      mode = &m;
    }
  }
  if (mode == nullptr) {
    usage_error("calibrate: an input is needed: " + known);
  }
  if ((o.only || o.compute_only) && !o.runs) {
    usage_error(std::string(o.only ? "--only" : "--compute-only") +
                ": only meaningful with --runs");
  }
  if ((o.shapes || o.bins_per_decade) && !o.trace) {
    usage_error(std::string(o.shapes ? "--shapes" : "--bins-per-decade") +
                ": only meaningful with --trace");
  }
  if (!o.gpu) {
    usage_error(
        "--gpu: the GPU the measurements ran on is needed (a preset such as a100-sxm-80gb, or a "
        "cluster JSON file): its peaks are what the efficiencies are shares of");
  }
  cluster_spec gpu;
  try {
    gpu = load_cluster_spec(*o.gpu);
  } catch (const pipesched::invalid_argument& e) {
    usage_error(std::string("--gpu: ") + e.what());
  }
  return mode->run(o, gpu);
}

void declare_calibrate(CLI::App* c, calibrate_cli& o) {
  c->add_option("--runs", o.runs,
                "Measured runs (docs/formats.md, the format of tests/data/measured_runs.json): "
                "fit the compute kernels' rate and the network's bandwidth to them");
  c->add_option("--only", o.only, "With --runs: only the runs whose id starts with this");
  c->add_flag("--compute-only", o.compute_only,
              "With --runs: fit the compute kernels' rate alone, not the network's");
  c->add_option("--trace", o.trace,
                "A torch.profiler trace (Kineto's Chrome JSON, .json.gz too, or the legacy "
                "format with --shapes): fit the GEMM efficiency curve to its GEMMs");
  c->add_option("--shapes", o.shapes,
                "With a legacy-format trace: the op shapes file scripts/record_trace.py "
                "writes beside it (docs/formats.md)");
  c->add_option("--gpu", o.gpu,
                "The GPU the measurements ran on: " + cluster_preset_names() +
                    ", or a cluster JSON file (its peaks and HBM bandwidth)");
  c->add_option("--output,-o", o.output,
                "Write the calibrated cluster JSON to FILE (plan --gpu FILE reads it)");
  c->add_flag("--json", o.json, "Print the calibration report as JSON (docs/formats.md)");
  c->add_option("--bins-per-decade", o.bins_per_decade,
                "GEMM size bins per factor of 10 in FLOPs (default 4)");
}

const registration calibrate_cmd = command<calibrate_cli>(
    "calibrate",
    72,
    "Measurements in: the cluster description (--gpu) with efficiencies fitted to them",
    declare_calibrate,
    cmd_calibrate);

}  // namespace

}  // namespace pipesched::cli
