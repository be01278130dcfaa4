#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"

namespace pipesched {

/// A fact an op can wait for: "event `what` of global chunk `chunk` for micro-batch `mb`
/// has happened on stage `stage`".
enum class event_kind : std::uint8_t {
  forward_done,         ///< F finished
  input_grad_done,      ///< B or BW finished: the chunk's input gradient exists
  backward_input_done,  ///< B finished (W needs B's saved tensors; BW does not provide them)
  received_forward,     ///< RECV_F finished (lowered schedules)
  received_backward,    ///< RECV_B finished (lowered schedules)
  /// The activations the chunk's backward needs exist: its F finished, or its R when the F is
  /// marked recompute (that F keeps only its input).
  activations_ready,
};

/// How many event kinds there are: the size of a table indexed by event_kind (keep it next to
/// the enum, so a new kind grows every such table).
inline constexpr std::size_t event_kind_count =
    static_cast<std::size_t>(event_kind::activations_ready) + 1;

struct requirement {
  stage_index stage = 0;  ///< the stage on which the event happens
  global_chunk chunk = 0;
  microbatch_index mb = 0;
  event_kind what = event_kind::forward_done;
  bool remote = false;  ///< the producer ran on another stage: a transfer (T_comm) is involved

  friend bool operator==(const requirement&, const requirement&) = default;
};

/// At most two requirements per op.
struct requirement_list {
  std::array<requirement, 2> items{};
  std::uint8_t count = 0;

