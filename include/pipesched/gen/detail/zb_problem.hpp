#pragma once

// The zero-bubble search's problem: costs, memory changes and budgets flattened per (stage,
// chunk) and per micro-batch, read by the greedy, the authors' ports, the gap filling, the
// local search and the exact search.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/gen/detail/zb_bound.hpp"
#include "pipesched/gen/detail/zb_objective.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

namespace pipesched::detail {
/// Problem data flattened for the greedy (index s*v + c unless noted).
///
/// Micro-batches that differ (docs/model.md §3.1, §5.1): `varies` is set and the per-(micro-batch,
/// s, c) tables vt*, vd* (index mb·(p·v) + s·v + c) hold each micro-batch's costs and memory
/// changes, which the greedy, the gap filling and the local search read (op_time, op_delta);
/// tf, tb, tw are then each (s, c)'s mean over the micro-batches and mb, mw, df, db, dw its
/// largest (memory_model::envelope): what the authors' heuristics, which take one micro-batch
/// for all, decide with (their orders are re-timed and checked with the real model).
struct greedy_problem {
  placement pl;
  std::uint32_t m = 0;
  std::vector<double> tf, tb, tw;    ///< per (s, c)
  std::vector<double> fcomm;         ///< latency of (s, c)'s F input; 0 for global chunk 0
  std::vector<double> bcomm;         ///< latency of (s, c)'s B input; 0 for the last chunk
  std::vector<stage_deltas> deltas;  ///< per stage: memory_delta by op (the running sum's)
  std::vector<double> mb, mw;        ///< M_B, M_W per (s, c)
  /// Change of live memory by an F, B, W of (s, c): memory_delta (analysis/memory_events.hpp).
  std::vector<double> df, db, dw;
  std::vector<double> reserve;     ///< later_chunk_reserve per (s, c): kept free by an F
  std::vector<double> avail;       ///< per stage: limit − static memory
  std::vector<global_chunk> gl;    ///< global chunk of (s, c)
  std::vector<std::size_t> prev;   ///< flat index of global chunk g−1's (stage, chunk), or npos
  std::vector<std::size_t> next;   ///< flat index of global chunk g+1's (stage, chunk), or npos
  std::vector<std::size_t> flat;   ///< per global chunk: its flat index
  std::vector<stage_index> stage;  ///< per global chunk: its stage
  /// Per (s, c): the first cell (global chunk · m) of its own, its producer's and its
  /// consumer's rows in the per-(chunk, micro-batch) end-time tables (npos when none), and
  /// the producer's and consumer's stages: the hot loop's lookups without a multiply.
  std::vector<std::size_t> own_cell, prev_cell, next_cell;
  std::vector<stage_index> prev_stage, next_stage;
  /// Tolerance for time compares: 1e-9 × the largest op cost or T_comm (1e-9 when all are
  /// 0), so decisions do not depend on the time unit.
  double eps = 1e-9;
  /// Tolerance for memory compares (memory_tolerance): 1e-9 × the largest budget or
  /// activation, whatever the memory unit. Never used for times, nor eps for memory.
  double meps = 1e-9;
  /// What the search minimises (the cuts, the best-first order, the local search).
  search_objective objective;
  /// The timing engine's tables for this problem (time_order): one op_cost per plan entry, or
  /// with per-micro-batch factors the per-micro-batch costs (`timing_mb`).
  traversal_plan plan;
  std::vector<op_cost> timing;
  std::optional<microbatch_costs> timing_mb;
  /// Per-micro-batch costs or memory (above); vt*, vd* hold m·(p·v) values each.
  bool varies = false;
  std::vector<double> vtf, vtb, vtw, vdf, vdb, vdw;
  static constexpr std::size_t npos = std::size_t(-1);

  /// Duration of micro-batch j's F, B or W of flat index i (s·v + c).
  double op_time(std::size_t i, op_kind k, microbatch_index j) const noexcept {
    const std::size_t at = varies ? std::size_t{j} * tf.size() + i : i;
    const std::vector<double>& t = k == op_kind::forward          ? (varies ? vtf : tf)
                                   : k == op_kind::backward_input ? (varies ? vtb : tb)
                                                                  : (varies ? vtw : tw);
    return t[at];
  }

