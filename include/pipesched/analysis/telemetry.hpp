#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/model/cost_model.hpp"

// Telemetry in, straggler out (docs/robustness.md §5): robust per-stage, per-kind cost
// estimates from measured op timings, stragglers flagged against their peers, and the
// measured costs as a cost_model to re-plan with (gen/replan.hpp). Readers of our Chrome
// traces and of a plain CSV are in io/telemetry_io.hpp.

namespace pipesched {

/// One measured run: the ops with their times (any unit; times only matter as differences),
/// and the shape they came from. `ops` may be in any order.
struct measured_run {
  std::string name;  ///< the schedule's name when the source gives it
  placement layout;  ///< stages, chunks per stage and which global chunk each local one is
  std::uint32_t microbatches = 0;
  std::vector<timed_op> ops;
};

/// Median and median absolute deviation of one (stage, kind)'s op durations.
struct duration_estimate {
  std::size_t count = 0;
  double median = 0.0;
  double mad = 0.0;  ///< median of |duration − median|: robust spread, 0.6745·σ for a normal
};

/// Robust costs of one stage, per kind (absent: no op of that kind measured). Per op, i.e.
/// per chunk when the stage holds several (cost_model's per-stage value is v times that).
struct stage_estimate {
  std::optional<duration_estimate> forward, backward_input, backward_weight, backward_full;
  /// R, the recompute of an F (absent: the stage recomputed nothing).
  std::optional<duration_estimate> recompute;
  /// The stage's measured time per micro-batch, all its chunks: v · (F + B + W medians), or
  /// v · (F + BW), plus its R median times the share of its F it re-ran; at v = 2 a chunk's
  /// F + B + W is half of it.
  double per_microbatch = 0.0;
};

/// The median of `v` (the mean of the two middle values for an even count); 0 when empty.
inline double median_of(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  const std::size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2), v.end());
  const double hi = v[n / 2];
  if (n % 2 == 1) {
    return hi;
  }
  return 0.5 * (hi + *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n / 2)));
}

/// Per-stage, per-kind duration estimates (median, MAD) of a measured run. Throws
/// invalid_argument for an op on a stage outside the run's layout or with a negative duration.
inline std::vector<stage_estimate> estimate_costs(const measured_run& run) {
  const std::uint32_t p = run.layout.stages();
  std::vector<std::vector<std::vector<double>>> d(p, std::vector<std::vector<double>>(5));
  for (const timed_op& t : run.ops) {
    if (t.stage >= p) {
      detail::fail("estimate_costs: op ", to_string(t.o.kind), " on stage ", t.stage,
                   " is outside the run's stages (p=", p, ")");
    }
    if (!(t.end >= t.start)) {
      detail::fail("estimate_costs: op ", to_string(t.o.kind), t.o.mb, " on stage ", t.stage,
                   " ends (", t.end, ") before it starts (", t.start, ")");
    }
    const auto k = static_cast<std::size_t>(t.o.kind);
    if (k < 5) {  // F, B, W, BW, R; communication carries no compute cost here
      d[t.stage][k].push_back(t.duration());
    }
  }
  std::vector<stage_estimate> out(p);
  const double v = run.layout.chunks() == 0 ? 1.0 : run.layout.chunks();
  for (stage_index s = 0; s < p; ++s) {
    std::optional<duration_estimate> e[5];
    for (std::size_t k = 0; k < 5; ++k) {
      if (d[s][k].empty()) {
        continue;
      }
      duration_estimate x;
      x.count = d[s][k].size();
      x.median = median_of(d[s][k]);
      std::vector<double> dev;
      dev.reserve(x.count);
      for (double y : d[s][k]) {
        dev.push_back(std::abs(y - x.median));
      }
      x.mad = median_of(std::move(dev));
      e[k] = x;
    }
    stage_estimate& st = out[s];
    st.forward = e[0];
    st.backward_input = e[1];
    st.backward_weight = e[2];
    st.backward_full = e[3];
    st.recompute = e[4];
    auto med = [](const std::optional<duration_estimate>& x) { return x ? x->median : 0.0; };
    st.per_microbatch =
        v * (med(st.forward) + (st.backward_full && !st.backward_input
                                    ? med(st.backward_full)
                                    : med(st.backward_input) + med(st.backward_weight)));
    if (st.recompute && st.forward) {
      st.per_microbatch += v * st.recompute->median * static_cast<double>(st.recompute->count) /
                           static_cast<double>(st.forward->count);
    }
  }
  return out;
}

