#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// Activation memory of one micro-batch (docs/model.md §5): F allocates `activation` (M_B); B
/// frees all but `weight_grad_input` (M_W); W frees the rest; BW frees everything. `received`
/// is the size of one receive buffer for a lowered (SEND/RECV) schedule. With recomputation an
/// F marked recompute allocates `input` (M_in) instead, and its R frees it and allocates M_B.
struct chunk_memory {
  double activation = 1.0;         ///< M_B
  double weight_grad_input = 0.5;  ///< M_W, must be <= M_B
  double received = 0.0;           ///< receive-buffer size, for communication lowering
  /// M_in: the chunk's input activation, all an F marked recompute keeps until its R
  /// (docs/model.md §5). Like `received`, not split over v (one tensor at the chunk boundary).
  double input = 0.0;

  friend bool operator==(const chunk_memory&, const chunk_memory&) = default;
};

/// Memory model: activation sizes per stage or per (stage, local chunk), plus optional static
/// memory per stage (weights, gradients, optimizer state). Uniform by default (M_B = 1,
/// M_W = 0.5 per stage).
///
/// Units, as in cost_model. A **per-stage** entry (the uniform one, uniform(),
/// set_stage_memory()) is what one micro-batch's activations take on a stage for its whole
/// slice of the model: with v chunks per stage each chunk's F allocates M_B/v and its B keeps
/// M_W/v, so 1F1B's peak p·M_B is the same number for 1f1b, interleaved 1F1B and ZB-V, and one
/// per-stage memory limit means the same for every schedule. A **per-chunk** entry
/// (set_chunk_memory()) is that chunk's own size. `received` (the transferred tensor) and
/// static memory are not divided.
///
/// for_shape(p, v) checks the tables against a schedule's shape (`stages` p entries, `chunks`
/// p x v, `static` p) and fixes v; check_memory and the generators call it themselves.
class memory_model {
 public:
  memory_model() = default;
  /// Per stage: `uniform` is one micro-batch's activations for a stage's whole slice.
  explicit memory_model(chunk_memory uniform) : uniform_(uniform) {
    check(uniform_, "memory_model");
  }
  /// Per stage: M_B and M_W of one micro-batch over a stage's whole slice (a chunk takes M/v).
  static memory_model uniform(double mb, double mw) {
    return memory_model(chunk_memory{mb, mw, 0.0});
  }

  /// Per stage: one entry per stage (size p), split over the stage's chunks.
  memory_model& set_stage_memory(std::vector<chunk_memory> per_stage) {
    for (const auto& c : per_stage) {
      check(c, "memory_model::set_stage_memory");
    }
    stage_ = std::move(per_stage);
    chunk_.clear();
    return *this;
  }
  /// Per chunk: one entry per (stage, local chunk), each chunk's own size; index s*chunks + c.
  memory_model& set_chunk_memory(std::uint32_t chunks, std::vector<chunk_memory> per_chunk) {
    if (chunks == 0 || per_chunk.size() % chunks != 0) {
      detail::fail("memory_model::set_chunk_memory: size (", per_chunk.size(),
                   ") must be a multiple of chunks (v=", chunks, ")");
    }
    for (const auto& c : per_chunk) {
      check(c, "memory_model::set_chunk_memory");
    }
    chunks_ = chunks;
    chunk_ = std::move(per_chunk);
    stage_.clear();
    return *this;
  }
  /// Static memory per stage (size p); counted in every peak and budget.
  memory_model& set_static_memory(std::vector<double> per_stage) {
    for (double v : per_stage) {
      check_value(v, "memory_model::set_static_memory", "static memory");
    }
    static_ = std::move(per_stage);
    return *this;
  }

  /// This model read for a schedule of `stages` stages and `chunks` chunks per stage: throws
  /// invalid_argument, prefixed with `who`, when a table does not have that shape; the copy
  /// splits per-stage entries over `chunks`.
  memory_model for_shape(std::uint32_t stages, std::uint32_t chunks, std::string_view who) const {
    if (!stage_.empty() && stage_.size() != stages) {
      detail::fail(who, ": memory model stages table (", stage_.size(),
                   " entries) must hold one entry per stage (p=", stages, ")");
    }
    if (!chunk_.empty() && (chunks_ != chunks || chunk_.size() != std::size_t{stages} * chunks)) {
      detail::fail(who, ": memory model chunks table (", chunk_.size() / chunks_, " x ", chunks_,
                   ") must be p x v (", stages, " x ", chunks, ")");
    }
    if (!static_.empty() && static_.size() != stages) {
      detail::fail(who, ": memory model static list (", static_.size(),
                   " entries) must hold one entry per stage (p=", stages, ")");
    }
    memory_model out = *this;
    out.split_ = chunks == 0 ? 1 : chunks;
    return out;
  }
  /// The v per-stage entries are split over (for_shape); 0 when not read for a shape yet.
  std::uint32_t split_chunks() const noexcept { return split_; }

  /// Sizes for local chunk c on stage s: its chunk-table entry, or its stage's per-stage entry
  /// (table or uniform) with M_B and M_W divided by v.
  chunk_memory at(stage_index s, chunk_index c = 0) const noexcept {
    if (!chunk_.empty()) {
      std::size_t i = std::size_t{s} * chunks_ + c;
      if (i < chunk_.size()) {
        return chunk_[i];
      }
    }
    PIPESCHED_ASSERT(c == 0 || split_ != 0,
                     "memory_model::at: read the model for the schedule's shape (for_shape) first");
    const chunk_memory& m = s < stage_.size() ? stage_[s] : uniform_;
    if (split_ <= 1) {
      return m;
    }
    const double v = split_;
    return chunk_memory{m.activation / v, m.weight_grad_input / v, m.received, m.input};
  }
  double static_memory(stage_index s) const noexcept {
    return s < static_.size() ? static_[s] : 0.0;
  }

  const chunk_memory& uniform_memory() const noexcept { return uniform_; }
  bool is_uniform() const noexcept { return stage_.empty() && chunk_.empty() && static_.empty(); }
  const std::vector<chunk_memory>& stage_memory() const noexcept { return stage_; }
  const std::vector<chunk_memory>& chunk_memories() const noexcept { return chunk_; }
  std::uint32_t chunk_memory_chunks() const noexcept { return chunks_; }
  const std::vector<double>& static_memories() const noexcept { return static_; }

 private:
  static void check_value(double v, const char* where, const char* field) {
    if (!std::isfinite(v) || v < 0.0) {
      detail::fail(where, ": ", field, " (", v, ") must be finite and >= 0");
    }
  }
  static void check(const chunk_memory& c, const char* where) {
    check_value(c.activation, where, "activation memory (M_B)");
    check_value(c.weight_grad_input, where, "weight-gradient memory (M_W)");
    check_value(c.received, where, "receive-buffer memory");
    check_value(c.input, where, "input memory (M_in)");
    if (c.weight_grad_input > c.activation) {
      detail::fail(where, ": weight-gradient memory (M_W=", c.weight_grad_input,
                   ") must be <= activation memory (M_B=", c.activation, ")");
    }
  }

  chunk_memory uniform_{};
  std::vector<chunk_memory> stage_;
  std::uint32_t chunks_ = 1;
  std::vector<chunk_memory> chunk_;
  std::vector<double> static_;
  std::uint32_t split_ = 0;  // v for per-stage entries (for_shape); 0: not read for a shape
};

}  // namespace pipesched
