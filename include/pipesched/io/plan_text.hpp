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

/// Bytes for a reader: GiB with one decimal (0 as 0.0 GiB), or below 0.05 GiB the unit that
/// keeps the number readable (MiB, KiB, B), so no size other than 0 reads as "0.0 GiB".
inline std::string gib(double bytes) {
  constexpr double kib = 1024.0, mib = kib * 1024.0, gib_bytes = mib * 1024.0;
  const double a = std::fabs(bytes);
  if (a >= 1e6 * gib_bytes) {
    return fmt::format("{:.3g} GiB", bytes / gib_bytes);  // not a million digits
  }
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

/// FLOP/s for a reader in the decimal unit that fits, up to TFLOP/s (989 TFLOP/s, 1979
/// TFLOP/s, 1.00 kFLOP/s), with three significant digits or more; below 1 FLOP/s or from 10^18
/// on in powers of ten ("1e+300 FLOP/s": not 300 digits).
inline std::string flops(double per_s) {
  const char* unit[] = {"FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s"};
  const double whole = std::fabs(per_s);
  if (whole != 0.0 && (whole < 1.0 || whole >= 1e18)) {
    return fmt::format("{:.3g} FLOP/s", per_s);
  }
  int i = 0;
  while (std::fabs(per_s) >= 999.5 && i < 4) {
    per_s /= 1000.0;
    ++i;
  }
  const double a = std::fabs(per_s);
  return fmt::format("{:.{}f} {}", per_s, a >= 99.95 || a == 0.0 ? 0 : a >= 9.995 ? 1 : 2, unit[i]);
}

/// Seconds for a reader: `decimals` decimals ("0.380 s"); a time too small to show any (but
/// not 0) in the unit that fits ("400 us", "3.5 us", "2 ns"), below a nanosecond or above
/// 10^9 s in powers of ten ("1.4e+298 s"), so no time other than 0 reads as "0.000 s".
inline std::string seconds(double s, int decimals = 3) {
  const double a = std::fabs(s);
  if (a == 0.0 || (a >= 0.5 * std::pow(10.0, -decimals) && a < 1e9)) {
    return fmt::format("{:.{}f} s", s, decimals);
  }
  if (a >= 1e9 || a < 1e-9) {
    return fmt::format("{:.3g} s", s);
  }
  return a >= 1e-3   ? fmt::format("{:.3g} ms", s * 1e3)
         : a >= 1e-6 ? fmt::format("{:.3g} us", s * 1e6)
                     : fmt::format("{:.3g} ns", s * 1e9);
}

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
      "{:.1f} %, communication {:.1f} % of {}\n",
      100.0 * k[time_kind::gemm] / total, 100.0 * k[time_kind::attention] / total,
      100.0 * k[time_kind::memory_bound] / total, 100.0 * k[time_kind::communication] / total,
      seconds(total));
}

