#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/model/memory_limits.hpp"
#include "pipesched/model/microbatch_factors.hpp"

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
/// p x v, `static` p) and fixes v, returning a shaped_memory_model: only that type reads a
/// chunk's sizes (at, envelope). check_memory and the generators read the model themselves.
///
/// Micro-batches that differ (docs/model.md §5.1): set_microbatch_factors() multiplies each
/// micro-batch's sizes (memory_factors); at(s, c, mb) reads them, envelope(s, c) is the largest
/// over the micro-batches. Static memory is not scaled. Factors of 1 give the same numbers.
class shaped_memory_model;

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

  /// Per micro-batch (docs/model.md §5.1): one memory_factors per micro-batch, for every stage
  /// and chunk; micro-batch j's buffers of any chunk take at(s, c) scaled by per_mb[j].
  memory_model& set_microbatch_factors(std::vector<memory_factors> per_mb) {
    return set_microbatch_factors(1, 1, std::move(per_mb));
  }
  /// Per micro-batch and stage (`chunks` 1) or per (stage, chunk): index (mb·stages + s)·chunks
  /// + c, `stages` 1 or p and `chunks` 1 or v (for_shape checks).
  memory_model& set_microbatch_factors(std::uint32_t stages,
                                       std::uint32_t chunks,
                                       std::vector<memory_factors> table) {
    const char* who = "memory_model::set_microbatch_factors";
    for (std::size_t i = 0; i < table.size(); ++i) {
      const memory_factors& f = table[i];
      detail::check_factor(f.activation, who, i, "activation");
      detail::check_factor(f.weight_grad_input, who, i, "weight_grad_input");
      detail::check_factor(f.input, who, i, "input");
      detail::check_factor(f.received, who, i, "received");
    }
    factors_ = detail::microbatch_table<memory_factors>(stages, chunks, std::move(table), who);
    return *this;
  }
  /// Removes the per-micro-batch factors.
  memory_model& clear_microbatch_factors() {
    factors_ = {};
    return *this;
  }
  bool has_microbatch_factors() const noexcept { return !factors_.empty(); }
  const detail::microbatch_table<memory_factors>& microbatch_factors() const noexcept {
    return factors_;
  }

  /// This model read for a schedule of `stages` stages and `chunks` chunks per stage, the only
  /// way to read a chunk's sizes (shaped_memory_model): throws invalid_argument, prefixed with
  /// `who`, when a table does not have that shape; the copy splits per-stage entries over
  /// `chunks`. The per-micro-batch table's micro-batch count is checked by the overload that
  /// takes m.
  shaped_memory_model for_shape(std::uint32_t stages,
                                std::uint32_t chunks,
                                std::string_view who) const;
  /// for_shape(stages, chunks, who), and a per-micro-batch table must hold `microbatches`
  /// entries.
  shaped_memory_model for_shape(std::uint32_t stages,
                                std::uint32_t chunks,
                                std::uint32_t microbatches,
                                std::string_view who) const;

  /// The per-micro-batch rule, written once (docs/model.md §5.1): each size times its factor.
  static chunk_memory scaled(const chunk_memory& m, const memory_factors& f) noexcept {
    return chunk_memory{m.activation * f.activation, m.weight_grad_input * f.weight_grad_input,
                        m.received * f.received, m.input * f.input};
  }
  double static_memory(stage_index s) const noexcept {
    return s < static_.size() ? static_[s] : 0.0;
  }

  const chunk_memory& uniform_memory() const noexcept { return uniform_; }
  /// No per-stage, per-chunk, static or per-micro-batch table.
  bool is_uniform() const noexcept {
    return stage_.empty() && chunk_.empty() && static_.empty() && factors_.empty();
  }
  const std::vector<chunk_memory>& stage_memory() const noexcept { return stage_; }
  const std::vector<chunk_memory>& chunk_memories() const noexcept { return chunk_; }
  std::uint32_t chunk_memory_chunks() const noexcept { return chunks_; }
  const std::vector<double>& static_memories() const noexcept { return static_; }

 protected:
  // The readers of a shaped model (shaped_memory_model makes them public): a chunk's sizes
  // depend on the v its stage's entries are split over, known only once read for a shape.
  /// Sizes for local chunk c on stage s: its chunk-table entry, or its stage's per-stage entry
  /// (table or uniform) with M_B and M_W divided by v.
  chunk_memory at(stage_index s, chunk_index c = 0) const noexcept {
    if (!chunk_.empty()) {
      std::size_t i = std::size_t{s} * chunks_ + c;
      if (i < chunk_.size()) {
        return chunk_[i];
      }
    }
    const chunk_memory& m = s < stage_.size() ? stage_[s] : uniform_;
    if (split_ <= 1) {
      return m;
    }
    const double v = split_;
    return chunk_memory{m.activation / v, m.weight_grad_input / v, m.received, m.input};
  }
  /// Sizes of micro-batch mb for local chunk c on stage s: at(s, c) scaled by its factors
  /// (scaled(); at(s, c) itself without factors).
  chunk_memory at(stage_index s, chunk_index c, microbatch_index mb) const noexcept {
    return factors_.empty() ? at(s, c) : scaled(at(s, c), factors_.at(s, c, mb));
  }
  /// The largest sizes of local chunk c on stage s over the micro-batches (each field its own
  /// maximum; at(s, c) without factors): what a decision that must hold for any micro-batch
  /// takes (the schedulers' minimum budget and admission reserve, docs/model.md §5.1).
  chunk_memory envelope(stage_index s, chunk_index c = 0) const noexcept {
    chunk_memory out = at(s, c);
    if (factors_.empty()) {
      return out;
    }
    out = at(s, c, 0);
    for (microbatch_index j = 1; j < factors_.microbatches(); ++j) {
      const chunk_memory x = at(s, c, j);
      out.activation = std::max(out.activation, x.activation);
      out.weight_grad_input = std::max(out.weight_grad_input, x.weight_grad_input);
      out.received = std::max(out.received, x.received);
      out.input = std::max(out.input, x.input);
    }
    return out;
  }

 private:
  friend class shaped_memory_model;
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

  // Scaled sizes keep M_W <= M_B (the rule B frees M_B − M_W): within 1e-12 relative, the
  // rounding of factors computed as ratios of sizes.
  void check_scaled(std::uint32_t stages, std::uint32_t chunks, std::string_view who) const {
    for (microbatch_index j = 0; j < factors_.microbatches(); ++j) {
      for (stage_index s = 0; s < stages; ++s) {
        for (chunk_index c = 0; c < chunks; ++c) {
          const chunk_memory x = at(s, c, j);
          if (x.weight_grad_input > x.activation * (1.0 + 1e-12)) {
            detail::fail(who, ": memory model microbatches entry ", j, " on stage ", s, ", chunk ",
                         c, ": weight-gradient memory (M_W=", x.weight_grad_input,
                         ") must be <= activation memory (M_B=", x.activation, ")");
          }
        }
      }
    }
  }

  chunk_memory uniform_{};
  std::vector<chunk_memory> stage_;
  std::uint32_t chunks_ = 1;
  std::vector<chunk_memory> chunk_;
  std::vector<double> static_;
  std::uint32_t split_ = 1;  // v for per-stage entries: set by for_shape
  detail::microbatch_table<memory_factors> factors_;
};

