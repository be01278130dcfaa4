#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "pipesched/ir/op.hpp"
#include "pipesched/model/memory_model.hpp"

// The memory engine's rule: which buffer each op kind creates and frees (docs/model.md §5),
// written once. check_memory() tracks lifetimes with it, order_peak() and the zero-bubble
// search's admission tests add up its sizes, memory_curves() goes through check_memory().

namespace pipesched {

/// What a tracked buffer holds (docs/model.md §5).
enum class buffer_kind : std::uint8_t {
  activation,         ///< M_B: created by F, freed by B (which keeps M_W) or BW
  weight_grad_input,  ///< M_W: created by B, freed by W
  received_forward,   ///< `received`: created by RECV_F, freed by the F that consumes it
  received_backward,  ///< `received`: created by RECV_B, freed by the B / BW that consumes it
  /// M_in: created by an F marked recompute (all it keeps), freed by its R
  forward_input,
};
inline constexpr std::size_t buffer_kind_count = 5;

constexpr std::string_view to_string(buffer_kind k) noexcept {
  switch (k) {
    case buffer_kind::activation:
      return "activation";
    case buffer_kind::weight_grad_input:
      return "weight_grad_input";
    case buffer_kind::received_forward:
      return "received_forward";
    case buffer_kind::received_backward:
      return "received_backward";
    case buffer_kind::forward_input:
      return "forward_input";
  }
  return "?";
}

/// What one op does to its stage's buffers, in this order: it frees the receive buffer of each
/// input that came from another stage (lowered schedules only), frees `frees`, creates
/// `creates`. Memory changes when the op ends.
struct buffer_effect {
  bool consumes_received = false;
  std::optional<buffer_kind> frees;
  std::optional<buffer_kind> creates;
};

/// By kind, for an op without flags (an F marked recompute: buffer_effect_of(const op&)).
constexpr buffer_effect buffer_effect_of(op_kind k) noexcept {
  switch (k) {
    case op_kind::forward:
      return {true, std::nullopt, buffer_kind::activation};
    case op_kind::backward_input:
      return {true, buffer_kind::activation, buffer_kind::weight_grad_input};
    case op_kind::backward_weight:
      return {false, buffer_kind::weight_grad_input, std::nullopt};
    case op_kind::backward_full:
      return {true, buffer_kind::activation, std::nullopt};
    case op_kind::recompute:
      return {false, buffer_kind::forward_input, buffer_kind::activation};
    case op_kind::recv_forward:
      return {false, std::nullopt, buffer_kind::received_forward};
    case op_kind::recv_backward:
      return {false, std::nullopt, buffer_kind::received_backward};
    case op_kind::send_forward:
    case op_kind::send_backward:
      return {};
  }
  return {};
}

/// What op `o` does, its flags included: an F marked recompute keeps only its input (M_in)
/// until its R, which frees it and allocates M_B (docs/model.md §5).
constexpr buffer_effect buffer_effect_of(const op& o) noexcept {
  if (is_recomputed(o)) {
    return {true, std::nullopt, buffer_kind::forward_input};
  }
  return buffer_effect_of(o.kind);
}

/// buffer_effect_of(o) for every (kind, recompute mark), computed once: a loop over many ops
/// indexes this table instead of calling buffer_effect_of per op (check_memory's hot loop).
class buffer_effect_table {
 public:
  constexpr buffer_effect_table() noexcept {
    for (std::size_t k = 0; k < op_kind_count; ++k) {
      const op plain = make_op(static_cast<op_kind>(k), 0, 0);
      effects_[2 * k] = buffer_effect_of(plain);
      effects_[2 * k + 1] = buffer_effect_of(recomputing(plain));
    }
  }
  /// buffer_effect_of(o), flags included.
  constexpr const buffer_effect& operator()(const op& o) const noexcept {
    const auto k = static_cast<std::size_t>(o.kind);
    if (k >= op_kind_count) {
      return none_;
    }
    return effects_[2 * k + ((o.flags & op_flag::recompute) != 0 ? 1 : 0)];
  }

 private:
  std::array<buffer_effect, 2 * op_kind_count> effects_{};
  buffer_effect none_{};
};

/// Size of a buffer of kind `b` of a chunk, in the memory model's units.
constexpr double buffer_size(buffer_kind b, const chunk_memory& c) noexcept {
  switch (b) {
    case buffer_kind::activation:
      return c.activation;
    case buffer_kind::weight_grad_input:
      return c.weight_grad_input;
    case buffer_kind::received_forward:
    case buffer_kind::received_backward:
      return c.received;
    case buffer_kind::forward_input:
      return c.input;
  }
  return 0.0;
}

/// Change of live memory when an op with effect `e` of a chunk with sizes `c` ends, receive
/// buffers aside (a compute-only schedule has none): F +M_B, B −(M_B − M_W), W −M_W, BW −M_B,
/// F marked recompute +M_in, R −M_in +M_B.
constexpr double memory_delta(const buffer_effect& e, const chunk_memory& c) noexcept {
  double d = 0.0;
  if (e.frees && *e.frees != buffer_kind::received_forward &&
      *e.frees != buffer_kind::received_backward) {
    d -= buffer_size(*e.frees, c);
  }
  if (e.creates && *e.creates != buffer_kind::received_forward &&
      *e.creates != buffer_kind::received_backward) {
    d += buffer_size(*e.creates, c);
  }
  return d;
}

/// memory_delta of an op of kind `k` without flags.
constexpr double memory_delta(op_kind k, const chunk_memory& c) noexcept {
  return memory_delta(buffer_effect_of(k), c);
}
/// memory_delta of op `o`, its flags included (an F marked recompute keeps M_in).
constexpr double memory_delta(const op& o, const chunk_memory& c) noexcept {
  return memory_delta(buffer_effect_of(o), c);
}

}  // namespace pipesched
