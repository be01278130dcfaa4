#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/analysis/validate.hpp"
#include "pipesched/ir/detail/recompute_order.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

// Activation recomputation (docs/model.md §1, §3, §5): the F of a chosen chunk keeps only its
// input, and an R re-runs it before the backward. Where the R goes is the decision this
// transform makes.

namespace pipesched {

/// Where with_recompute() puts each R.
enum class recompute_placement : std::uint8_t {
  /// Right before its B / BW (before the pair when that backward is the second op of an
  /// overlapped pair): the least memory, the activations rebuilt only when needed.
  before_backward,
  /// In the earliest idle gap of its stage, after its F, that the R fits in whole and that
  /// keeps the stage's memory within the limit (recompute_options::memory_limit); an R that fits
  /// no gap stays before its backward. Starts from before_backward, so the span never grows
  /// (an R in a gap it fits delays nothing, and its backward no longer waits for it).
  idle_slot,
};

constexpr std::string_view to_string(recompute_placement p) noexcept {
  return p == recompute_placement::before_backward ? "before-backward" : "idle-slot";
}

/// The placement named `name` (to_string's spelling), nullopt for any other name.
constexpr std::optional<recompute_placement> parse_recompute_placement(
    std::string_view name) noexcept {
  for (recompute_placement p :
       {recompute_placement::before_backward, recompute_placement::idle_slot}) {
    if (name == to_string(p)) {
      return p;
    }
  }
  return std::nullopt;
}

/// Options of with_recompute().
struct recompute_options {
  recompute_placement placement = recompute_placement::before_backward;
  /// idle_slot: the costs that find the idle gaps (R lasts T_R, or T_F when unset).
  cost_model costs{};
  /// idle_slot: the sizes (M_B, M_in) that decide how much memory an earlier R holds.
  memory_model memory{};
  /// idle_slot: per-stage memory limits (static included), one value or one per stage. None:
  /// each stage's peak with every R before its backward, so moving R never raises a peak.
  memory_limits memory_limit{};
};

/// Every global chunk of `sched`: what `--recompute all` selects.
inline std::vector<global_chunk> all_chunks(const schedule& sched) {
  std::vector<global_chunk> out(sched.layout().total_chunks());
  for (global_chunk g = 0; g < out.size(); ++g) {
    out[g] = g;
  }
  return out;
}

namespace detail {

inline void require_recomputable(const schedule& sched,
                                 const std::vector<global_chunk>& chunks,
                                 const recompute_options& opts) {
  const placement& pl = sched.layout();
  if (sched.has_comm()) {
    fail("with_recompute: schedule \"", sched.name(),
         "\" has SEND / RECV ops: add recomputation before lower_communication");
  }
  for (global_chunk g : chunks) {
    if (g >= pl.total_chunks()) {
      fail("with_recompute: chunk (", g, ") must be < the number of global chunks (",
           pl.total_chunks(), ")");
    }
  }
  opts.memory_limit.check("with_recompute", "memory_limit", pl.stages());
  for (stage_index s = 0; s < sched.stages(); ++s) {
    for (const op& o : sched.ops(s)) {
      if (o.kind == op_kind::recompute || is_recomputed(o)) {
        fail("with_recompute: schedule \"", sched.name(), "\" already recomputes (",
             to_string(o, pl.chunks() > 1), " on stage ", s, ")");
      }
    }
  }
  const validation_report r = validate(sched, {1, true});
  if (!r.ok()) {
    fail("with_recompute: schedule \"", sched.name(),
         "\" is invalid: ", r.violations.front().message);
  }
}

// One round of moving R into earlier idle gaps (recompute_placement::idle_slot), with the
// times of `sched` as upper bounds: an R placed in a gap it fits ends before the gap's next op
// started, so no op starts later and the moves of one round stay valid together. Returns
// whether any R moved.
inline bool move_recompute_into_gaps(schedule& sched,
                                     const shaped_cost_model& costs,
                                     const shaped_memory_model& memory,
                                     const memory_limits& limits) {
  const simulation_result sim = simulate(sched, costs, {true, false, false});
  if (sim.deadlock) {
    fail("with_recompute: schedule \"", sched.name(), "\" deadlocks");
  }
  bool moved_any = false;
  for (stage_index s = 0; s < sched.stages(); ++s) {
    std::vector<op>& list = sched.stage_ops(s);
    const std::size_t n = list.size();
    const auto& t = sim.ops[s];
    // Memory after each op, in list order (the memory engine's running sum).
    std::vector<double> cur(n);
    walk_live_memory(list, memory.static_memory(s),
                     stage_deltas(memory, s, sched.layout().chunks()),
                     [&](std::size_t i, double value) {
                       cur[i] = value;
                       return true;
                     });
    const double limit = limits.at(s);
    std::vector<double> used(n, 0.0);      // gap time before op j already taken
    std::vector<std::vector<op>> into(n);  // R moved before op j, in move order
    std::vector<bool> gone(n, false);      // R moved away from its place
    for (std::size_t i = 0; i < n; ++i) {
      if (list[i].kind != op_kind::recompute) {
        continue;
      }
      const op r = list[i];
      std::size_t f = i;
      while (f > 0 && !(list[f - 1].kind == op_kind::forward && list[f - 1].mb == r.mb &&
                        list[f - 1].chunk == r.chunk)) {
        --f;
      }
      if (f == 0) {
        continue;  // validated: its F is before it
      }
      const std::size_t fi = f - 1;
      const double d = costs.duration(s, op_kind::recompute, r.chunk, r.mb);
      const chunk_memory cm = memory.at(s, r.chunk, r.mb);
      const double extra = cm.activation - cm.input;  // held longer when R runs earlier
      for (std::size_t j = fi + 1; j < i; ++j) {
        if (overlaps_next(list[j - 1])) {
          continue;  // would split a pair
        }
        const double gap = t[j].start - t[j - 1].end - used[j];
        if (d > gap + 1e-9 * std::max(1.0, std::abs(gap))) {
          continue;
        }
        bool fits = true;
        if (extra > 0.0) {
          for (std::size_t k = j - 1; k < i && fits; ++k) {
            fits = cur[k] + extra <= limit_threshold(limit);
          }
        }
        if (!fits) {
          continue;
        }
        used[j] += d;
        into[j].push_back(r);
        gone[i] = true;
        for (std::size_t k = j - 1; k < i; ++k) {
          cur[k] += extra;
        }
        moved_any = true;
        break;
      }
    }
    std::vector<op> rebuilt;
    rebuilt.reserve(n);
    for (std::size_t j = 0; j < n; ++j) {
      rebuilt.insert(rebuilt.end(), into[j].begin(), into[j].end());
      if (!gone[j]) {
        rebuilt.push_back(list[j]);
      }
    }
    list = std::move(rebuilt);
  }
  return moved_any;
}

}  // namespace detail

/// `sched` with activation recomputation for the global chunks `chunks` (docs/model.md §1):
/// each F of those chunks is marked recompute (it keeps only its input, M_in) and an R of the
/// same micro-batch and chunk is placed after it and before its B / BW, where
/// `opts.placement` says. Other ops keep their order. `sched` must be valid and compute-only
/// (no SEND / RECV: lower communication afterwards) and not recompute already; chunks must be
/// < total chunks (duplicates are fine). Throws invalid_argument otherwise.
inline schedule with_recompute(const schedule& sched,
                               const std::vector<global_chunk>& chunks,
                               const recompute_options& opts = {}) {
  detail::require_recomputable(sched, chunks, opts);
  const placement& pl = sched.layout();
  std::vector<bool> chosen(pl.total_chunks(), false);
  for (global_chunk g : chunks) {
    chosen[g] = true;
  }
  schedule out = detail::recompute_before_backward(sched, chosen);
  if (opts.placement == recompute_placement::idle_slot) {
    const std::uint32_t m = sched.microbatches();
    const shaped_cost_model costs =
        opts.costs.for_shape(pl.stages(), pl.chunks(), m, "with_recompute");
    const shaped_memory_model memory =
        opts.memory.for_shape(pl.stages(), pl.chunks(), m, "with_recompute");
    memory_limits limits = opts.memory_limit;
    if (!limits) {
      std::vector<double> peaks(pl.stages());
      for (stage_index s = 0; s < pl.stages(); ++s) {
        peaks[s] = stage_peak(out.ops(s), memory, s, pl.chunks());
      }
      limits = std::move(peaks);
    }
    // A round moves each R at most once into a gap of the previous timing; the next round's
    // timing may open earlier gaps. A few rounds settle it.
    for (int round = 0; round < 4; ++round) {
      if (!detail::move_recompute_into_gaps(out, costs, memory, limits)) {
        break;
      }
    }
  }
  return out;
}

/// `sched` without its recomputation: the R ops dropped and the F marks cleared, the order of
/// the other ops kept. What a runtime that recomputes inside the backward is given (PyTorch's
/// schedule CSV has no recompute action: the stage module checkpoints its own layers).
inline schedule without_recompute(const schedule& sched) {
  schedule out = sched;
  for (stage_index s = 0; s < out.stages(); ++s) {
    std::vector<op>& ops = out.stage_ops(s);
    std::erase_if(ops, [](const op& o) { return o.kind == op_kind::recompute; });
    for (op& o : ops) {
      o.flags = static_cast<std::uint8_t>(o.flags & ~op_flag::recompute);
    }
  }
  return out;
}

}  // namespace pipesched