  const requirement* begin() const noexcept { return items.data(); }
  const requirement* end() const noexcept { return items.data() + count; }
  void push(const requirement& r) noexcept { items[count++] = r; }
};

/// What op `o` on stage `s` needs before it may start (docs/model.md §1), along the op's route
/// (placement: routes; "first" and "last" chunk are of the route):
/// - F needs the previous chunk's F (none for the first chunk);
/// - B and BW need the next chunk's input gradient (B or BW), or for the last chunk the
///   loss, i.e. its own F; they also need their own activations (activations_ready: their
///   own F, or their own R when that F is marked recompute);
/// - R needs its own F;
/// - W needs its own B.
/// In a `lowered` schedule (one with SEND/RECV ops) a cross-stage input is instead the local
/// RECV_F / RECV_B; SEND_F needs the local F, SEND_B the local B/BW; RECV ops need nothing
/// local but pair with their SEND (comm_partner). Out-of-range chunks or micro-batches give an
/// empty list; the validator reports them separately.
inline requirement_list requirements_of(const placement& pl,
                                        stage_index s,
                                        const op& o,
                                        bool lowered) noexcept {
  requirement_list out;
  if (o.chunk >= pl.chunks() || s >= pl.stages()) {
    return out;
  }
  const global_chunk g = pl.global(s, o.chunk);
  auto local = [&](global_chunk gc, event_kind e) { out.push({s, gc, o.mb, e, false}); };
  auto from = [&](global_chunk gc, event_kind e) {
    const stage_index t = pl.stage_of(gc);
    out.push({t, gc, o.mb, e, t != s});
  };
  switch (o.kind) {
    case op_kind::forward:
      if (!pl.is_first(g)) {
        if (lowered && pl.stage_of(g - 1) != s) {
          local(g, event_kind::received_forward);
        } else {
          from(g - 1, event_kind::forward_done);
        }
      }
      break;
    case op_kind::backward_input:
    case op_kind::backward_full:
      local(g, event_kind::activations_ready);
      if (!pl.is_last(g)) {
        if (lowered && pl.stage_of(g + 1) != s) {
          local(g, event_kind::received_backward);
        } else {
          from(g + 1, event_kind::input_grad_done);
        }
      }
      break;
    case op_kind::backward_weight:
      local(g, event_kind::backward_input_done);
      break;
    case op_kind::recompute:
      local(g, event_kind::forward_done);
      break;
    case op_kind::send_forward:
      local(g, event_kind::forward_done);
      break;
    case op_kind::send_backward:
      local(g, event_kind::input_grad_done);
      break;
    case op_kind::recv_forward:
    case op_kind::recv_backward:
      break;
  }
  return out;
}

/// A located op: stage plus op.
struct op_ref {
  stage_index stage = 0;
  op o{};
  friend bool operator==(const op_ref&, const op_ref&) = default;
};

/// The op a SEND/RECV pairs with: SEND_F of chunk g <-> RECV_F of chunk g+1 (on g+1's stage),
/// SEND_B of chunk g <-> RECV_B of chunk g−1. nullopt for compute ops and for a transfer that
/// has no peer (SEND_F of the last chunk, RECV_F of the first, ...).
inline std::optional<op_ref> comm_partner(const placement& pl,
                                          stage_index s,
                                          const op& o) noexcept {
  if (!is_comm(o.kind) || o.chunk >= pl.chunks() || s >= pl.stages()) {
    return std::nullopt;
  }
  const global_chunk g = pl.global(s, o.chunk);
  auto at = [&](global_chunk gc, op_kind k) -> std::optional<op_ref> {
    return op_ref{pl.stage_of(gc), make_op(k, o.mb, pl.local_of(gc))};
  };
  switch (o.kind) {
    case op_kind::send_forward:
      return pl.is_last(g) ? std::nullopt : at(g + 1, op_kind::recv_forward);
    case op_kind::recv_forward:
      return pl.is_first(g) ? std::nullopt : at(g - 1, op_kind::send_forward);
    case op_kind::send_backward:
      return pl.is_first(g) ? std::nullopt : at(g - 1, op_kind::recv_backward);
    case op_kind::recv_backward:
      return pl.is_last(g) ? std::nullopt : at(g + 1, op_kind::send_backward);
    default:
      return std::nullopt;
  }
}

/// The peer stage of a SEND/RECV: where its partner runs (the `peer` of the JSON and text
/// formats). nullopt for compute ops and for transfers without a peer.
inline std::optional<stage_index> comm_peer(const placement& pl,
                                            stage_index s,
                                            const op& o) noexcept {
  if (const auto partner = comm_partner(pl, s, o)) {
    return partner->stage;
  }
  return std::nullopt;
}

/// The events an op's completion produces (B produces both input_grad_done and
/// backward_input_done; F forward_done and activations_ready, unless marked recompute: see
/// events_produced(const op&)). Comm and W ops: see the code.
inline constexpr std::uint8_t event_bit(event_kind e) noexcept {
  return static_cast<std::uint8_t>(1u << static_cast<unsigned>(e));
}
inline constexpr std::uint8_t events_produced(op_kind k) noexcept {
  switch (k) {
    case op_kind::forward:
      return event_bit(event_kind::forward_done) | event_bit(event_kind::activations_ready);
    case op_kind::recompute:
      return event_bit(event_kind::activations_ready);
    case op_kind::backward_input:
      return event_bit(event_kind::input_grad_done) | event_bit(event_kind::backward_input_done);
    case op_kind::backward_full:
      return event_bit(event_kind::input_grad_done);
    case op_kind::recv_forward:
      return event_bit(event_kind::received_forward);
    case op_kind::recv_backward:
      return event_bit(event_kind::received_backward);
    default:
      return 0;
  }
}

/// What these ops lack of events_produced(kind): an F marked recompute keeps only its input,
/// so its backward waits for the R (docs/model.md §1). `produced & ~withheld(o)`.
constexpr std::uint8_t events_withheld(const op& o) noexcept {
  return is_recomputed(o) ? event_bit(event_kind::activations_ready) : std::uint8_t{0};
}
/// The events op `o` produces, its flags included.
constexpr std::uint8_t events_produced(const op& o) noexcept {
  return static_cast<std::uint8_t>(events_produced(o.kind) & ~events_withheld(o));
}

}  // namespace pipesched
