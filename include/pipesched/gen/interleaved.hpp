#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/gen/generator.hpp"

namespace pipesched {

/// Interleaved 1F1B (Megatron-LM "virtual pipeline"): each stage holds v chunks in loop
/// placement (local chunk c of stage s is global chunk c·p + s) and runs fused BW backwards.
///
/// Micro-batches advance in groups of N (generator_params::group_size, default p; Megatron's
/// --microbatch-group-size-per-virtual-pipeline-stage, Llama 3's N): a stage runs the forwards
/// of chunk 0 for a group, then chunk 1 for the same group, and so on, then the next group;
/// backwards follow the same table with the chunk order reversed. Any 1 ≤ N ≤ m is accepted.
///
/// N ≥ p (Megatron's order): stage r (0-based) runs w_r = min((p−r−1)·2 + (v−1)·N, m·v)
/// warm-up forwards (Megatron's get_pp_rank_microbatches), then one forward one backward, then
/// the remaining backwards; at most w_r + 1 forwards are in flight. With v = 1 the warm-up is
/// 1F1B's p−r−1, whatever N.
///
/// N < p (Llama 3, arXiv 2407.21783 §3.3.2): fewer micro-batches in flight, at the price of
/// dependency bubbles. Megatron's fixed order deadlocks there, e.g. p=3, v=2, N=1, m=3: stage
/// 0's forward of a micro-batch's second chunk waits for stage 2, which waits for a backward
/// of stage 0's that comes later. So the forward and backward sequences stay the table's, and
/// how they interleave comes from a unit-time list simulation (F 1, BW 2, transfers instant,
/// stages in lockstep): a free stage runs its next backward if its dependencies are done (its
/// own forward, the backward of global chunk g+1), else its next forward if its dependency is
/// done (the forward of global chunk g−1) and fewer than b_r forwards are in flight, else
/// idles, with b_r = max(w_r, (v−1)·N + 1) (clamped to m·v): w_r, except b_{p−1} = w_{p−1} + 1.
/// Why the +1: a stage's first backward (its micro-batch 0, chunk v−1) needs its own forward
/// at table position (v−1)·N, so (v−1)·N + 1 forwards must be in flight first, one more than
/// w_{p−1}. Why that suffices (no deadlock for any N, m): in a stuck state, follow unfinished
/// dependencies. A stage whose next backward waits for its own forward has at most (v−1)·N < b
/// forwards in flight, so its next forward is not capped and waits on the previous stage; the
/// forward chain backwards through the stages reaches (table positions never grow along it,
/// and drop at the wrap from stage 0 to p−1, so it cannot cycle) a stage at its cap b, whose
/// next backward then waits on the next stage; that backward chain (same argument) reaches a
/// stage whose backward waits for its own forward again, with a forward count lower by at
/// least b − (v−1)·N ≥ 1. Counts cannot fall forever, so some stage can always run.
/// The simulation throws instead of looping should that ever fail. in_flight_bound() gives
/// b_r; the dependency bubbles can keep a stage below it (the last stage always reaches it).
///
/// Micro-batch counts that are not a multiple of N (including m < p): the table is built for
/// m rounded up to a multiple of N, then the padding micro-batches' ops are dropped. Megatron's
/// "short last group" order deadlocks for many such m (e.g. p=5, v=2, m=7: stage 0's warm-up
/// needs a forward that stage 4 runs only after a backward stage 0 has not reached), whereas
/// dropping whole micro-batches from a deadlock-free order keeps it deadlock-free: the
/// original execution order, restricted to the kept ops, is an execution of the result.
/// So every m ≥ 1 is accepted; the padding slots become bubble. For N < p the simulation
/// runs only the kept ops (the argument above holds for a shorter last group), so the padding
/// costs no time there.
///
/// With per-chunk costs (each chunk 1/v of a stage) and N = p, the bubble is (p−1)·(T_F+T_B+T_W)
/// in chunk costs, i.e. 1/v of 1F1B's; peak activation memory on stage 0 is
/// (warm-up + 1)·M_B per chunk, at most in_flight_bound()·M_B for any N.
struct interleaved_1f1b {
  std::uint32_t default_chunks = 2;