/// When a stage counts as a straggler: its time per micro-batch (stage_estimate) exceeds the
/// median of the other stages' by more than `absolute` (in the run's time unit) and by more
/// than `relative` (a fraction). Both must hold: the absolute one ignores slowdowns too small
/// to act on, the relative one differences within the run's noise.
struct straggler_thresholds {
  double absolute = 0.0;
  double relative = 0.03;
};

/// A stage found slower than it should be. Against its peers (find_stragglers on estimates):
/// `peers` is the median of the other stages' per_microbatch. Against a plan (find_stragglers
/// on stage_against_plan): `per_microbatch` is the stage's measured compute time per
/// micro-batch (the mean: Σ of its ops / m) and `peers` its planned time at the speed its peers
/// ran their plans, both in the run's unit.
struct straggler {
  stage_index stage = 0;
  double per_microbatch = 0.0;  ///< the stage's time per micro-batch (all its chunks)
  double peers = 0.0;           ///< what it is compared with (see above)
  double excess = 0.0;          ///< per_microbatch − peers
  double relative = 0.0;        ///< excess / peers
  bool against_plan = false;    ///< compared with its own plan, not with its peers' times
};

namespace detail {

inline void check_straggler_thresholds(const straggler_thresholds& th) {
  if (!std::isfinite(th.absolute) || th.absolute < 0.0) {
    fail_field("find_stragglers", "absolute", "threshold must be finite and >= 0, got ",
               th.absolute);
  }
  if (!std::isfinite(th.relative) || th.relative < 0.0) {
    fail_field("find_stragglers", "relative", "threshold must be finite and >= 0, got ",
               th.relative);
  }
}

/// The one rule of both find_stragglers: `x` (per_microbatch and peers set) is a straggler
/// when its excess passes both thresholds; appended to `out` then.
inline void keep_if_straggler(straggler x,
                              const straggler_thresholds& th,
                              std::vector<straggler>& out) {
  x.excess = x.per_microbatch - x.peers;
  x.relative = x.peers > 0.0 ? x.excess / x.peers : 0.0;
  if (x.excess > th.absolute && x.relative > th.relative) {
    out.push_back(x);
  }
}

inline void sort_stragglers(std::vector<straggler>& out) {
  std::sort(out.begin(), out.end(),
            [](const straggler& a, const straggler& b) { return a.excess > b.excess; });
}

}  // namespace detail

/// The stragglers among the stages, slowest first. Needs at least 2 stages (else none).
inline std::vector<straggler> find_stragglers(const std::vector<stage_estimate>& est,
                                              const straggler_thresholds& th = {}) {
  detail::check_straggler_thresholds(th);
  std::vector<straggler> out;
  for (stage_index s = 0; s < est.size(); ++s) {
    std::vector<double> others;
    for (stage_index t = 0; t < est.size(); ++t) {
      if (t != s) {
        others.push_back(est[t].per_microbatch);
      }
    }
    if (others.empty()) {
      break;
    }
    straggler x;
    x.stage = s;
    x.per_microbatch = est[s].per_microbatch;
    x.peers = median_of(std::move(others));
    detail::keep_if_straggler(x, th, out);
  }
  detail::sort_stragglers(out);
  return out;
}

/// One stage of a measured run against the plan it ran: its ops' measured durations and the
/// plan's durations of the same ops (each micro-batch's own, with per-micro-batch factors).
struct stage_against_plan {
  double measured = 0.0;  ///< Σ of the stage's compute ops' durations, in the run's unit
  double planned = 0.0;   ///< Σ of the same ops' planned durations, in the plan's unit
};

