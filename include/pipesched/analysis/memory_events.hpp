#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/model/memory_model.hpp"

// The memory engine (docs/model.md §5), written once: which buffer each op kind creates and
// frees, and the sums of that rule every other part uses — the running sum of a list
// (walk_live_memory, stage_peak), its closed form (held_after), the least memory any schedule
// needs (minimum_stage_memory, require_minimum_memory) and the admission test of the
// schedulers that decide while they run (admits_forward, later_chunk_reserve,
// memory_tolerance). check_memory() tracks lifetimes with the rule; memory_curves() goes
// through check_memory().

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

// ---- Sums of the rule: running memory, the closed form, the minimum budget, admission ----

/// The rule in closed form, for counting without a list: what a chunk's ops hold (static
/// memory aside) after f F, b B and w W of it have run (w ≤ b ≤ f; a BW counts as a B and a
/// W), in a compute-only order that recomputes nothing: (f − b)·M_B + (b − w)·M_W. The exact
/// search (gen/detail/zb_exact_search.hpp) and the search's lower bounds count with it; a test
/// pins it to the running sum below on every schedule family.
constexpr double held_after(double f, double b, double w, const chunk_memory& c) noexcept {
  return (f - b) * c.activation + (b - w) * c.weight_grad_input;
}

/// memory_delta of every op a stage can hold, by (local chunk, kind, recompute mark), computed
/// once from the rule: what a loop over a long list looks up instead of evaluating the rule per
/// op (like buffer_effect_table, for the sizes of one stage). With per-micro-batch sizes
/// (docs/model.md §5.1) one such table per micro-batch.
class stage_deltas {
 public:
  /// `sizes(c)`: local chunk c's chunk_memory, for c < chunks (every micro-batch the same).
  template <class Sizes>
    requires std::invocable<Sizes&, chunk_index> stage_deltas(std::uint32_t chunks, Sizes&& sizes)
        : stage_deltas(chunks, 1, [&](chunk_index c, microbatch_index) { return sizes(c); }) {}
    /// `sizes(c, mb)`: micro-batch mb's chunk_memory of local chunk c, for c < chunks and
    /// mb < microbatches.
    template <class Sizes>
      requires std::invocable<Sizes&, chunk_index, microbatch_index> stage_deltas(
          std::uint32_t chunks, std::uint32_t microbatches, Sizes&& sizes)
          : deltas_(std::size_t{microbatches} * chunks * op_kind_count * 2),
            mb_stride_(microbatches > 1 ? std::size_t{chunks} * op_kind_count * 2 : 0) {
        for (microbatch_index j = 0; j < microbatches; ++j) {
          for (chunk_index c = 0; c < chunks; ++c) {
            const chunk_memory cm = sizes(c, j);
            for (std::size_t k = 0; k < op_kind_count; ++k) {
              const op plain = make_op(static_cast<op_kind>(k), j, c);
              deltas_[index(plain)] = memory_delta(plain, cm);
              deltas_[index(recomputing(plain))] = memory_delta(recomputing(plain), cm);
            }
          }
        }
      }
      /// Stage s of `memory` (read for the shape), `chunks` chunks; per micro-batch when `memory`
      /// has per-micro-batch factors.
      stage_deltas(const shaped_memory_model& memory, stage_index s, std::uint32_t chunks)
          : stage_deltas(chunks,
                         std::max(memory.microbatch_factors().microbatches(), 1u),
                         [&](chunk_index c, microbatch_index j) { return memory.at(s, c, j); }) {}

      /// memory_delta(o, sizes(o.chunk, o.mb)); o.chunk < chunks, o.mb < microbatches.
      double operator()(const op& o) const noexcept {
        return deltas_[index(o)];
      }

     private:
      std::size_t index(const op& o) const noexcept {
        return o.mb * mb_stride_ +
               (std::size_t{o.chunk} * op_kind_count + static_cast<std::size_t>(o.kind)) * 2 +
               ((o.flags & op_flag::recompute) != 0 ? 1 : 0);
      }
      std::vector<double> deltas_;
      std::size_t mb_stride_ = 0;  // 0: one table for every micro-batch
};

/// The running sum of one stage's list (docs/model.md §5): `value` starts at `start` (the
/// stage's static memory, or 0 to count only what the ops hold) and moves by the op's
/// memory_delta (`deltas`) as each op ends. Calls visit(i, value) after op i; a visit returning
/// false stops the walk. Returns whether the walk reached the end. Receive buffers aside: for
/// compute-only lists (check_memory tracks lowered ones).
template <class Ops, class Visit>
bool walk_live_memory(const Ops& ops, double start, const stage_deltas& deltas, Visit&& visit) {
  double value = start;
  std::size_t i = 0;
  for (const op& o : ops) {
    value += deltas(o);
    if (!visit(i, value)) {
      return false;
    }
    ++i;
  }
  return true;
}

/// The peak of stage s's list under `memory` (read for the shape; static memory included): the
/// highest value of walk_live_memory, and at least the static memory.
template <class Ops>
double stage_peak(const Ops& ops,
                  const shaped_memory_model& memory,
                  stage_index s,
                  std::uint32_t chunks) {
  double peak = memory.static_memory(s);
  walk_live_memory(ops, peak, stage_deltas(memory, s, chunks), [&](std::size_t, double value) {
    peak = std::max(peak, value);
    return true;
  });
  return peak;
}

