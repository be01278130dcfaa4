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
/// What `in` holds and what the result means, by kind (chunk g = the op's global chunk):
///   F       in: activation from chunk g-1 (empty for g = 0); returns the activation for g+1
///   B, BW   in: gradient of g's output from chunk g+1 (empty for the last chunk, which
///           computes the loss itself); returns the gradient for chunk g-1
///   W       in: empty; result ignored
///   SEND_*  in: the message to send (lowered schedules); result ignored
///   RECV_*  in: empty; returns the received message
/// Not checked by the compiler, but required: drivers call run() in each stage's list order,
/// only once the op's inputs exist; run() may be called concurrently for *different* stages
/// (thread and MPI drivers) and must not call back into the driver; exceptions propagate to
/// the driver, which stops every stage and rethrows the first one.
/// Models: null_executor (below), and those in exec/: sleep_executor, instrumented_executor,
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

}  // namespace pipesched