/// Each stage's compute ops (F, B, W, BW, R) measured and planned: every op of the run timed by
/// `costs` (read for the run's p, v and m: cost_model::duration of its micro-batch), so a run
/// that is exactly the plan gives measured = planned in every stage, whatever the micro-batches'
/// lengths. An overlapped pair (two ops of a stage over the same interval) counts its interval
/// once, planned as its two ops less its F's overlap gain. Throws invalid_argument, prefixed by
/// `who`, when `costs` does not have the run's shape or an op is outside it.
inline std::vector<stage_against_plan> compare_with_plan(const measured_run& run,
                                                         const cost_model& costs,
                                                         std::string_view who) {
  const std::uint32_t p = run.layout.stages();
  const std::uint32_t v = std::max<std::uint32_t>(run.layout.chunks(), 1);
  const shaped_cost_model c = costs.for_shape(p, v, run.microbatches, who);
  std::vector<std::vector<timed_op>> rows(p);
  for (const timed_op& t : run.ops) {
    if (t.stage >= p || t.o.chunk >= v || t.o.mb >= run.microbatches) {
      detail::fail(who, ": op ", to_string(t.o, v > 1), " on stage ", t.stage,
                   " is outside the run (p=", p, ", v=", v, ", m=", run.microbatches, ")");
    }
    if (is_compute(t.o.kind)) {
      rows[t.stage].push_back(t);
    }
  }
  std::vector<stage_against_plan> out(p);
  for (stage_index s = 0; s < p; ++s) {
    std::vector<timed_op>& row = rows[s];
    std::stable_sort(row.begin(), row.end(), [](const timed_op& a, const timed_op& b) {
      return a.start != b.start ? a.start < b.start : a.index < b.index;
    });
    auto planned = [&](const op& o) { return c.duration(s, o.kind, o.chunk, o.mb); };
    for (std::size_t i = 0; i < row.size(); ++i) {
      const timed_op& a = row[i];
      out[s].measured += a.duration();
      out[s].planned += planned(a.o);
      if (i + 1 < row.size() && row[i + 1].start == a.start && row[i + 1].end == a.end &&
          a.end > a.start) {
        const op& b = row[i + 1].o;
        const op& f = a.o.kind == op_kind::forward ? a.o : b;
        out[s].planned +=
            planned(b) - (f.kind == op_kind::forward ? c.overlap_gain(s, f.chunk, f.mb) : 0.0);
        ++i;
      }
    }
  }
  return out;
}

/// The stragglers against a plan, slowest first: each stage's measured time against its own
/// planned time at the speed of its peers (the median over the other stages of measured /
/// planned), so stages the plan made unequal are not flagged, and a run uniformly slower than
/// planned (a lower achieved fraction: calibrate_achieved_fraction) flags none. The thresholds
/// are those of the other find_stragglers, per micro-batch in the run's unit. Needs at least 2
/// stages with planned time (else none).
inline std::vector<straggler> find_stragglers(const std::vector<stage_against_plan>& per_stage,
                                              std::uint32_t microbatches,
                                              const straggler_thresholds& th = {}) {
  detail::check_straggler_thresholds(th);
  const double m = microbatches == 0 ? 1.0 : microbatches;
  std::vector<straggler> out;
  for (stage_index s = 0; s < per_stage.size(); ++s) {
    std::vector<double> speeds;
    for (stage_index t = 0; t < per_stage.size(); ++t) {
      if (t != s && per_stage[t].planned > 0.0) {
        speeds.push_back(per_stage[t].measured / per_stage[t].planned);
      }
    }
    if (speeds.empty()) {
      continue;
    }
    straggler x;
    x.stage = s;
    x.against_plan = true;
    x.per_microbatch = per_stage[s].measured / m;
    x.peers = per_stage[s].planned * median_of(std::move(speeds)) / m;
    detail::keep_if_straggler(x, th, out);
  }
  detail::sort_stragglers(out);
  return out;
}

