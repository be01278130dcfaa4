#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/model/memory_model.hpp"

// The dynamic policy (docs/robustness.md §3), written once: simulate_dynamic
// (analysis/dynamic_policy.hpp) and the dynamic drivers (exec/dynamic_driver.hpp, exec/mpi.hpp)
// decide every op with this class; they differ only in how they learn that an input is here.

namespace pipesched::detail {

/// The budget per stage the dynamic policy admits forwards under: each stage's `limit` plus
/// memory_tolerance, after the limits' rules and require_minimum_memory have been checked
/// (throws invalid_argument naming `who` otherwise); empty when there is no limit. `mem` is
/// read for the shape. dynamic_policy_stage takes stage s's entry (stage_cap).
inline std::vector<double> dynamic_cap(std::string_view who,
                                       const placement& pl,
                                       const shaped_memory_model& mem,
                                       const memory_limits& limit) {
  if (!limit) {
    return {};
  }
  limit.check(std::string(who), "memory_limit", pl.stages());
  require_minimum_memory(who, pl, mem, limit);
  std::vector<double> cap = limit.for_stages(pl.stages());
  std::vector<double> avail(pl.stages());
  for (stage_index s = 0; s < pl.stages(); ++s) {
    avail[s] = cap[s] - mem.static_memory(s);
  }
  const double tolerance = memory_tolerance(pl, mem, avail);
  for (double& c : cap) {
    c += tolerance;
  }
  return cap;
}

/// Stage s's entry of dynamic_cap's budgets (none when there is no limit).
inline std::optional<double> stage_cap(const std::vector<double>& caps, stage_index s) {
  return caps.empty() ? std::nullopt : std::optional<double>(caps[s]);
}

/// One stage under the dynamic policy: its progress (next F and B of each local chunk, the W
/// whose B ran, live memory) and its pick. Each chunk runs the micro-batches of its route only
/// (placement: routes), in micro-batch order. Whenever the stage is free it runs, among the ops
/// whose input is here: a B (lowest micro-batch, then the chunk later in the model, whose
/// gradient goes further), else an F that memory admits (the memory engine's admits_forward:
/// live memory + its activation + later_chunk_reserve within the cap; the chunk later in the
/// model first; each chunk's F in micro-batch order), else its oldest pending W. Split backward
/// only (F, B, W).
class dynamic_policy_stage {
 public:
  /// `mem` is read for the shape; `cap` is dynamic_cap's (none: every F is admitted);
  /// `microbatches` is a multiple of the routes (schedule::on checks it).
  dynamic_policy_stage(const placement& pl,
                       stage_index s,
                       std::uint32_t microbatches,
                       const shaped_memory_model& mem,
                       std::optional<double> cap)
      : pl_(&pl),
        s_(s),
        m_(microbatches),
        cap_(cap),
        next_f_(pl.chunks(), 0),
        next_b_(pl.chunks(), 0),
        reserve_(pl.chunks()),
        mb_stride_(mem.has_microbatch_factors() ? pl.chunks() : 0),
        live_(mem.static_memory(s)) {
    // Per micro-batch sizes only when they differ (docs/model.md §5.1): one row otherwise.
    const std::uint32_t rows = mem.has_microbatch_factors() ? microbatches : 1;
    sizes_.resize(std::size_t{rows} * pl.chunks());
    delta_f_.resize(sizes_.size());
    for (microbatch_index j = 0; j < rows; ++j) {
      for (chunk_index c = 0; c < pl.chunks(); ++c) {
        const std::size_t i = std::size_t{j} * pl.chunks() + c;
        sizes_[i] = mem.at(s, c, j);
        delta_f_[i] = memory_delta(op_kind::forward, sizes_[i]);
      }
    }
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      reserve_[c] = later_chunk_reserve(pl, mem, s, c);
    }
    PIPESCHED_ASSERT(microbatches % pl.routes() == 0,
                     "dynamic_policy_stage: the micro-batches split evenly over the routes");
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      next_f_[c] = next_b_[c] = next_on_route(c, 0);
      for (microbatch_index j = next_f_[c]; j < m_; j = next_on_route(c, j + 1)) {
        total_ += 3;
      }
    }
  }

  /// Calls f(x) for each op the stage may run as soon as its input is here: the next B of
  /// each chunk whose F ran, and the next F of each chunk that memory admits.
  template <class F>
  void for_each_candidate(F&& f) const {
    for (chunk_index c = 0; c < pl_->chunks(); ++c) {
      const microbatch_index j = next_b_[c];
      if (j < m_ && next_f_[c] > j) {  // F of each chunk runs in micro-batch order
        f(op{op_kind::backward_input, j, c});
      }
    }
    for (chunk_index c = 0; c < pl_->chunks(); ++c) {
      const microbatch_index j = next_f_[c];
      if (j < m_ && (!cap_ || admits_forward(live_, delta_f_[at(c, j)], reserve_[c], *cap_))) {
        f(op{op_kind::forward, j, c});
      }
    }
  }

  /// The op the policy runs next, given `has_input(x)`: whether candidate x's input (an F's
  /// activation, a B's gradient; none for the first chunk's F and the last chunk's B) is here.
  /// nullopt when no candidate's input is here and no W is pending.
  template <class HasInput>
  std::optional<op> pick(HasInput&& has_input) const {
    std::optional<op> best;
    for_each_candidate([&](const op& x) {
      if (has_input(x) && (!best || preferred(x, *best))) {
        best = x;
      }
    });
    if (!best && !pending_w_.empty()) {
      best = pending_w_.front();
    }
    return best;
  }

  bool w_pending() const noexcept { return !pending_w_.empty(); }
  /// Live memory, static memory included.
  double live() const noexcept { return live_; }

  /// Accounts `x` (an op pick() returned) as started: its memory is committed.
  void commit(const op& x) {
    live_ += memory_delta(x.kind, sizes_[at(x.chunk, x.mb)]);
    switch (x.kind) {
      case op_kind::forward:
        next_f_[x.chunk] = next_on_route(x.chunk, x.mb + 1);
        break;
      case op_kind::backward_input:
        next_b_[x.chunk] = next_on_route(x.chunk, x.mb + 1);
        pending_w_.push_back(op{op_kind::backward_weight, x.mb, x.chunk});
        break;
      default:
        pending_w_.pop_front();
        break;
    }
  }

  /// The ops the stage runs in all: F, B and W of each chunk and each micro-batch of its route.
  std::size_t total() const noexcept { return total_; }

 protected:
  const placement* pl_;
  stage_index s_;
  std::uint32_t m_;

 private:
  // The policy's order among candidates: a B before an F, among B the lower micro-batch, then
  // the chunk later in the model.
  bool preferred(const op& x, const op& y) const noexcept {
    const bool xb = x.kind == op_kind::backward_input;
    if (xb != (y.kind == op_kind::backward_input)) {
      return xb;
    }
    if (xb && x.mb != y.mb) {
      return x.mb < y.mb;
    }
    return pl_->global(s_, x.chunk) > pl_->global(s_, y.chunk);
  }

  std::size_t at(chunk_index c, microbatch_index j) const noexcept { return j * mb_stride_ + c; }

  // The first micro-batch from j on whose route holds local chunk c, or m_.
  microbatch_index next_on_route(chunk_index c, microbatch_index j) const noexcept {
    const std::uint32_t route = pl_->route_of_chunk(pl_->global(s_, c));
    while (j < m_ && pl_->route_of_microbatch(j, m_) != route) {
      ++j;
    }
    return j;
  }

  std::optional<double> cap_;
  std::vector<microbatch_index> next_f_, next_b_;
  std::vector<double> reserve_;
  std::vector<double> delta_f_;      // by at(c, mb)
  std::vector<chunk_memory> sizes_;  // by at(c, mb)
  std::size_t mb_stride_ = 0;        // 0: every micro-batch the same sizes
  std::size_t total_ = 0;
  std::deque<op> pending_w_;
  double live_;
};

}  // namespace pipesched::detail
