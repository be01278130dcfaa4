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

/// One stage's DualPipe op list (docs/model.md §6, DualPipe): eight phases of fixed length on
/// the dual placement. Local chunk 0 is route 0 (micro-batches 0 .. m/2−1, entering at stage 0),
/// local chunk 1 route 1 (m/2 .. m−1, entering at stage p−1). A stage of the second half plays
/// the first half's part mirrored: its "near" chunk (the one whose route entered closer to it)
/// is chunk 1, so `near_` swaps the two.
class dualpipe_stage {
 public:
  dualpipe_stage(std::vector<op>& out, std::uint32_t p, std::uint32_t m, std::uint32_t s)
      : out_(out),
        half_(p / 2),
        h_(s < p - 1 - s ? s : p - 1 - s),
        near_(s >= p / 2 ? 1 : 0),
        middle_(s + 1 == p / 2 || s == p / 2),
        steady_(m / 2 - p + h_ + 1),
        next_f_{0, m / 2},
        next_b_{0, m / 2} {}

  void build() {
    const std::uint32_t far = half_ - h_ - 1;  // stages between this one and the middle
    const std::uint32_t up = h_ + 1;
    // 1. Warm-up: 2·far forwards of the near chunk.
    repeat(2 * far, [&] { forward(0); });
    // 2. h+1 times a forward of the near chunk, then of the far chunk.
    repeat(up, [&] {
      forward(0);
      forward(1);
    });
    // 3. far times zero-bubble style on the far chunk: B, the oldest pending W, F.
    repeat(far, [&] {
      backward(1, true);
      weight();
      forward(1);
    });
    // 4. Steady state: F near overlapped with BW far, then F far overlapped with BW near. The
    //    two middle stages run their first pair as two plain ops (DeepSeek: a smaller bubble).
    for (std::uint32_t i = 0; i < steady_; ++i) {
      if (i == 0 && middle_) {
        forward(0);
        backward(1, false);
      } else {
        overlapped(0, 1);
      }
      overlapped(1, 0);
    }
    // 5. far times: BW far, then F far overlapped with BW near.
    repeat(far, [&] {
      backward(1, false);
      overlapped(1, 0);
    });
    // 6. h+1 times a backward of the far chunk then of the near chunk: BW until step (h+1)/2,
    //    split B from there on; at an odd h the switch comes before that step's far backward,
    //    at an even h after it.
    bool split = false;
    for (std::uint32_t i = 0; i < up; ++i) {
      const bool switch_step = i == up / 2;
      split = split || (switch_step && h_ % 2 == 1);
      backward(1, split);
      split = split || switch_step;
      backward(0, split);
    }
    // 7. far times: the oldest pending W, then B of the near chunk.
    repeat(far, [&] {
      weight();
      backward(0, true);
    });
    // 8. The remaining W (h+1 of them), oldest first.
    repeat(up, [&] { weight(); });
    PIPESCHED_ASSERT(pending_.empty(), "dualpipe: a W left unscheduled");
  }

 private:
  template <class Fn>
  static void repeat(std::uint32_t n, Fn&& fn) {
    for (std::uint32_t i = 0; i < n; ++i) {
      fn();
    }
  }

  // The local chunk of the near (0) or far (1) part.
  chunk_index chunk(std::uint32_t part) const noexcept {
    return static_cast<chunk_index>(part ^ near_);
  }

  void forward(std::uint32_t part) {
    const chunk_index c = chunk(part);
    out_.push_back(make_op(op_kind::forward, next_f_[c]++, c));
  }

  // A split B (its W queued) or a fused BW of the chunk's next backward micro-batch.
  void backward(std::uint32_t part, bool split) {
    const chunk_index c = chunk(part);
    const microbatch_index mb = next_b_[c]++;
    out_.push_back(make_op(split ? op_kind::backward_input : op_kind::backward_full, mb, c));
    if (split) {
      pending_.emplace_back(c, mb);
    }
  }

  // The oldest pending W (DeepSeek's WeightGradStore is FIFO and never popped empty here).
  void weight() {
    PIPESCHED_ASSERT(!pending_.empty(), "dualpipe: a W with no pending B");
    const auto [c, mb] = pending_.front();
    pending_.pop_front();
    out_.push_back(make_op(op_kind::backward_weight, mb, c));
  }

  // F of part `f` marked to overlap with the BW of part `b` that follows it.
  void overlapped(std::uint32_t f, std::uint32_t b) {
    forward(f);
    out_.back() = overlapping_next(out_.back());
    backward(b, false);
  }

  std::vector<op>& out_;
  std::uint32_t half_;
  std::uint32_t h_;  // distance from the nearer end of the pipeline
  std::uint32_t near_;
  bool middle_;
  std::uint32_t steady_;
  std::array<microbatch_index, 2> next_f_;
  std::array<microbatch_index, 2> next_b_;
  std::deque<std::pair<chunk_index, microbatch_index>> pending_;
};

}  // namespace detail

/// DualPipe (DeepSeek-V3 §3.2.1; deepseek-ai/DualPipe's `DualPipe.step()`, docs/model.md §6):
/// two pipelines in opposite directions on the dual placement. Stage s holds stage s of route 0
/// and stage p−1−s of route 1, each with its own parameters (2× a 1F1B stage's); micro-batches
/// 0 .. m/2−1 enter at stage 0, m/2 .. m−1 at stage p−1. The steady state pairs an F of one
/// route with the fused backward (BW) of the other (`overlaps_next` on the F); warm-up and drain
/// split B / W. p even, m even and m ≥ 2p, as their code asserts. The order depends on p and m
/// only; it equals theirs op for op on tests/data/dualpipe_reference.json.
struct dualpipe {
  std::string_view name() const noexcept { return "dualpipe"; }

  schedule generate(const generator_params& params) const {
    detail::check_shape(name(), params, 2, 3);
    const std::uint32_t p = params.stages;
    const std::uint32_t m = params.microbatches;
    if (p % 2 != 0) {
      detail::fail(name(), ": stages (p=", p,
                   ") must be even: each stage holds stage s of one direction and p-1-s of the "
                   "other, as in DeepSeek's DualPipe");
    }
    if (m % 2 != 0 || std::uint64_t{m} < 2 * std::uint64_t{p}) {
      detail::fail(name(), ": microbatches (m=", m,
                   ") must be even and at least 2*stages (2p=", 2 * std::uint64_t{p},
                   "): half enter at each end, as in DeepSeek's DualPipe");
    }
    schedule out = schedule::on(std::string(name()), placement::dual(p), m);
    for (std::uint32_t s = 0; s < p; ++s) {
      auto& ops = out.stage_ops(s);
      ops.reserve(std::size_t{m} * 3);
      detail::dualpipe_stage(ops, p, m, s).build();
    }
    return out;
  }
};

}  // namespace pipesched