/// The measured costs as a cost model (per stage, so v times the per-chunk medians) with
/// latency `comm`. A stage that ran fused BW only gets T_B = T_W = BW / 2 (a trace of fused
/// backwards can't tell them apart); a kind not measured at all takes the median of the stages
/// that measured it, or 0. A stage that ran R ops gets their median as T_R (a recompute is
/// not always a whole forward: selective recompute re-runs the attention core only); one that
/// ran none keeps T_R unset.
inline cost_model measured_cost_model(const std::vector<stage_estimate>& est,
                                      std::uint32_t chunks,
                                      double comm = 0.0) {
  auto column = [&](auto get) {
    std::vector<double> v;
    for (const stage_estimate& e : est) {
      if (const auto& x = get(e)) {
        v.push_back(x->median);
      }
    }
    return median_of(std::move(v));
  };
  const double fill_f = column([](const stage_estimate& e) { return e.forward; });
  const double fill_b = column([](const stage_estimate& e) { return e.backward_input; });
  const double fill_w = column([](const stage_estimate& e) { return e.backward_weight; });
  const double fill_bw = column([](const stage_estimate& e) { return e.backward_full; });
  std::vector<op_costs> table;
  const double v = chunks == 0 ? 1.0 : chunks;
  for (const stage_estimate& e : est) {
    op_costs c;
    c.forward = v * (e.forward ? e.forward->median : fill_f);
    if (e.backward_input || e.backward_weight || fill_b > 0.0 || fill_w > 0.0) {
      c.backward_input = v * (e.backward_input ? e.backward_input->median : fill_b);
      c.backward_weight = v * (e.backward_weight ? e.backward_weight->median : fill_w);
    } else {
      const double bw = v * (e.backward_full ? e.backward_full->median : fill_bw);
      c.backward_input = bw / 2;
      c.backward_weight = bw / 2;
    }
    if (e.recompute) {
      c.recompute = v * e.recompute->median;
    }
    table.push_back(c);
  }
  cost_model m;
  m.set_stage_costs(std::move(table)).set_comm(comm);
  return m;
}

/// The measured costs per (stage, local chunk): each chunk's own medians, by
/// measured_cost_model's rules with every chunk taken as a stage of its own. A chunk holding
/// the embedding or the head then costs what it measured, not its stage's median, so the run's
/// own order (and any order of its placement) is timed as it ran. Only for the run's placement:
/// a placement that puts other layers in a local chunk needs measured_cost_model.
inline cost_model measured_chunk_cost_model(const measured_run& run, double comm = 0.0) {
  const std::uint32_t p = run.layout.stages();
  const std::uint32_t v = std::max<std::uint32_t>(run.layout.chunks(), 1);
  measured_run flat;
  flat.layout = placement::sequential(p * v);
  flat.microbatches = run.microbatches;
  for (const timed_op& t : run.ops) {
    if (t.stage < p && t.o.chunk < v && is_compute(t.o.kind)) {
      timed_op x = t;
      x.stage = t.stage * v + t.o.chunk;
      x.o.chunk = 0;
      flat.ops.push_back(x);
    }
  }
  const shaped_cost_model per_chunk =
      measured_cost_model(estimate_costs(flat), 1).for_shape(p * v, 1, "measured_chunk_cost_model");
  std::vector<op_costs> table;
  for (std::uint32_t i = 0; i < p * v; ++i) {
    table.push_back(per_chunk.at(i, 0));
  }
  cost_model m;
  m.set_chunk_costs(v, std::move(table)).set_comm(comm);
  return m;
}

/// Ops of one stage whose measured intervals overlap: a stage runs one op at a time (ops that
/// start together are an overlapped pair, docs/model.md §1, and do not count).
struct measured_overlap {
  stage_index stage = 0;
  timed_op first, second;  ///< first starts before second and ends after second starts
  std::string describe(bool chunked) const {
    return detail::concat("stage ", stage, ": ", to_string(first.o, chunked), " (", first.start,
                          " .. ", first.end, ") overlaps ", to_string(second.o, chunked), " (",
                          second.start, " .. ", second.end, ")");
  }
};