  std::string_view name() const noexcept { return "interleaved-1f1b"; }

  /// Stage r's warm-up with groups of n micro-batches (0: p): min((p−r−1)·2 + (v−1)·n, m·v),
  /// or 1F1B's p−r−1 for v = 1. For n ≥ p, the forwards stage r runs before the steady phase
  /// (which starts with a forward); for n < p, what in_flight_bound() is derived from.
  static std::uint64_t warmup(
      std::uint32_t p, std::uint32_t m, std::uint32_t v, stage_index r, std::uint32_t n = 0) {
    const std::uint64_t total = std::uint64_t{m} * v;
    if (v == 1) {
      return std::min<std::uint64_t>(p - 1 - r, total);
    }
    const std::uint64_t group = n == 0 ? p : n;
    return std::min<std::uint64_t>(2 * std::uint64_t{p - r - 1} + std::uint64_t{v - 1} * group,
                                   total);
  }

  /// Most forwards stage r ever has in flight (run, their backward not yet run), with groups
  /// of n micro-batches (0: p): min(warmup + 1, m·v) for n ≥ p or v = 1 (reached when n
  /// divides m), max(warmup, (v−1)·n + 1) clamped to m·v for n < p (see the struct comment).
  static std::uint64_t in_flight_bound(
      std::uint32_t p, std::uint32_t m, std::uint32_t v, stage_index r, std::uint32_t n = 0) {
    const std::uint64_t total = std::uint64_t{m} * v;
    const std::uint64_t w = warmup(p, m, v, r, n);
    if (!list_scheduled(p, v, n)) {
      return std::min(w + 1, total);
    }
    return std::min(std::max(w, std::uint64_t{v - 1} * n + 1), total);
  }

  schedule generate(const generator_params& params) const {
    const std::uint32_t v = params.chunks == 0 ? default_chunks : params.chunks;
    if (v == 0) {
      detail::fail(name(), ": chunks (v=0) must be at least 1");
    }
    detail::check_shape(name(), params, v, 2);
    if (params.group_size > params.microbatches) {
      detail::fail(name(), ": group_size (N=", params.group_size,
                   ") must be between 1 and microbatches (m=", params.microbatches, ")");
    }
    return order(params.stages, params.microbatches, v, nullptr, params.group_size);
  }

