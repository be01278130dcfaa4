#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/plan_request.hpp"
#include "pipesched/plan/planner.hpp"

// The cluster's efficiencies fitted to measured runs (docs/model.md §10.4, `pipesched calibrate
// --runs`): each run set up as it ran, predicted by the planner, and two scales (the compute
// kernels' achieved fraction, the networks' bandwidth) chosen to bring the predictions nearest to
// what the runs measured.

namespace pipesched {

/// What a measured run reports.
enum class run_metric : std::uint8_t {
  step_time,        ///< seconds per optimizer step
  model_tflops,     ///< TFLOP/s per GPU as Megatron-LM's README table counts them
  hardware_tflops,  ///< TFLOP/s per GPU as Narayanan et al.'s Eq. 3 counts them
};

constexpr std::string_view to_string(run_metric m) noexcept {
  switch (m) {
    case run_metric::step_time:
      return "step_time_s";
    case run_metric::model_tflops:
      return "model_tflops_per_gpu";
    case run_metric::hardware_tflops:
      break;
  }
  return "hardware_tflops_per_gpu";
}

/// A run to compare with: the job and the choices it ran with (plan_request: what it left to
/// the search is searched), and what it measured.
struct reference_run {
  std::string id;
  plan_request request;
  run_metric metric = run_metric::step_time;
  double measured = 0.0;
};

/// FLOPs of one step as Narayanan et al. (arXiv 2104.04473, Eq. 3) count hardware FLOPs with
/// full recomputation: 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)), the attention core unmasked.
inline double narayanan_hardware_flops(const training_job& job) {
  const auto b = static_cast<double>(job.global_batch);
  const auto s = static_cast<double>(job.sequence);
  const auto l = static_cast<double>(job.model.layers);
  const auto h = static_cast<double>(job.model.hidden);
  const auto v = static_cast<double>(job.model.vocab);
  return 96.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

/// FLOPs of one step as Megatron-LM's num_floating_point_operations counted them for its
/// README's throughput table (2024): 12·B·s·l·h²·((1 + g/a + s/h)·(a·d/h) + f/h·(2 for SwiGLU)
/// + V/(2·l·h)), V padded to a multiple of 128, the attention core unmasked.
inline double megatron_model_flops(const training_job& job) {
  const transformer_spec& t = job.model;
  const auto b = static_cast<double>(job.global_batch);
  const auto s = static_cast<double>(job.sequence);
  const auto l = static_cast<double>(t.layers);
  const auto h = static_cast<double>(t.hidden);
  const double kv = static_cast<double>(t.kv()) / static_cast<double>(t.heads);
  const double query = t.query_size() / h;
  const double mlp = static_cast<double>(t.ffn) / h * (t.mlp == mlp_kind::swiglu ? 1.5 : 1.0);
  const auto v = static_cast<double>(padded_vocab(t.vocab, 1, 128));
  return 12.0 * b * s * l * h * h * ((1.0 + kv + s / h) * query + mlp + v / (2.0 * l * h));
}

/// A run's prediction against its measurement.
struct run_prediction {
  std::string id;
  run_metric metric = run_metric::step_time;
  double predicted = 0.0;
  double measured = 0.0;
  double error = 0.0;  ///< predicted / measured − 1
  std::string plan;    ///< the plan's label ("TP8 PP8 v3 b1 m64 interleaved-1f1b selective SP")
};

/// A measured run of which no plan fits its GPU even with all the GPU's memory: the memory
/// model's answer about a valid run (the CLI's exit 1), not a malformed input.
class run_does_not_fit : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

namespace detail {

/// The metric a plan entry predicts for `run`.
inline double predicted_metric(const reference_run& run,
                               const training_job& job,
                               const plan_entry& e) {
  const double gpus = static_cast<double>(job.gpus);
  switch (run.metric) {
    case run_metric::step_time:
      return e.step_time_s;
    case run_metric::model_tflops:
      return megatron_model_flops(job) / (e.step_time_s * gpus) / 1e12;
    case run_metric::hardware_tflops:
      break;
  }
  return narayanan_hardware_flops(job) / (e.step_time_s * gpus) / 1e12;
}

/// The run's job on `cluster`, and its options with every choice of `fixed` (when given) fixed.
inline std::pair<training_job, plan_options> run_job(const reference_run& run,
                                                     const cluster_spec& cluster,
                                                     const plan_choice* fixed = nullptr) {
  plan_request r = run.request;
  r.cluster = cluster;
  plan_options o = r.options;
  o.top = 1;
  o.baseline.reset();
  if (fixed != nullptr) {
    plan_fixed& f = o.fixed;
    f.tp = fixed->layout.tp;
    f.pp = fixed->layout.pp;
    f.dp = fixed->layout.dp;
    f.cp = fixed->layout.cp;
    f.chunks = fixed->layout.chunks;
    f.micro_batch = fixed->layout.micro_batch;
    f.microbatches = fixed->layout.microbatches;
    f.sequence_parallel = fixed->layout.sequence_parallel;
    f.schedule = fixed->schedule;
    f.recompute = fixed->recompute;
    if (fixed->group_size != 0) {
      f.group_size = fixed->group_size;
    }
  }
  return {job_of(r), o};
}

/// The run's best plan on `cluster` (the choices it fixed fixed, the rest searched), or the plan
/// of `fixed`. A measured run ran, so its memory fit the GPU: when no plan fits the cluster's
/// usable memory, the GPU's whole memory is tried before it is timed (only the memory model's
/// margin is at stake, not the times being fitted). Throws run_does_not_fit naming the run when
/// none fits even then.
inline std::pair<run_prediction, plan_choice> predict(const reference_run& run,
                                                      const cluster_spec& cluster,
                                                      const plan_choice* fixed = nullptr) {
  auto [job, opts] = run_job(run, cluster, fixed);
  auto fits = [](const plan_result& r) { return !r.plans.empty() && r.plans.front().fits; };
  plan_result res = plan(job, opts);
  if (!fits(res) && job.cluster.usable_fraction < 1.0) {
    job.cluster.usable_fraction = 1.0;
    res = plan(job, opts);
  }
  if (!fits(res)) {
    throw run_does_not_fit(concat("calibrate: run \"", run.id,
                                  "\": no plan of it fits the GPU's memory, even all of it (",
                                  job.cluster.memory_bytes / 1073741824.0, " GiB)"));
  }
  const plan_entry& e = res.plans.front();
  run_prediction p;
  p.id = run.id;
  p.metric = run.metric;
  p.predicted = predicted_metric(run, job, e);
  p.measured = run.measured;
  p.error = p.predicted / p.measured - 1.0;
  p.plan = plan_label(e.choice);
  return {p, e.choice};
}

/// The fit's objective: the mean of the squared log of predicted / measured.
inline double fit_loss(const std::vector<run_prediction>& v) {
  double sum = 0.0;
  for (const run_prediction& p : v) {
    const double l = std::log(p.predicted / p.measured);
    sum += l * l;
  }
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

/// The x in [lo, hi] where f is least, f unimodal there (golden-section search, to a relative
/// width of 1e-3).
inline double golden_minimum(double lo, double hi, const std::function<double(double)>& f) {
  const double r = (std::sqrt(5.0) - 1.0) / 2.0;
  double a = lo, b = hi;
  double c = b - r * (b - a), d = a + r * (b - a);
  double fc = f(c), fd = f(d);
  while ((b - a) > 1e-3 * std::max(std::abs(a), std::abs(b))) {
    if (fc < fd) {
      b = d;
      d = c;
      fd = fc;
      c = b - r * (b - a);
      fc = f(c);
    } else {
      a = c;
      c = d;
      fc = fd;
      d = a + r * (b - a);
      fd = f(d);
    }
  }
  return (a + b) / 2.0;
}

/// The minimum of f(x, y) near (x0, y0) by a Nelder-Mead simplex of initial size `step`, until
/// its points' values differ by less than `tolerance` (at most 200 steps).
inline std::pair<double, double> nelder_mead_2d(double x0,
                                                double y0,
                                                double step,
                                                const std::function<double(double, double)>& f,
                                                double tolerance) {
  struct vertex {
    double x, y, v;
  };
  std::vector<vertex> s = {
      {x0, y0, f(x0, y0)}, {x0 + step, y0, f(x0 + step, y0)}, {x0, y0 + step, f(x0, y0 + step)}};
  auto at = [&](double x, double y) { return vertex{x, y, f(x, y)}; };
  for (int k = 0; k < 200; ++k) {
    std::sort(s.begin(), s.end(), [](const vertex& a, const vertex& b) { return a.v < b.v; });
    if (s[2].v - s[0].v < tolerance) {
      break;
    }
    const double cx = (s[0].x + s[1].x) / 2.0, cy = (s[0].y + s[1].y) / 2.0;
    const vertex r = at(2.0 * cx - s[2].x, 2.0 * cy - s[2].y);
    if (r.v < s[0].v) {
      const vertex e = at(3.0 * cx - 2.0 * s[2].x, 3.0 * cy - 2.0 * s[2].y);
      s[2] = e.v < r.v ? e : r;
    } else if (r.v < s[1].v) {
      s[2] = r;
    } else {
      const vertex c = at((cx + s[2].x) / 2.0, (cy + s[2].y) / 2.0);
      if (c.v < s[2].v) {
        s[2] = c;
      } else {  // shrink towards the best
        for (std::size_t i = 1; i < 3; ++i) {
          s[i] = at((s[0].x + s[i].x) / 2.0, (s[0].y + s[i].y) / 2.0);
        }
      }
    }
  }
  std::sort(s.begin(), s.end(), [](const vertex& a, const vertex& b) { return a.v < b.v; });
  return {s[0].x, s[0].y};
}

}  // namespace detail

/// What calibrate_runs found.
struct runs_calibration {
  cluster_spec cluster;        ///< the input cluster with the fitted scales applied
  double compute_scale = 1.0;  ///< the achieved fraction's factor
  double network_scale = 1.0;  ///< the intra- and inter-node bandwidths' factor
  std::vector<run_prediction> before, after;
};

struct runs_calibration_options {
  bool fit_network = true;  ///< also fit the networks' bandwidth (else the compute scale only)
};

inline double mean_abs_error(const std::vector<run_prediction>& v) {
  double sum = 0.0;
  for (const run_prediction& p : v) {
    sum += std::abs(p.error);
  }
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

/// Fits `base`'s achieved fraction (a factor on every compute kernel's rate, the result at most
/// 1) and, with opts.fit_network, its intra- and inter-node bandwidths (one factor on both) to
/// `runs`: the factors that minimise the mean squared log of predicted / measured (the compute
/// factor by a golden-section search; both by a Nelder-Mead simplex from there). Each run keeps the
/// plan it gets on `base` while fitting (its searched choices are searched again for `after`).
/// Throws invalid_argument for no runs or a measurement that is not finite and > 0, and
/// run_does_not_fit for a run with no plan that fits even the GPU's whole memory.
inline runs_calibration calibrate_runs(const std::vector<reference_run>& runs,
                                       const cluster_spec& base,
                                       const runs_calibration_options& opts = {}) {
  if (runs.empty()) {
    detail::fail("calibrate: the runs file has no run");
  }
  for (const reference_run& r : runs) {
    if (!std::isfinite(r.measured) || r.measured <= 0.0) {
      detail::fail("calibrate: run \"", r.id, "\": ", to_string(r.metric),
                   " must be finite and > 0, not ", r.measured);
    }
  }
  runs_calibration out;
  std::vector<plan_choice> choices;
  for (const reference_run& r : runs) {
    auto [p, c] = detail::predict(r, base);
    out.before.push_back(p);
    choices.push_back(c);
  }
  auto scaled = [&](double compute, double network) {
    cluster_spec c = base;
    c.achieved_fraction = std::min(1.0, base.achieved_fraction * compute);
    c.intra_node_bandwidth = base.intra_node_bandwidth * network;
    c.inter_node_bandwidth = base.inter_node_bandwidth * network;
    return c;
  };
  auto loss = [&](double compute, double network) {
    const cluster_spec c = scaled(compute, network);
    std::vector<run_prediction> v;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      v.push_back(detail::predict(runs[i], c, &choices[i]).first);
    }
    return detail::fit_loss(v);
  };
  // The compute factor alone by a golden-section search; both by a Nelder-Mead simplex in their
  // logarithms (they trade off where communication and compute share a step: a valley no
  // search along one factor at a time descends quickly), from the compute factor's fit.
  const double max_compute = 1.0 / base.achieved_fraction;
  double compute = detail::golden_minimum(std::min(0.05, max_compute), max_compute,
                                          [&](double x) { return loss(x, 1.0); });
  double network = 1.0;
  if (opts.fit_network) {
    const auto point_loss = [&](double lc, double ln) {
      return loss(std::min(std::exp(lc), max_compute), std::exp(ln));
    };
    std::tie(compute, network) =
        detail::nelder_mead_2d(std::log(compute), 0.0, 0.2, point_loss, 1e-5);
    compute = std::min(std::exp(compute), max_compute);
    network = std::exp(network);
  }
  out.compute_scale = std::min(1.0, base.achieved_fraction * compute) / base.achieved_fraction;
  out.network_scale = network;
  out.cluster = scaled(compute, network);
  for (const reference_run& r : runs) {
    out.after.push_back(detail::predict(r, out.cluster).first);
  }
  return out;
}

}  // namespace pipesched