/// Checks that `run` measured each op once and returns the overlaps. Throws invalid_argument
/// naming the stage, the op and both times when an op (same stage, kind, chunk and
/// micro-batch) was measured twice.
inline std::vector<measured_overlap> check_measured_ops(const measured_run& run,
                                                        std::string_view who) {
  const bool chunked = run.layout.chunks() > 1;
  std::vector<timed_op> ops = run.ops;
  std::stable_sort(ops.begin(), ops.end(), [](const timed_op& a, const timed_op& b) {
    return a.stage != b.stage ? a.stage < b.stage
                              : (a.start != b.start ? a.start < b.start : a.index < b.index);
  });
  std::vector<measured_overlap> overlaps;
  // `cover`: the op with the latest end so far on the stage (an op inside a long one overlaps
  // it even when the op just before ended first).
  const timed_op* cover = nullptr;
  for (const timed_op& b : ops) {
    if (cover != nullptr && cover->stage == b.stage) {
      // A trace writes start and duration, so an end read back can pass the next start by a
      // rounding error: an overlap below one part in 1e9 of the times is not one.
      const double rounding = 1e-9 * std::max({std::fabs(cover->end), std::fabs(b.start), 1e-300});
      if (cover->start < b.start && cover->end - b.start > rounding) {
        overlaps.push_back({b.stage, *cover, b});
      }
      if (b.end > cover->end) {
        cover = &b;
      }
    } else {
      cover = &b;
    }
  }
  std::vector<timed_op> keyed = run.ops;
  auto key = [](const timed_op& t) {
    return std::make_tuple(t.stage, static_cast<int>(t.o.kind), t.o.chunk, t.o.mb);
  };
  std::stable_sort(keyed.begin(), keyed.end(), [&](const timed_op& a, const timed_op& b) {
    return key(a) != key(b) ? key(a) < key(b) : a.start < b.start;
  });
  for (std::size_t i = 1; i < keyed.size(); ++i) {
    if (key(keyed[i]) == key(keyed[i - 1])) {
      detail::fail(who, ": stage ", keyed[i].stage, " ran ", to_string(keyed[i].o, chunked),
                   " twice (at ", keyed[i - 1].start, " and at ", keyed[i].start,
                   "): a trace has each op once");
    }
  }
  return overlaps;
}

/// The order each stage ran, from the measured ops sorted by start time (ties: the recorded
/// list index): a schedule to validate, simulate and compare a re-plan with. An F that an R of
/// the run re-runs is marked recompute (is_recomputed): a timing CSV and traces written before
/// the trace's "recompute" argument do not say it, and in a valid order an F is marked exactly
/// when it has an R (docs/model.md §1).
inline schedule order_of(const measured_run& run) {
  schedule s = schedule::on(run.name.empty() ? std::string("measured") : run.name, run.layout,
                            run.microbatches);
  std::vector<timed_op> ops = run.ops;
  std::stable_sort(ops.begin(), ops.end(), [](const timed_op& a, const timed_op& b) {
    return a.stage != b.stage ? a.stage < b.stage
                              : (a.start != b.start ? a.start < b.start : a.index < b.index);
  });
  for (const timed_op& t : ops) {
    if (t.stage >= s.stages()) {
      detail::fail("order_of: op on stage ", t.stage,
                   " is outside the run's stages (p=", s.stages(), ")");
    }
    s.stage_ops(t.stage).push_back(t.o);
  }
  for (stage_index st = 0; st < s.stages(); ++st) {
    std::vector<std::pair<chunk_index, microbatch_index>> rerun;
    for (const op& o : s.ops(st)) {
      if (o.kind == op_kind::recompute) {
        rerun.emplace_back(o.chunk, o.mb);
      }
    }
    if (rerun.empty()) {
      continue;
    }
    std::sort(rerun.begin(), rerun.end());
    for (op& o : s.stage_ops(st)) {
      if (o.kind == op_kind::forward &&
          std::binary_search(rerun.begin(), rerun.end(), std::make_pair(o.chunk, o.mb))) {
        o = recomputing(o);
      }
    }
  }
  return s;
}

}  // namespace pipesched