  /// The schedule for a checked shape, with groups of n micro-batches (0: p; 1 ≤ n ≤ m).
  /// `loop_steps`, when given, receives the number of inner loop steps taken: at most
  /// 2·(ops + n·v) for n ≥ p, and linear in the ops for n < p too (a test hook: the work is
  /// linear in the op count whatever p is, also for m ≪ p where most of the padded table is
  /// dropped).
  schedule order(std::uint32_t p,
                 std::uint32_t m,
                 std::uint32_t v,
                 std::uint64_t* loop_steps = nullptr,
                 std::uint32_t n = 0) const {
    const std::uint32_t group = n == 0 ? p : n;
    // Padded to a multiple of the group; the padding micro-batches' ops are dropped (see the
    // struct comment for why that stays deadlock-free).
    const std::uint32_t padded = (m + group - 1) / group * group;
    const std::size_t total = std::size_t{padded} * v;
    // The (micro-batch, chunk) order of forwards, as positions k in the padded table (group
    // of N micro-batches, then chunk, then micro-batch: Megatron's get_schedule_table);
    // backwards use it with chunks reversed. Only the kept entries (micro-batch < m) are
    // listed, so no step is spent on padding: with m = 1 the table has N·v entries and the
    // list v.
    std::vector<table_entry> kept;
    kept.reserve(std::size_t{m} * v);
    std::uint64_t steps = 0;
    for (std::uint32_t first = 0; first < padded; first += group) {
      for (std::uint32_t c = 0; c < v; ++c) {
        ++steps;
        const std::uint32_t last = std::min(first + group, m);
        for (std::uint32_t j = first; j < last; ++j) {
          ++steps;
          kept.push_back({std::size_t{first} * v + std::size_t{c} * group + (j - first), j,
                          static_cast<chunk_index>(c), last - first});
        }
      }
    }
    schedule out = schedule::on(std::string(name()), placement::loop(p, v), m);
    if (list_scheduled(p, v, group)) {
      steps += list_order(out, kept, p, m, v, group);
      if (loop_steps != nullptr) {
        *loop_steps = steps;
      }
      return out;
    }
    for (stage_index r = 0; r < p; ++r) {
      auto& ops = out.stage_ops(r);
      ops.reserve(std::size_t{2} * m * v);
      // Stage r runs the table's forwards 0..w−1, then forward w+i and backward i for each i,
      // then the remaining backwards: F(k) is the list's (k < w ? k : 2k − w)-th op and B(k)
      // its (k < total − w ? w + 2k + 1 : total + k)-th. The kept F and B are merged by
      // that position (all distinct), skipping the dropped ones.
      const auto w = static_cast<std::size_t>(warmup(p, padded, v, r, group));
      const auto f_pos = [&](std::size_t k) { return k < w ? k : 2 * k - w; };
      const auto b_pos = [&](std::size_t k) { return k < total - w ? w + 2 * k + 1 : total + k; };
      std::size_t f = 0;
      std::size_t b = 0;
      ++steps;
      while (f < kept.size() || b < kept.size()) {
        ++steps;
        if (b == kept.size() || (f < kept.size() && f_pos(kept[f].k) < b_pos(kept[b].k))) {
          ops.push_back(make_op(op_kind::forward, kept[f].mb, kept[f].chunk));
          ++f;
        } else {
          ops.push_back(make_op(op_kind::backward_full, kept[b].mb,
                                static_cast<chunk_index>(v - 1 - kept[b].chunk)));
          ++b;
        }
      }
    }
    if (loop_steps != nullptr) {
      *loop_steps = steps;
    }
    return out;
  }

 private:
  struct table_entry {
    std::size_t k;  // position in the padded table
    microbatch_index mb;
    chunk_index chunk;  // table chunk: the forward's chunk; the backward's is v−1−chunk
    std::uint32_t len;  // kept micro-batches in this entry's group (N, less in the last)
  };

  /// Whether groups of n (0: p) take the list-simulated order: N < p with v > 1 (with v = 1
  /// the table is plain micro-batch order and 1F1B's order serves every N).
  static bool list_scheduled(std::uint32_t p, std::uint32_t v, std::uint32_t n) noexcept {
    return n != 0 && n < p && v > 1;
  }

