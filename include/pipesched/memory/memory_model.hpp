#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

namespace pipesched {

/// Activation memory of one chunk for one micro-batch (background §3): F allocates
/// `activation` (M_B); B frees all but `weight_grad_input` (M_W); W frees the rest; BW frees
/// everything. `received` is the size of a receive buffer for a lowered (SEND/RECV) schedule.
struct chunk_memory {
  double activation = 1.0;         ///< M_B
  double weight_grad_input = 0.5;  ///< M_W, must be <= M_B
  double received = 0.0;           ///< receive-buffer size, for communication lowering

  friend bool operator==(const chunk_memory&, const chunk_memory&) = default;
};

/// Memory model: per-(stage, local chunk) buffer sizes plus optional static memory per stage
/// (weights, gradients, optimizer state). Uniform by default (M_B = 1, M_W = 0.5).
class memory_model {
 public:
  memory_model() = default;
  explicit memory_model(chunk_memory uniform) : uniform_(uniform) {
    check(uniform_, "memory_model");
  }
  static memory_model uniform(double mb, double mw) {
    return memory_model(chunk_memory{mb, mw, 0.0});
  }

  /// One entry per stage, applied to every chunk on that stage.
  memory_model& set_stage_memory(std::vector<chunk_memory> per_stage) {
    for (const auto& c : per_stage) {
      check(c, "memory_model::set_stage_memory");
    }
    stage_ = std::move(per_stage);
    chunk_.clear();
    return *this;
  }
  /// One entry per (stage, local chunk): index s*chunks + c.
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

  const chunk_memory& at(stage_index s, chunk_index c = 0) const noexcept {
    if (!chunk_.empty()) {
      std::size_t i = std::size_t{s} * chunks_ + c;
      if (i < chunk_.size()) {
        return chunk_[i];
      }
    } else if (s < stage_.size()) {
      return stage_[s];
    }
    return uniform_;
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
};

}  // namespace pipesched