  greedy_problem(placement layout,
                 std::uint32_t microbatches,
                 const shaped_cost_model& costs,
                 const shaped_memory_model& memory,
                 std::vector<double> budget,
                 search_objective goal = {})
      : pl(std::move(layout)),
        m(microbatches),
        avail(std::move(budget)),
        objective(goal),
        plan(pl, false) {
    const std::uint32_t p = pl.stages();
    const std::uint32_t v = pl.chunks();
    const std::size_t n = std::size_t{p} * v;
    tf.resize(n), tb.resize(n), tw.resize(n), fcomm.resize(n), bcomm.resize(n);
    mb.resize(n), mw.resize(n), df.resize(n), db.resize(n), dw.resize(n), reserve.assign(n, 0.0);
    gl.resize(n), prev.assign(n, npos), next.assign(n, npos), flat.assign(n, npos);
    stage.assign(n, 0);
    double scale = 0.0;
    // Sizes and memory changes of (s, c) = i from one micro-batch's chunk_memory.
    auto set_sizes = [&](std::size_t i, const chunk_memory& cm) {
      mb[i] = cm.activation;
      mw[i] = cm.weight_grad_input;
      df[i] = memory_delta(op_kind::forward, cm);
      db[i] = memory_delta(op_kind::backward_input, cm);
      dw[i] = memory_delta(op_kind::backward_weight, cm);
    };
    deltas.reserve(p);
    for (stage_index s = 0; s < p; ++s) {
      deltas.emplace_back(memory, s, v);
      for (chunk_index c = 0; c < v; ++c) {
        const std::size_t i = std::size_t{s} * v + c;
        const op_costs& t = costs.at(s, c);
        tf[i] = t.forward, tb[i] = t.backward_input, tw[i] = t.backward_weight;
        const global_chunk g = pl.global(s, c);
        fcomm[i] = pl.is_first(g) ? 0.0 : costs.comm(pl.stage_of(g - 1), s);
        bcomm[i] = pl.is_last(g) ? 0.0 : costs.comm(pl.stage_of(g + 1), s);
        scale = std::max({scale, tf[i], tb[i], tw[i], fcomm[i], bcomm[i]});
        gl[i] = g;
        flat[g] = i;
        stage[g] = s;
        if (!pl.is_first(g)) {
          prev[i] = std::size_t{pl.stage_of(g - 1)} * v + pl.local_of(g - 1);
        }
        if (!pl.is_last(g)) {
          next[i] = std::size_t{pl.stage_of(g + 1)} * v + pl.local_of(g + 1);
        }
        set_sizes(i, memory.at(s, c));
      }
      for (chunk_index c = 0; c < v; ++c) {
        reserve[std::size_t{s} * v + c] = later_chunk_reserve(pl, memory, s, c);
      }
    }
    own_cell.assign(n, npos), prev_cell.assign(n, npos), next_cell.assign(n, npos);
    prev_stage.assign(n, 0), next_stage.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      own_cell[i] = std::size_t{gl[i]} * m;
      if (prev[i] != npos) {
        prev_cell[i] = std::size_t{gl[prev[i]]} * m;
        prev_stage[i] = static_cast<stage_index>(prev[i] / v);
      }
      if (next[i] != npos) {
        next_cell[i] = std::size_t{gl[next[i]]} * m;
        next_stage[i] = static_cast<stage_index>(next[i] / v);
      }
    }
    varies = costs.has_microbatch_factors() || memory.has_microbatch_factors();
    if (varies) {
      vtf.resize(n * m), vtb.resize(n * m), vtw.resize(n * m);
      vdf.resize(n * m), vdb.resize(n * m), vdw.resize(n * m);
      for (std::size_t i = 0; i < n; ++i) {
        const auto s = static_cast<stage_index>(i / v);
        const auto c = static_cast<chunk_index>(i % v);
        double sf = 0.0;
        double sb = 0.0;
        double sw = 0.0;
        for (microbatch_index j = 0; j < m; ++j) {
          const std::size_t at = std::size_t{j} * n + i;
          const op_costs t = costs.at(s, c, j);
          vtf[at] = t.forward, vtb[at] = t.backward_input, vtw[at] = t.backward_weight;
          scale = std::max({scale, t.forward, t.backward_input, t.backward_weight});
          sf += t.forward, sb += t.backward_input, sw += t.backward_weight;
          const chunk_memory cm = memory.at(s, c, j);
          vdf[at] = memory_delta(op_kind::forward, cm);
          vdb[at] = memory_delta(op_kind::backward_input, cm);
          vdw[at] = memory_delta(op_kind::backward_weight, cm);
        }
        tf[i] = sf / double(m), tb[i] = sb / double(m), tw[i] = sw / double(m);
        set_sizes(i, memory.envelope(s, c));
      }
      timing_mb.emplace(plan, pl, costs);
    }
    eps = 1e-9 * (scale > 0.0 ? scale : 1.0);
    meps = memory_tolerance(pl, memory, avail);
    timing = cost_table(plan, pl, costs);
  }
};

}  // namespace pipesched::detail
