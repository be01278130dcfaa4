#pragma once

#include <cmath>
#include <string>

#include <fmt/core.h>

#include "pipesched/plan/plan_types.hpp"

// The planner's report for a reader (`pipesched plan` without --json): the job, the plans
// table, the best plan's memory per stage and the comparison with a baseline. Every number
// carries its unit.

namespace pipesched {

namespace detail {

/// "time by kind (busiest stage, per step): GEMM 61.2 %, attention 8.1 %, memory-bound 14.0 %,
/// communication 16.7 % of 12.3 s": where the stage with the most work spends it.
inline std::string time_by_kind_text(const plan_entry& e) {
  const plan_stage* busiest = nullptr;
  for (const plan_stage& st : e.stages) {
    if (busiest == nullptr || st.seconds_by_kind.total() > busiest->seconds_by_kind.total()) {
      busiest = &st;
    }
  }
  if (busiest == nullptr || !(busiest->seconds_by_kind.total() > 0.0)) {
    return {};
  }
  const kind_seconds& k = busiest->seconds_by_kind;
  const double total = k.total();
  return fmt::format(
      "time by kind (busiest stage, per step): GEMM {:.1f} %, attention {:.1f} %, memory-bound "
      "{:.1f} %, communication {:.1f} % of {:.3f} s\n",
      100.0 * k[time_kind::gemm] / total, 100.0 * k[time_kind::attention] / total,
      100.0 * k[time_kind::memory_bound] / total, 100.0 * k[time_kind::communication] / total,
      total);
}

/// Bytes for a reader: GiB with one decimal (0 as 0.0 GiB), or below 0.05 GiB the unit that
/// keeps the number readable (MiB, KiB, B), so no size other than 0 reads as "0.0 GiB".
inline std::string gib(double bytes) {
  constexpr double kib = 1024.0, mib = kib * 1024.0, gib_bytes = mib * 1024.0;
  const double a = std::fabs(bytes);
  if (a == 0.0 || a >= 0.05 * gib_bytes) {
    return fmt::format("{:.1f} GiB", bytes / gib_bytes);
  }
  if (a >= mib) {
    return fmt::format("{:.1f} MiB", bytes / mib);
  }
  if (a >= kib) {
    return fmt::format("{:.1f} KiB", bytes / kib);
  }
  return fmt::format("{:.3g} B", bytes);
}

/// FLOP/s for a reader in the decimal unit that fits, up to TFLOP/s (989 TFLOP/s, 1.00
/// kFLOP/s), with three significant digits or more.
inline std::string flops(double per_s) {
  const char* unit[] = {"FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s"};
  int i = 0;
  while (std::fabs(per_s) >= 999.5 && i < 4) {
    per_s /= 1000.0;
    ++i;
  }
  const double a = std::fabs(per_s);
  return fmt::format("{:.{}f} {}", per_s, a >= 99.95 || a == 0.0 ? 0 : a >= 9.995 ? 1 : 2, unit[i]);
}

/// The table's TFLOP/s cell: one decimal ("412.3"), or below 0.05 TFLOP/s the value with the
/// unit that fits (flops: "500 FLOP/s"), so no rate other than 0 reads as "0.0".
inline std::string tflops_cell(double tflops) {
  const double a = std::fabs(tflops);
  return a == 0.0 || a >= 0.05 ? fmt::format("{:.1f}", tflops) : flops(tflops * 1e12);
}

/// 2.28 M, 16.8 k: three significant digits and a decimal prefix.
inline std::string si_count(double v) {
  const char* prefix[] = {"", " k", " M", " G", " T", " P"};
  int i = 0;
  while (std::fabs(v) >= 999.5 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  return fmt::format("{:.3g}{}", v, prefix[i]);
}

inline std::string plan_row_text(const std::string& rank, const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  return fmt::format(
      "{:>4}  {:>2} {:>3} {:>5} {:>2} {:>2} {:>4}  {:<16} {:<9} {:<3} {:>9} {:>11} {:>8} "
      "{:>6.1f} % {:>6.1f} % {:>10}{}\n",
      rank, l.tp, l.pp, l.dp, l.chunks, l.micro_batch, l.microbatches, e.choice.schedule,
      to_string(e.choice.recompute), l.sequence_parallel ? "on" : "off",
      fmt::format("{:.3f} s", e.step_time_s), si_count(e.tokens_per_s) + " tok/s",
      tflops_cell(e.tflops_per_gpu), 100.0 * e.mfu, 100.0 * e.bubble_rate, gib(e.peak_memory_bytes),
      e.fits ? "" : "  (does not fit)");
}

inline std::string plan_header_text() {
  return fmt::format(
      "{:>4}  {:>2} {:>3} {:>5} {:>2} {:>2} {:>4}  {:<16} {:<9} {:<3} {:>9} {:>11} {:>8} {:>8} "
      "{:>8} {:>10}\n",
      "#", "TP", "PP", "DP", "v", "b", "m", "schedule", "recompute", "SP", "step", "throughput",
      "TFLOP/s", "MFU", "bubble", "peak/GPU");
}

}  // namespace detail

/// Why the job has no plan to run, one line without its newline ("no plan fits: ...", or "the
/// plan does not fit: ..." when every choice was fixed); empty when the first plan fits. The
/// report and the CLI's stderr line say it in these same words.
inline std::string plan_misfit_text(const training_job& job, const plan_result& r) {
  if (r.plans.empty()) {
    return fmt::format("no plan fits: the smallest need found is {} per GPU, {} usable",
                       detail::gib(r.smallest_need_bytes),
                       detail::gib(job.cluster.usable_memory()));
  }
  if (!r.plans.front().fits) {
    return fmt::format("the plan does not fit: it needs {} per GPU, {} usable",
                       detail::gib(r.plans.front().peak_memory_bytes),
                       detail::gib(job.cluster.usable_memory()));
  }
  return {};
}

/// The plan report: the job and the search, the plans (best first) with step time, tokens/s,
/// TFLOP/s per GPU, MFU, bubble and peak memory per GPU, the first plan's memory per stage,
/// and with a baseline the speedup and the GPUs' worth of time it recovers.
inline std::string plan_text(const training_job& job, const plan_result& r) {
  std::string out =
      fmt::format("{} on {} x {}, {}-token sequences, {} sequences ({} tokens) per step\n",
                  job.model.name, job.gpus, job.cluster.name, job.sequence, r.global_batch,
                  detail::si_count(static_cast<double>(r.global_batch * job.sequence)));
  out += fmt::format(
      "usable memory {} per GPU ({:.0f} % of {}); optimizer sharding: {}; achieved {:.0f} % of "
      "the {} peak\n",
      detail::gib(job.cluster.usable_memory()), 100.0 * job.cluster.usable_fraction,
      detail::gib(job.cluster.memory_bytes), to_string(job.sharding),
      100.0 * job.cluster.achieved_fraction,
      detail::flops(job.cluster.peak_flops(job.model.activation_bytes)));
  out += fmt::format(
      "search: {} candidates, {} evaluated, {} cannot fit, {} cannot beat the plans kept, {} "
      "refused by their generator, in {:.2f} s\n\n",
      r.stats.candidates, r.stats.evaluated, r.stats.pruned_memory, r.stats.pruned_time,
      r.stats.failed, r.stats.seconds);
  if (r.plans.empty()) {
    out += plan_misfit_text(job, r) + "\n";
    if (r.baseline) {  // evaluated all the same: the JSON has it, so does the text
      out += "\n" + detail::plan_header_text() + detail::plan_row_text("base", *r.baseline);
    }
    return out;
  }
  out += detail::plan_header_text();
  for (std::size_t i = 0; i < r.plans.size(); ++i) {
    out += detail::plan_row_text(std::to_string(i + 1), r.plans[i]);
  }
  const plan_entry& best = r.plans.front();
  if (r.baseline) {
    const plan_comparison c = compare_plans(best, *r.baseline, job.gpus);
    out += detail::plan_row_text("base", *r.baseline);
    out += fmt::format(
        "\nplan 1 is {:.3f}x the baseline's speed: {:.1f} % of each step, {:.0f} GPUs' worth of "
        "time recovered at {} GPUs{}\n",
        c.speedup, 100.0 * c.time_saved, c.gpus_recovered, job.gpus,
        r.baseline->fits ? "" : " (the baseline does not fit in memory)");
  }
  out += fmt::format(
      "\nplan 1 per stage (per GPU; step {:.3f} s = pipeline {:.3f} s + data-parallel reduction "
      "{:.3f} s not hidden + optimizer step {:.3f} s):\n",
      best.step_time_s, best.makespan_s, best.dp_exposed_s, best.optimizer_s);
  out += detail::time_by_kind_text(best);
  out += fmt::format("{:>5} {:>6}  {:<14} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9}\n", "stage",
                     "layers", "holds", "weights", "gradients", "optimizer", "activations", "total",
                     "busy");
  for (std::size_t s = 0; s < best.stages.size(); ++s) {
    const plan_stage& st = best.stages[s];
    std::string holds = st.embedding ? "embedding" : "";
    if (st.head) {
      holds += holds.empty() ? "head" : "+head";
    }
    out +=
        fmt::format("{:>5} {:>6}  {:<14} {:>11} {:>11} {:>11} {:>11} {:>11} {:>9}\n", s, st.layers,
                    holds, detail::gib(st.statics.weights), detail::gib(st.statics.gradients),
                    detail::gib(st.statics.optimizer), detail::gib(st.activations),
                    detail::gib(st.total), fmt::format("{:.3f} s", st.busy_s));
  }
  return out;
}

}  // namespace pipesched