/// A memory model read for one schedule shape (memory_model::for_shape): its tables checked
/// against p and v (and m), and the v that per-stage entries are split over fixed, so a chunk's
/// sizes can be read. Only this type has the readers (at, envelope): reading a chunk of a model
/// not read for a shape does not compile. It is a memory_model, so it goes wherever one is taken.
class shaped_memory_model : public memory_model {
 public:
  /// A default memory_model read for one chunk per stage (any p): a placeholder to assign to.
  shaped_memory_model() = default;
  using memory_model::at;
  using memory_model::envelope;

  std::uint32_t stages() const noexcept { return stages_; }
  /// The v per-stage entries are split over.
  std::uint32_t chunks() const noexcept { return split_; }

  /// This model with per-micro-batch factors that do not differ between micro-batches folded
  /// away (as shaped_cost_model::with_equal_factors_folded).
  shaped_memory_model with_equal_factors_folded() const {
    shaped_memory_model out = *this;
    if (factors_.empty() || !factors_.rows_equal()) {
      return out;
    }
    if (!factors_.all_one()) {
      std::vector<chunk_memory> table(std::size_t{stages_} * split_);
      for (stage_index s = 0; s < stages_; ++s) {
        for (chunk_index c = 0; c < split_; ++c) {
          table[std::size_t{s} * split_ + c] = at(s, c, 0);
        }
      }
      out.set_chunk_memory(split_, std::move(table));
    }
    out.factors_ = {};
    return out;
  }

 private:
  friend class memory_model;
  shaped_memory_model(const memory_model& m, std::uint32_t stages, std::uint32_t chunks)
      : memory_model(m), stages_(stages) {
    split_ = chunks == 0 ? 1 : chunks;
  }
  std::uint32_t stages_ = 0;
};

inline shaped_memory_model memory_model::for_shape(std::uint32_t stages,
                                                   std::uint32_t chunks,
                                                   std::string_view who) const {
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
  factors_.check_shape(stages, chunks, std::nullopt, who, "memory model");
  shaped_memory_model out(*this, stages, chunks);
  if (!factors_.empty()) {
    out.check_scaled(stages, chunks, who);
  }
  return out;
}

inline shaped_memory_model memory_model::for_shape(std::uint32_t stages,
                                                   std::uint32_t chunks,
                                                   std::uint32_t microbatches,
                                                   std::string_view who) const {
  factors_.check_shape(stages, chunks, microbatches, who, "memory model");
  return for_shape(stages, chunks, who);
}

}  // namespace pipesched
