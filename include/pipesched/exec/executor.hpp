#pragma once

#include <concepts>
#include <utility>

#include "pipesched/ir/op.hpp"

namespace pipesched {

/// executor: runs the ops a schedule assigns to a stage, and produces / consumes the
/// messages (activations and gradients) that flow from one model chunk to the next.
///
/// A model E provides:
///   typename E::message         default-constructible, movable: one activation or gradient
///   e.run(s, o, in) -> E::message
///       for an lvalue `e`, a `stage_index s`, a `const op& o` and an rvalue `E::message in`:
///       run `o` on stage `s` to completion, or throw.
/// What `in` holds and what the result means, by kind (chunk g = the op's global chunk, see
/// placement):
///   F       in: activation from chunk g-1 (empty for g = 0); returns the activation for g+1
///           (ignored for the last chunk, which keeps what its B needs to compute the loss)
///   B, BW   in: gradient of g's output from chunk g+1 (empty for the last chunk, which
///           computes the loss itself); returns the gradient for chunk g-1 (ignored for g = 0)
///   W       in: empty; result ignored
///   SEND_*  in: the message the driver is about to hand to the transport (lowered schedules);
///           returns the message actually sent (a hook: usually `in` itself, moved)
///   RECV_*  in: the message the driver just took from the transport; returns the message
///           delivered to the consuming op (usually `in` itself, moved)
/// The drivers, not the executor, move messages between stages (through a `transport`, see
/// exec/transport.hpp), so an executor only computes.
/// Not checked by the compiler, but required: drivers call run() in each stage's list order,
/// only once the op's inputs exist; run() may be called concurrently for *different* stages
/// (thread and MPI drivers), never for the same stage; it must not call back into the driver;
/// an exception stops the run: the driver stops every stage and rethrows the first one as a
/// pipesched::execution_error naming the stage and op.
/// Models: null_executor (below), sleep_executor, instrumented_executor<E>, any_executor and
/// the MLP of examples/mlp_pipeline.
///   static_assert(executor<null_executor>);   static_assert(!executor<int>);
template <class E>
concept executor = std::default_initializable<typename E::message> &&
    std::movable<typename E::message> &&
    requires(E& e, stage_index s, const op& o, typename E::message&& in) {
  { e.run(s, o, std::move(in)) } -> std::same_as<typename E::message>;
};

/// Does nothing; messages carry no data. Useful to exercise drivers and schedules.
struct null_executor {
  struct message {};
  message run(stage_index, const op&, message&&) { return {}; }
};

namespace detail {
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
    constexpr bool has_run = requires(E & e, stage_index s, const op& o, typename E::message&& in) {
      e.run(s, o, std::move(in));
    };
    static_assert(has_run,
                  "pipesched executor: needs a member run(stage_index, const op&, message&&)");
    if constexpr (has_run) {
      static_assert(executor<E>,
                    "pipesched executor: run(stage, op, message&&) must return message");
    }
  }
  return true;
}
}  // namespace detail

}  // namespace pipesched
