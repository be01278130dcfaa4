#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched {

/// What a driver knows about the op it hands to run(), so that an executor needs no copy of
/// the schedule to find the op's model chunk or to tell the data-loading and loss chunks.
/// For SEND_* / RECV_* ops, `chunk` is the global chunk of the op's own (local) chunk: the
/// producer for a SEND, the consumer for a RECV.
struct op_context {
  stage_index stage = 0;
  std::size_t index = 0;  ///< position in the stage's list
  op o{};
  global_chunk chunk = 0;          ///< the op's global chunk: placement::global(stage, o.chunk)
  bool first_chunk = false;        ///< first chunk of its route (is_first): an F reads the data
  bool last_chunk = false;         ///< last chunk of its route (is_last): the F computes the loss
  std::uint32_t microbatches = 0;  ///< m of the schedule
  /// The op is marked to run overlapped with the next op of its stage (overlaps_next, an F
  /// with a B or BW: docs/model.md §1): the next run() on this stage is the pair's second op.
  /// See the executor concept for what an executor may do with it.
  bool overlaps_next = false;

  friend bool operator==(const op_context&, const op_context&) = default;
};

/// The context of op `index` of stage `s` in `sched`: what every driver passes to run().
/// Throws invalid_argument when the stage or index is outside the schedule, or when the op's
/// chunk or micro-batch is out of range (a schedule that was not validated).
inline op_context make_op_context(const schedule& sched, stage_index s, std::size_t index) {
  if (s >= sched.stages() || index >= sched.ops(s).size()) {
    detail::fail("make_op_context: stage ", s, ", op ", index, " is outside schedule \"",
                 sched.name(), "\"");
  }
  const placement& pl = sched.layout();
  const op o = sched.ops(s)[index];
  if (o.chunk >= pl.chunks() || o.mb >= sched.microbatches()) {
    detail::fail("make_op_context: ", to_string(o, true), " (stage ", s, ", op ", index,
                 ") is out of range: chunks v=", pl.chunks(),
                 ", microbatches m=", sched.microbatches());
  }
  const global_chunk g = pl.global(s, o.chunk);
  const bool pair = pipesched::overlaps_next(o) && index + 1 < sched.ops(s).size();
  return {s, index, o, g, pl.is_first(g), pl.is_last(g), sched.microbatches(), pair};
}

namespace detail {

/// Has a context-form run(), whatever it returns.
template <class E>
concept takes_op_context = requires(E& e, const op_context& c, typename E::message&& in) {
  e.run(c, std::move(in));
};
/// Has a short-form run(), whatever it returns.
template <class E>
concept takes_stage_and_op = requires(E& e, stage_index s, const op& o, typename E::message&& in) {
  e.run(s, o, std::move(in));
};
/// The context form, returning message.
template <class E>
concept context_run = requires(E& e, const op_context& c, typename E::message&& in) {
  { e.run(c, std::move(in)) } -> std::same_as<typename E::message>;
};
/// The short form, returning message.
template <class E>
concept stage_run = requires(E& e, stage_index s, const op& o, typename E::message&& in) {
  { e.run(s, o, std::move(in)) } -> std::same_as<typename E::message>;
};

}  // namespace detail