/// A fraction as a percentage with `decimals` decimals ("40.6 %"); a share too small to show
/// any (but not 0) with two significant digits ("0.00012 %"), so none other than 0 reads as
/// "0 %" or "0.0 %". |x| <= `noise` is 0: a bubble rate of -1.8e-16 is a rounding error.
inline std::string percent(double fraction, int decimals = 1, double noise = 0.0) {
  const double v = std::fabs(fraction) <= noise ? 0.0 : 100.0 * fraction;
  const double a = std::fabs(v);
  if (a != 0.0 && a < 0.5 * std::pow(10.0, -decimals)) {
    return fmt::format("{:.2g} %", v);
  }
  return fmt::format("{:.{}f} %", v, decimals);
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

/// One row of the plans table; `cp_column`: the table has a CP column (some plan has CP > 1);
/// `ep_column` an EP column (some plan has EP > 1).
inline std::string plan_row_text(const std::string& rank,
                                 const plan_entry& e,
                                 bool cp_column,
                                 bool ep_column = false) {
  const plan_layout& l = e.choice.layout;
  return fmt::format(
      "{:>4}  {:>2}{} {:>3} {:>5}{} {:>2} {:>2} {:>4}  {:<16} {:<9} {:<3} {:>9} {:>11} {:>8} "
      "{:>8} {:>8} {:>10}{}\n",
      rank, l.tp, cp_column ? fmt::format(" {:>3}", l.cp) : std::string(), l.pp, l.dp,
      ep_column ? fmt::format(" {:>3}", l.ep) : std::string(), l.chunks, l.micro_batch,
      l.microbatches, e.choice.schedule, to_string(e.choice.recompute),
      l.sequence_parallel ? "on" : "off", seconds(e.step_time_s),
      si_count(e.tokens_per_s) + " tok/s", tflops_cell(e.tflops_per_gpu), percent(e.mfu),
      percent(e.bubble_rate, 1, 1e-12), gib(e.peak_memory_bytes), e.fits ? "" : "  (does not fit)");
}

inline std::string plan_header_text(bool cp_column, bool ep_column = false) {
  return fmt::format(
      "{:>4}  {:>2}{} {:>3} {:>5}{} {:>2} {:>2} {:>4}  {:<16} {:<9} {:<3} {:>9} {:>11} {:>8} "
      "{:>8} {:>8} {:>10}\n",
      "#", "TP", cp_column ? "  CP" : "", "PP", "DP", ep_column ? "  EP" : "", "v", "b", "m",
      "schedule", "recompute", "SP", "step", "throughput", "TFLOP/s", "MFU", "bubble", "peak/GPU");
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
      "usable memory {} per GPU ({} of {}); optimizer sharding: {}; achieved {} of "
      "the {} peak\n",
      detail::gib(job.cluster.usable_memory()), detail::percent(job.cluster.usable_fraction, 0),
      detail::gib(job.cluster.memory_bytes), to_string(job.sharding),
      detail::percent(job.cluster.achieved_fraction, 0),
      detail::flops(job.cluster.peak_flops(job.model.activation_bytes)));
  out += fmt::format(
      "search: {} candidates, {} evaluated, {} cannot fit, {} cannot beat the plans kept, {} "
      "refused by their generator, in {:.2f} s\n\n",
      r.stats.candidates, r.stats.evaluated, r.stats.pruned_memory, r.stats.pruned_time,
      r.stats.failed, r.stats.seconds);
  // A CP column only when some row has context parallelism, an EP column when some has
  // expert parallelism.
  bool cp = r.baseline && r.baseline->choice.layout.cp > 1;
  bool ep = r.baseline && r.baseline->choice.layout.ep > 1;
  for (const auto* v : {&r.plans, &r.other_baselines}) {
    for (const plan_entry& e : *v) {
      cp = cp || e.choice.layout.cp > 1;
      ep = ep || e.choice.layout.ep > 1;
    }
  }
  // The baselines after the first: rows b2, b3, ...
  auto other_rows = [&] {
    std::string rows;
    for (std::size_t i = 0; i < r.other_baselines.size(); ++i) {
      rows += detail::plan_row_text("b" + std::to_string(i + 2), r.other_baselines[i], cp, ep);
    }
    return rows;
  };
  if (r.plans.empty()) {
    out += plan_misfit_text(job, r) + "\n";
    if (r.baseline || !r.other_baselines.empty()) {  // evaluated all the same: so is the JSON
      out += "\n" + detail::plan_header_text(cp, ep) +
             (r.baseline ? detail::plan_row_text("base", *r.baseline, cp, ep) : std::string()) +
             other_rows();
    }
    return out;
  }
  out += detail::plan_header_text(cp, ep);
  for (std::size_t i = 0; i < r.plans.size(); ++i) {
    out += detail::plan_row_text(std::to_string(i + 1), r.plans[i], cp, ep);
  }
  const plan_entry& best = r.plans.front();
  if (r.baseline) {
    out += detail::plan_row_text("base", *r.baseline, cp, ep);
  }
  out += other_rows();
  if (r.baseline) {
    const plan_comparison c = compare_plans(best, *r.baseline, job.gpus);
    out += fmt::format(
        "\nplan 1 is {:.3f}x the baseline's speed: {} of each step, {:.0f} GPUs' worth of "
        "time recovered at {} GPUs{}\n",
        c.speedup, detail::percent(c.time_saved), c.gpus_recovered, job.gpus,
        r.baseline->fits ? "" : " (the baseline does not fit in memory)");
  }
  for (std::size_t i = 0; i < r.other_baselines.size(); ++i) {
    const plan_entry& b = r.other_baselines[i];
    const plan_comparison c = compare_plans(best, b, job.gpus);
    out += fmt::format("{}plan 1 is {:.3f}x baseline b{}'s speed: {} of each step{}\n",
                       r.baseline || i > 0 ? "" : "\n", c.speedup, i + 2,
                       detail::percent(c.time_saved), b.fits ? "" : " (it does not fit in memory)");
  }
  out += fmt::format(
      "\nplan 1 per stage (per GPU; step {} = pipeline {} + data-parallel reduction {} not "
      "hidden + optimizer step {}):\n",
      detail::seconds(best.step_time_s), detail::seconds(best.makespan_s),
      detail::seconds(best.dp_exposed_s), detail::seconds(best.optimizer_s));
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
                    detail::gib(st.total), detail::seconds(st.busy_s));
  }
  return out;
}

}  // namespace pipesched
