#pragma once

#include <algorithm>
#include <cstdint>
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
/// backwards follow the same table with the chunk order reversed. Stage r (0-based) runs
/// min((p−r−1)·2 + (v−1)·N, m·v) warm-up forwards (Megatron's get_pp_rank_microbatches), then
/// one forward one backward, then the remaining backwards. With v = 1 the warm-up is 1F1B's
/// p−r−1. A given N must be within p ≤ N ≤ m, as Megatron requires: below p, this order
/// (Megatron's table with its warm-up) deadlocks, e.g. p=3, v=2, N=1, m=3 (stage 0's forward
/// of a micro-batch's second chunk waits for stage 2, which waits for a backward of stage 0's
/// that comes later). Llama 3's own implementation runs N < p with another order, not built here.
///
/// Micro-batch counts that are not a multiple of N (including m < p): the order is built for
/// m rounded up to a multiple of N, then the padding micro-batches' ops are dropped. Megatron's
/// "short last group" order deadlocks for many such m (e.g. p=5, v=2, m=7: stage 0's warm-up
/// needs a forward that stage 4 runs only after a backward stage 0 has not reached), whereas
/// dropping whole micro-batches from a deadlock-free order keeps it deadlock-free: the
/// original execution order, restricted to the kept ops, is an execution of the result.
/// So every m ≥ 1 is accepted; the padding slots become bubble.
///
/// With per-chunk costs (each chunk 1/v of a stage), the bubble is (p−1)·(T_F+T_B+T_W) in
/// chunk costs, i.e. 1/v of 1F1B's; peak activation memory on stage 0 is
/// (warm-up + 1)·M_B per chunk.
struct interleaved_1f1b {
  std::uint32_t default_chunks = 2;

  std::string_view name() const noexcept { return "interleaved-1f1b"; }

  /// Forwards stage r runs before its first backward, with groups of n micro-batches (0: p).
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

  schedule generate(const generator_params& params) const {
    const std::uint32_t v = params.chunks == 0 ? default_chunks : params.chunks;
    if (v == 0) {
      detail::fail(name(), ": chunks (v=0) must be at least 1");
    }
    detail::check_shape(name(), params, v, 2);
    if (params.group_size != 0 &&
        (params.group_size < params.stages || params.group_size > params.microbatches)) {
      detail::fail(name(), ": group_size (N=", params.group_size,
                   ") must be between stages (p=", params.stages,
                   ") and microbatches (m=", params.microbatches, ")");
    }
    return order(params.stages, params.microbatches, v, nullptr, params.group_size);
  }

  /// The schedule for a checked shape, with groups of n micro-batches (0: p; p ≤ n ≤ m).
  /// `loop_steps`, when given, receives the number of inner loop steps taken, at most
  /// 2·(ops + n·v) (a test hook: the work is linear in the op count whatever p is, also for
  /// m ≪ p where most of the padded table is dropped).
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
    struct entry {
      std::size_t k;
      microbatch_index mb;
      chunk_index chunk;
    };
    std::vector<entry> kept;
    kept.reserve(std::size_t{m} * v);
    std::uint64_t steps = 0;
    for (std::uint32_t first = 0; first < padded; first += group) {
      for (std::uint32_t c = 0; c < v; ++c) {
        ++steps;
        const std::uint32_t last = std::min(first + group, m);
        for (std::uint32_t j = first; j < last; ++j) {
          ++steps;
          kept.push_back({std::size_t{first} * v + std::size_t{c} * group + (j - first), j,
                          static_cast<chunk_index>(c)});
        }
      }
    }
    schedule out = schedule::on(std::string(name()), placement::loop(p, v), m);
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
};

}  // namespace pipesched