  /// Fills `out` with the N < p order (struct comment): the kept table's forwards and
  /// backwards in order on every stage, interleaved by a unit-time list simulation. Returns
  /// the loop steps taken (each completion wakes at most three stages, so O(ops + p)).
  std::uint64_t list_order(schedule& out,
                           const std::vector<table_entry>& kept,
                           std::uint32_t p,
                           std::uint32_t m,
                           std::uint32_t v,
                           std::uint32_t n) const {
    // Both kinds of op keep the table order on a stage, so "done" is a count: the op at list
    // position k of stage s is done iff more than k ops of its kind completed there. Entry k
    // (micro-batch, table chunk c, group length L): the forward of chunk c at position k; the
    // backward at position k is of chunk v−1−c, whose forward sits at k + (v−1−2c)·L. The
    // forward of chunk c−1 (stage 0's dependency on stage p−1) sits at k − L, and so does the
    // backward of chunk v−1−c+1 (stage p−1's dependency on stage 0).
    const std::size_t count = kept.size();
    struct stage_state {
      std::size_t f_done = 0;
      std::size_t b_done = 0;
      std::uint64_t bound = 0;
      bool running = false;
      bool running_forward = false;
      std::uint64_t woken = std::numeric_limits<std::uint64_t>::max();
    };
    std::vector<stage_state> st(p);
    for (std::uint32_t s = 0; s < p; ++s) {
      st[s].bound = in_flight_bound(p, m, v, stage_index{s}, n);
      out.stage_ops(stage_index{s}).reserve(2 * count);
    }
    const auto backward_ready = [&](std::uint32_t s) {
      const std::size_t b = st[s].b_done;
      const table_entry& e = kept[b];
      const std::size_t c = e.chunk;
      const std::size_t own = b - c * e.len + (v - 1 - c) * e.len;
      if (st[s].f_done <= own) {
        return false;
      }
      if (s + 1 < p) {
        return st[s + 1].b_done > b;
      }
      return e.chunk == 0 || st[0].b_done > b - e.len;  // chunk 0: the last global chunk
    };
    const auto forward_ready = [&](std::uint32_t s) {
      const std::size_t f = st[s].f_done;
      if (st[s].f_done - st[s].b_done >= st[s].bound) {
        return false;
      }
      if (s > 0) {
        return st[s - 1].f_done > f;
      }
      return kept[f].chunk == 0 || st[p - 1].f_done > f - kept[f].len;
    };
    // Completions by end time modulo 3 (ops last 1 or 2), and the stages to look at now.
    std::vector<std::uint32_t> ending[3];
    std::vector<std::uint32_t> wake(p);
    for (std::uint32_t s = 0; s < p; ++s) {
      wake[s] = s;
    }
    std::uint64_t steps = p;
    std::size_t running = 0;
    std::uint64_t t = 0;
    for (;;) {
      for (const std::uint32_t s : wake) {
        ++steps;
        stage_state& x = st[s];
        if (x.running) {
          continue;
        }
        auto& ops = out.stage_ops(stage_index{s});
        if (x.b_done < count && backward_ready(s)) {
          const table_entry& e = kept[x.b_done];
          ops.push_back(
              make_op(op_kind::backward_full, e.mb, static_cast<chunk_index>(v - 1 - e.chunk)));
          x.running_forward = false;
          ending[(t + 2) % 3].push_back(s);
        } else if (x.f_done < count && forward_ready(s)) {
          const table_entry& e = kept[x.f_done];
          ops.push_back(make_op(op_kind::forward, e.mb, e.chunk));
          x.running_forward = true;
          ending[(t + 1) % 3].push_back(s);
        } else {
          continue;
        }
        x.running = true;
        ++running;
      }
      if (running == 0) {
        break;
      }
      t += ending[(t + 1) % 3].empty() ? 2u : 1u;
      wake.clear();
      const auto wake_up = [&](std::uint32_t s) {
        if (st[s].woken != t) {
          st[s].woken = t;
          wake.push_back(s);
        }
      };
      for (const std::uint32_t s : ending[t % 3]) {
        ++steps;
        stage_state& x = st[s];
        ++(x.running_forward ? x.f_done : x.b_done);
        x.running = false;
        --running;
        // Only this stage and its neighbours read the counts that changed.
        wake_up(s);
        wake_up(s == 0 ? p - 1 : s - 1);
        wake_up(s + 1 == p ? 0 : s + 1);
      }
      ending[t % 3].clear();
    }
    for (std::uint32_t s = 0; s < p; ++s) {
      if (st[s].f_done < count || st[s].b_done < count) {
        detail::fail(name(), ": the in-flight-bounded order deadlocks for stages (p=", p,
                     "), chunks (v=", v, "), group_size (N=", n, ") and microbatches (m=", m,
                     ") at stage ", s, " (", st[s].f_done, " of ", count, " forwards, ",
                     st[s].b_done, " backwards run)");
      }
    }
    return steps;
  }
};

}  // namespace pipesched