/// The highest value a stage's memory may reach under `limit`: limit·(1 + tolerance), relative
/// to the limit so that it absorbs rounding in sums of sizes in any memory unit
/// (memory_options::tolerance, 1e-9 by default). check_memory and with_recompute's moves judge a
/// limit by it.
constexpr double limit_threshold(double limit, double tolerance = 1e-9) noexcept {
  return limit + tolerance * limit;
}

/// One micro-batch's activations of every chunk of stage s, Σ_c M_B: the unit of
/// stage_memory::peak_stage_units, and what each chunk's F must hold at least once. With
/// per-micro-batch sizes, Σ_c of each chunk's largest M_B (memory_model::envelope).
inline double stage_activation(const shaped_memory_model& memory,
                               stage_index s,
                               std::uint32_t chunks) {
  double act = 0.0;
  for (chunk_index c = 0; c < chunks; ++c) {
    act += memory.envelope(s, c).activation;
  }
  return act;
}

/// The least memory any schedule needs on stage s: static memory plus stage_activation (every
/// chunk's F precedes its backward, so some moment holds one micro-batch's activations of
/// each chunk; an order running one micro-batch at a time needs no more). With per-micro-batch
/// sizes and one chunk, the largest micro-batch's; with several chunks the envelope's sum, at
/// most the largest micro-batch's sum of another chunk more: what the admission rule below
/// needs never to block (docs/model.md §5.1).
inline double minimum_stage_memory(const shaped_memory_model& memory,
                                   stage_index s,
                                   std::uint32_t chunks) {
  return memory.static_memory(s) + stage_activation(memory, s, chunks);
}

namespace detail {

/// Throws invalid_argument, prefixed with `who`, when a stage's limit (`limits`: one value, or
/// one per stage) is below minimum_stage_memory by more than 1e-9 of it (relative: memory may
/// be in any unit). Every scheduler that takes a limit checks it here.
inline void require_minimum_memory(std::string_view who,
                                   const placement& pl,
                                   const shaped_memory_model& memory,
                                   const memory_limits& limits) {
  for (stage_index s = 0; s < pl.stages(); ++s) {
    const double limit = limits.at(s);
    const double act = stage_activation(memory, s, pl.chunks());
    const double need = minimum_stage_memory(memory, s, pl.chunks());
    if (!(limit >= need - 1e-9 * need)) {
      fail(who, ": memory_limit (", limit, ") is below the minimum any schedule needs on stage ", s,
           " (", need, " = static memory ", memory.static_memory(s),
           " + one micro-batch's activations M_B of its ", pl.chunks(), " chunk(s) ", act, ")");
    }
  }
}

/// The tolerance of memory compares against a limit, in memory units: 1e-9 × the largest
/// per-stage budget (`avail[s]` = limit − static memory) or activation M_B of the problem (1e-9
/// when all are 0). It absorbs rounding in sums of M_B and M_W, whatever the memory unit: a
/// budget of 2.5·M_B holds 2 activations for M_B = 1e-9 as for M_B = 1e12. It is at most 1e-9 ×
/// the largest limit, the memory checker's default tolerance on that stage, so with one limit
/// for every stage what the schedulers admit check_memory accepts.
inline double memory_tolerance(const placement& pl,
                               const shaped_memory_model& memory,
                               const std::vector<double>& avail) {
  double scale = 0.0;
  for (double x : avail) {
    scale = std::max(scale, std::abs(x));
  }
  for (stage_index s = 0; s < pl.stages(); ++s) {
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      scale = std::max(scale, memory.envelope(s, c).activation);
    }
  }
  return 1e-9 * (scale > 0.0 ? scale : 1.0);
}

/// What an F of local chunk c on stage s must leave free besides its own activation: one
/// activation (M_B) of each chunk of the stage later in the model. The oldest micro-batch in
/// flight still has to pass forward through those before any backward frees memory, so without
/// that room a stage could fill up with one chunk's forwards and block. With per-micro-batch
/// sizes, each later chunk's largest M_B: the oldest may be the largest.
inline double later_chunk_reserve(const placement& pl,
                                  const shaped_memory_model& memory,
                                  stage_index s,
                                  chunk_index c) {
  double reserve = 0.0;
  for (chunk_index d = 0; d < pl.chunks(); ++d) {
    if (pl.global(s, d) > pl.global(s, c)) {
      reserve += memory.envelope(s, d).activation;
    }
  }
  return reserve;
}

/// The admission rule of every scheduler that decides while it runs (the zero-bubble greedy,
/// the dynamic policy and its drivers; docs/model.md §5): an F may start when live memory plus
/// its change (memory_delta) plus later_chunk_reserve stays within `cap`, the limit plus
/// memory_tolerance. Above the minimum budget the oldest micro-batch can then always finish.
constexpr bool admits_forward(double live, double delta_f, double reserve, double cap) noexcept {
  return live + delta_f + reserve <= cap;
}

}  // namespace detail

}  // namespace pipesched
