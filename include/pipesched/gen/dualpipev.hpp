#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/gen/generator.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched {

namespace detail {

/// One stage's DualPipeV op list (docs/model.md §6, DualPipeV): eight phases of fixed length,
/// each op taking the next micro-batch of its (kind, chunk). Local chunk 0 is global chunk s
/// (down the V), local chunk 1 global chunk 2p−1−s (up the V, the loss on stage 0).
class dualpipev_stage {
 public:
  dualpipev_stage(std::vector<op>& out, std::uint32_t p, std::uint32_t m, std::uint32_t s)
      : out_(out), p_(p), m_(m), s_(s) {}

  void build() {
    const std::uint32_t down = p_ - s_ - 1;  // stages below this one on the way down the V
    const std::uint32_t up = s_ + 1;         // this one and the stages above it
    // 1. Warm-up down the V: 2(p−s−1) F of chunk 0.
    repeat(2 * down, [&] { forward(0); });
    // 2. s+1 times F of chunk 0 then F of chunk 1.
    repeat(up, [&] {
      forward(0);
      forward(1);
    });
    // 3. p−s−1 times zero-bubble style on chunk 1: B, the oldest pending W, F.
    repeat(down, [&] {
      backward(1, true);
      weight();
      forward(1);
    });
    // 4. Steady state, m−2p+s+1 times: F of chunk 0 overlapped with BW of chunk 1, then F of
    //    chunk 1 overlapped with BW of chunk 0. The last stage runs its very first pair as two
    //    plain ops (PyTorch: a smaller bubble).
    const std::uint32_t steady = m_ - 2 * p_ + s_ + 1;
    for (std::uint32_t i = 0; i < steady; ++i) {
      if (i == 0 && s_ + 1 == p_) {
        forward(0);
        backward(1, false);
      } else {
        overlapped(0, 1);
      }
      overlapped(1, 0);
    }
    // 5. p−s−1 times: BW of chunk 1, then F of chunk 1 overlapped with BW of chunk 0.
    repeat(down, [&] {
      backward(1, false);
      overlapped(1, 0);
    });
    // 6. s+1 times a backward of chunk 1 then of chunk 0: BW until the middle step (index
    //    (s+1)/2), split B from there on; at an odd stage the switch comes before that step's
    //    chunk-1 backward, at an even stage after it.
    bool split = false;
    for (std::uint32_t i = 0; i < up; ++i) {
      const bool middle = i == up / 2;
      split = split || (middle && s_ % 2 == 1);
      backward(1, split);
      split = split || middle;
      backward(0, split);
    }
    // 7. p−s−1 times: the oldest pending W, then B of chunk 0.
    repeat(down, [&] {
      weight();
      backward(0, true);
    });
    // 8. The remaining W (s+1 of them), oldest first.
    repeat(up, [&] { weight(); });
    PIPESCHED_ASSERT(pending_.empty(), "dualpipev: a W left unscheduled");
  }

 private:
  template <class Fn>
  static void repeat(std::uint32_t n, Fn&& fn) {
    for (std::uint32_t i = 0; i < n; ++i) {
      fn();
    }
  }

  void forward(chunk_index c) { out_.push_back(make_op(op_kind::forward, next_f_[c]++, c)); }

  // A split B (its W queued) or a fused BW of the chunk's next backward micro-batch.
  void backward(chunk_index c, bool split) {
    const microbatch_index mb = next_b_[c]++;
    out_.push_back(make_op(split ? op_kind::backward_input : op_kind::backward_full, mb, c));
    if (split) {
      pending_.emplace_back(c, mb);
    }
  }

  // The oldest pending W, if any (PyTorch skips the step when none is pending).
  void weight() {
    if (pending_.empty()) {
      return;
    }
    const auto [c, mb] = pending_.front();
    pending_.pop_front();
    out_.push_back(make_op(op_kind::backward_weight, mb, c));
  }

  // F of chunk `f` marked to overlap with the BW of chunk `b` that follows it.
  void overlapped(chunk_index f, chunk_index b) {
    forward(f);
    out_.back() = overlapping_next(out_.back());
    backward(b, false);
  }

  std::vector<op>& out_;
  std::uint32_t p_;
  std::uint32_t m_;
  std::uint32_t s_;
  std::array<microbatch_index, 2> next_f_{0, 0};
  std::array<microbatch_index, 2> next_b_{0, 0};
  std::deque<std::pair<chunk_index, microbatch_index>> pending_;
};

}  // namespace detail

/// DualPipeV: DeepSeek's DualPipe cut in half, as PyTorch's `ScheduleDualPipeV` and DeepSeek's
/// `dualpipev.py` build it (docs/model.md §6, DualPipeV). V placement (stage s holds global
/// chunks s and 2p−1−s), two chunks per stage, m ≥ 2p. In the steady state every stage runs an F
/// of one chunk overlapped with the fused backward (BW) of the other (`overlaps_next` on the F),
/// so one's communication can hide behind the other's compute; the warm-up and the drain split
/// B / W as the zero-bubble schedules do. The order depends on p and m only, never on the costs;
/// it equals PyTorch's for p = 4, m = 10 (tests/data/dualpipev_4rank_10mb.csv).
struct dualpipev {
  std::string_view name() const noexcept { return "dualpipev"; }

  schedule generate(const generator_params& params) const {
    detail::check_shape(name(), params, 2, 3);
    const std::uint32_t p = params.stages;
    const std::uint32_t m = params.microbatches;
    if (std::uint64_t{m} < 2 * std::uint64_t{p}) {
      detail::fail(name(), ": microbatches (m=", m,
                   ") must be at least 2*stages (2p=", 2 * std::uint64_t{p},
                   "), as in PyTorch's ScheduleDualPipeV");
    }
    schedule out = schedule::on(std::string(name()), placement::v_shape(p), m);
    for (std::uint32_t s = 0; s < p; ++s) {
      auto& ops = out.stage_ops(s);
      ops.reserve(std::size_t{m} * 6);
      detail::dualpipev_stage(ops, p, m, s).build();
    }
    return out;
  }
};

}  // namespace pipesched
