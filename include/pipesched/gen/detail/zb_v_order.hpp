#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched::detail {

/// The ZB-V order at unit costs: per stage, the full op list (F, B, W of local chunks 0 and 1
/// for micro-batches 0..m−1, 6·m ops per stage) for the V placement (placement::v_shape(p):
/// local chunk 0 of stage s is global chunk s, local chunk 1 is global chunk 2p−1−s).
///
/// Rule. The order is the trace of a unit-time list schedule (T_F = T_B = T_W = 1, no comm)
/// in which every stage, at every time step, runs the first of these that is ready (its
/// input has arrived and, per kind and chunk, micro-batches go in order):
///   1. F of chunk 1, if 2·a + w + 2 ≤ 4p;
///   2. F of chunk 0, if 2·a + w + 2 ≤ 4p − 2 (leaves room for one chunk-1 activation);
///   3. B of chunk 0, then B of chunk 1;
///   4. W of chunk 0, then W of chunk 1;
/// where a = activations held (F run, B not yet) and w = W pending (B run, W not yet) on that
/// stage. The admission test is the stage's memory at M_B = 1, M_W = 1/2 kept ≤ 2p after
/// the F. With these priorities the trace reproduces the hand-crafted ZB-V warm-up of Qi et
/// al., "Zero Bubble Pipeline Parallelism" (ICLR 2024, §6; docs/model.md §6): stage s runs
/// 2p−1−s forwards of chunk 0 and s of chunk 1, then one more F before its first B, then
/// interleaved F/B/W, and ends with the remaining B and W. The steady phase is the rule's
/// own, not a transcription of the paper's figure.
///
/// Guarantees, for every p ≥ 1 and m ≥ 1:
/// - valid: each op is listed only once its inputs were complete in the trace, so the lists
///   are dependency-feasible and cannot deadlock;
/// - memory: per stage at most 2p chunk activations (unit M_B, M_W = 0, the memory checker's
///   semantics), and at most 2p·M_B for any M_W ≤ M_B/2;
/// - termination: every step runs at least one op. Take the lowest micro-batch k with an
///   unfinished op and its first unfinished op o along the chain (F down, F up, B down, B up;
///   then its W). If o's stage has a W pending, that W is ready. Otherwise o is ready, and if
///   o is an F it is admitted: that stage holds no activation of micro-batch k or later except
///   chunk-0 ones (none at all when o is a chunk-0 F), and rule 2 keeps those below 2p. So
///   the trace takes at most 6·p·m steps; measured at most 6m + 4p steps for p ≤ 16,
///   m ≤ 8p+1;
/// - work O(p·m): a step looks only at the stages whose decision can differ from the previous
///   step's (those that ran an op then, and their two neighbours, whose inputs that op may
///   complete); any other stage was idle and stays idle. So at most 3 stage visits per op plus
///   p at step 0 (`stage_visits`, when given, receives the count), not p per step;
/// - zero bubble at unit costs once m ≥ 2p (every stage busy from its first op to its last,
///   span 6·m, makespan 6·m + p − 1): checked with the library's validator, simulator and
///   memory checker for p = 1..32 with every m in 2p..8p+1, and p ≤ 8 up to m = 400; no
///   counterexample found (tests/gen/test_zb_v_order.cpp keeps a fast subset). For m < 2p
///   the order is valid and within memory but has bubbles (too few forwards to fill the
///   2p-slot warm-up).
/// Throws pipesched::invalid_argument when p or m is 0.
inline std::vector<std::vector<op>> zb_v_handcrafted_ops(std::uint32_t p,
                                                         std::uint32_t m,
                                                         std::uint64_t* stage_visits = nullptr) {
  if (p == 0) {
    fail("zb_v_handcrafted_ops: stages (p=0) must be at least 1");
  }
  if (m == 0) {
    fail("zb_v_handcrafted_ops: microbatches (m=0) must be at least 1");
  }
  using step_type = std::uint64_t;
  constexpr step_type never = std::numeric_limits<step_type>::max();
  const std::size_t sm = std::size_t{p} * m;
  // End times in the trace, [chunk][s * m + mb]; `never` until run.
  std::vector<step_type> f_end[2] = {std::vector<step_type>(sm, never),
                                     std::vector<step_type>(sm, never)};
  std::vector<step_type> b_end[2] = {std::vector<step_type>(sm, never),
                                     std::vector<step_type>(sm, never)};
  struct stage_state {
    std::uint32_t next_f[2] = {0, 0};
    std::uint32_t next_b[2] = {0, 0};
    std::uint32_t next_w[2] = {0, 0};
    std::uint64_t held = 0;     // activations: F run, B not yet
    std::uint64_t pending = 0;  // W not yet run after its B
  };
  std::vector<stage_state> st(p);
  std::vector<std::vector<op>> out(p);
  for (auto& v : out) {
    v.reserve(std::size_t{6} * m);
  }
  const auto at = [m](std::uint32_t s, std::uint32_t mb) { return std::size_t{s} * m + mb; };
  const std::uint64_t cap = 4 * std::uint64_t{p};
  const std::uint64_t total = 6 * std::uint64_t{p} * m;
  std::uint64_t placed = 0;
  std::uint64_t visits = 0;
  // The stages to look at in this step and the next; `queued[s]` is the step s was last
  // queued for (a stage is visited once per step however many neighbours queue it).
  std::vector<std::uint32_t> now(p);
  std::vector<std::uint32_t> next;
  next.reserve(p);
  std::vector<step_type> queued(p, 0);
  for (std::uint32_t s = 0; s < p; ++s) {
    now[s] = s;
  }

  for (step_type t = 0; placed < total; ++t) {
    std::uint64_t placed_now = 0;
    next.clear();
    const auto queue = [&](std::uint32_t s) {
      if (queued[s] != t + 1) {
        queued[s] = t + 1;
        next.push_back(s);
      }
    };
    // Within a step the stages are independent (an op run now ends at t + 1, visible from
    // the next step on), so the visiting order does not matter.
    for (const std::uint32_t s : now) {
      ++visits;
      stage_state& x = st[s];
      const auto done = [t](step_type end) { return end <= t; };
      // F of chunk c, micro-batch k: input from the previous global chunk.
      const auto f_ready = [&](std::size_t c) {
        const std::uint32_t k = x.next_f[c];
        if (k >= m) {
          return false;
        }
        if (c == 0) {
          return s == 0 || done(f_end[0][at(s - 1, k)]);
        }
        return s + 1 == p ? done(f_end[0][at(s, k)]) : done(f_end[1][at(s + 1, k)]);
      };
      // B of chunk c: the loss (chunk 1 on stage 0) needs its own F; otherwise the gradient
      // from the next global chunk.
      const auto b_ready = [&](std::size_t c) {
        const std::uint32_t k = x.next_b[c];
        if (k >= m) {
          return false;
        }
        if (c == 1) {
          return s == 0 ? done(f_end[1][at(s, k)]) : done(b_end[1][at(s - 1, k)]);
        }
        return s + 1 == p ? done(b_end[1][at(s, k)]) : done(b_end[0][at(s + 1, k)]);
      };
      const auto w_ready = [&](std::size_t c) {
        const std::uint32_t k = x.next_w[c];
        return k < m && done(b_end[c][at(s, k)]);
      };
      const std::uint64_t use = 2 * x.held + x.pending + 2;
      op chosen{};
      bool any = true;
      if (use <= cap && f_ready(1)) {
        chosen = make_op(op_kind::forward, x.next_f[1], 1);
      } else if (use + 2 <= cap && f_ready(0)) {
        chosen = make_op(op_kind::forward, x.next_f[0], 0);
      } else if (b_ready(0)) {
        chosen = make_op(op_kind::backward_input, x.next_b[0], 0);
      } else if (b_ready(1)) {
        chosen = make_op(op_kind::backward_input, x.next_b[1], 1);
      } else if (w_ready(0)) {
        chosen = make_op(op_kind::backward_weight, x.next_w[0], 0);
      } else if (w_ready(1)) {
        chosen = make_op(op_kind::backward_weight, x.next_w[1], 1);
      } else {
        any = false;
      }
      if (!any) {
        continue;
      }
      const std::size_t c = chosen.chunk;
      const std::uint32_t k = chosen.mb;
      // Ends at t + 1: visible to other stages from the next step on, not within this one.
      switch (chosen.kind) {
        case op_kind::forward:
          f_end[c][at(s, k)] = t + 1;
          ++x.next_f[c];
          ++x.held;
          break;
        case op_kind::backward_input:
          b_end[c][at(s, k)] = t + 1;
          ++x.next_b[c];
          --x.held;
          ++x.pending;
          break;
        default:
          ++x.next_w[c];
          --x.pending;
          break;
      }
      out[s].push_back(chosen);
      ++placed_now;
      queue(s);
      if (s > 0) {
        queue(s - 1);
      }
      if (s + 1 < p) {
        queue(s + 1);
      }
    }
    if (placed_now == 0) {
      // Unreachable (see the termination argument above); fail loudly rather than spin.
      fail("zb_v_handcrafted_ops: internal error, no op could run at step ", t, " (p=", p,
           ", m=", m, ")");
    }
    placed += placed_now;
    now.swap(next);
  }
  if (stage_visits != nullptr) {
    *stage_visits = visits;
  }
  return out;
}

}  // namespace pipesched::detail