/// executor: runs the ops a schedule assigns to a stage, and produces / consumes the
/// messages (activations and gradients) that flow from one model chunk to the next.
///
/// A model E provides:
///   typename E::message         default-constructible, movable: one activation or gradient
/// and one of the two forms of run(), for an lvalue `e` and an rvalue `E::message in`:
///   e.run(c, in) -> E::message          with a `const op_context& c` (the context form)
///   e.run(s, o, in) -> E::message       with a `stage_index s` and a `const op& o`
///       run the op on its stage to completion, or throw.
/// The context form hands over what the driver knows from the schedule (global chunk, first /
/// last chunk, list index, m), so prefer it when the op's model chunk matters; the short form
/// suits executors that only need the stage and the local op. When both exist, drivers call
/// the context form (detail::run_op is the one place that decides).
/// What `in` holds and what the result means, by kind (chunk g = the op's global chunk,
/// op_context::chunk; see placement):
///   F       in: activation from chunk g-1 (empty for g = 0); returns the activation for g+1
///           (ignored for the last chunk, which keeps what its B needs to compute the loss)
///   B, BW   in: gradient of g's output from chunk g+1 (empty for the last chunk, which
///           computes the loss itself); returns the gradient for chunk g-1 (ignored for g = 0)
///   W       in: empty; result ignored
///   R       in: empty; result ignored. Re-runs the forward of its F (marked recompute,
///           op_flag::recompute: that F kept only its input, is_recomputed(c.o)) to rebuild
///           what the B / BW needs; it comes after the F and before the backward on the stage
///   SEND_*  in: the message the driver is about to hand to the transport (lowered schedules);
///           returns the message actually sent (a hook: usually `in` itself, moved)
///   RECV_*  in: the message the driver just took from the transport; returns the message
///           delivered to the consuming op (usually `in` itself, moved)
/// The drivers, not the executor, move messages between stages (through a `transport`, see
/// exec/transport.hpp), so an executor only computes.
/// Overlapped pairs (an op marked overlaps_next and the next op of its stage, e.g. DualPipeV's
/// F of one micro-batch with the B of another): drivers still call run() once per op, in list
/// order, the first op once its inputs exist, then the second once its inputs exist;
/// op_context::overlaps_next is set on the first. An executor may run the pair together: start
/// the first op without waiting for it to finish (on its own stream or thread) and return a
/// message its consumer can wait on, then run the second alongside it; one that ignores the
/// flag runs the two one after the other, which is always correct. The validator guarantees
/// neither op of a valid pair needs the other.
/// Not checked by the compiler, but required: drivers call run() in each stage's list order,
/// only once the op's inputs exist; run() may be called concurrently for *different* stages
/// (thread and MPI drivers), never for the same stage; it must not call back into the driver;
/// an exception stops the run: the driver stops every stage and rethrows the first one as a
/// pipesched::execution_error naming the stage and op.
/// Models: null_executor (below), sleep_executor, instrumented_executor<E>, any_executor and
/// the MLP of examples/mlp_pipeline (context form).
///   static_assert(executor<null_executor>);   static_assert(!executor<int>);
template <class E>
concept executor = std::default_initializable<typename E::message> &&
    std::movable<typename E::message> &&
    // When a context form exists it is the one called, so only it counts: a wrong context
    // form is not excused by a correct short form that the drivers would never call.
    (detail::context_run<E> || (!detail::takes_op_context<E> && detail::stage_run<E>));

/// Does nothing; messages carry no data. Useful to exercise drivers and schedules.
struct null_executor {
  struct message {};
  message run(stage_index, const op&, message&&) { return {}; }
};

namespace detail {

/// The one call of an executor's run(): the context form when E has it, else the short form.
/// Every driver and adapter goes through here.
template <class E>
typename E::message run_op(E& e, const op_context& c, typename E::message&& in) {
  if constexpr (takes_op_context<E>) {
    return e.run(c, std::move(in));
  } else {
    return e.run(c.stage, c.o, std::move(in));
  }
}

/// Plain-English diagnostics for a near-miss model, one message per mistake, checked first
/// thing by every template that takes an executor (the drivers, any_executor,
/// instrumented_executor), which are unconstrained so that this, not a concept dump, is what
/// the compiler reports (tests/compile_fail/bad_executor.cpp).
template <class E>
constexpr bool check_executor() {
  static_assert(
      requires { typename E::message; },
      "pipesched executor: the type must declare a nested `message` type");
  if constexpr (requires { typename E::message; }) {
    static_assert(std::default_initializable<typename E::message>,
                  "pipesched executor: E::message must be default-constructible (empty input)");
    static_assert(std::movable<typename E::message>,
                  "pipesched executor: E::message must be movable");
    constexpr bool with_context = takes_op_context<E>;
    constexpr bool with_stage = takes_stage_and_op<E>;
    static_assert(with_context || with_stage,
                  "pipesched executor: needs a member run(stage_index, const op&, message&&) "
                  "or run(const op_context&, message&&)");
    if constexpr (with_context) {
      static_assert(executor<E>,
                    "pipesched executor: run(const op_context&, message&&) must return message");
    } else if constexpr (with_stage) {
      static_assert(executor<E>,
                    "pipesched executor: run(stage, op, message&&) must return message");
    }
  }
  return true;
}

}  // namespace detail

}  // namespace pipesched
