#pragma once

#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "pipesched/analysis/validate.hpp"
#include "pipesched/exec/detail/channel.hpp"
#include "pipesched/exec/execution_error.hpp"
#include "pipesched/exec/executor.hpp"
#include "pipesched/exec/transport.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched {

struct run_stage_options {
  /// Validate the whole schedule first (linear time) and throw instead of running an invalid
  /// one, which could block forever on a message that never comes. Drivers that validated
  /// already pass false.
  bool validate = true;
};

namespace detail {

/// Throws deadlock_error (with the witness) or invalid_argument (first violation) when the
/// schedule can't be run as given.
inline void require_runnable(const schedule& sched, const std::string& who) {
  validation_report r = validate(sched);
  if (r.ok()) {
    return;
  }
  // A missing or misordered op usually causes the deadlock too: report the root cause first.
  const violation* first = detail::first_cause(r);
  if ((first == nullptr || first->kind == violation_kind::deadlock) && r.deadlock) {
    throw deadlock_error(who + ": schedule \"" + sched.name() + "\"", std::move(*r.deadlock));
  }
  throw invalid_argument(invalid_schedule_message(r, sched.name(), who));
}

/// One stage's state in a run: its position in the list and its local mailbox of messages
/// (produced on this stage for a local consumer, received by RECV ops, or waiting for a SEND).
template <class M>
class stage_runner {
 public:
  stage_runner(const schedule& sched, stage_index s)
      : sched_(&sched), stage_(s), lowered_(sched.has_comm()) {}

  bool done() const noexcept { return pos_ >= sched_->ops(stage_).size(); }
  std::size_t position() const noexcept { return pos_; }
  std::size_t mailbox_size() const noexcept { return mailbox_.size(); }

  /// Runs the next op of the stage. Any failure except a cancellation is rethrown as an
  /// execution_error naming the stage and op.
  template <class E, class T>
  void step(E& e, T& t) {
    const op o = sched_->ops(stage_)[pos_];
    const std::size_t index = pos_;
    const bool chunked = sched_->chunks() > 1;
    try {
      execute(e, t, make_op_context(*sched_, stage_, index));
    } catch (const run_cancelled&) {
      throw;
    } catch (...) {
      throw execution_error(stage_, index, o, chunked, current_what());
    }
    ++pos_;
  }

 private:
  template <class E, class T>
  void execute(E& e, T& t, const op_context& ctx) {
    const placement& pl = sched_->layout();
    const op& o = ctx.o;
    const global_chunk g = ctx.chunk;
    const microbatch_index j = o.mb;
    switch (o.kind) {
      case op_kind::forward: {
        M in{};
        if (!pl.is_first(g)) {
          in = fetch(t, g - 1, message_key{g, j, direction::forward});
        }
        M out = run_op(e, ctx, std::move(in));
        if (!pl.is_last(g)) {
          deliver(t, g + 1, message_key{g + 1, j, direction::forward}, std::move(out));
        }
        break;
      }
      case op_kind::backward_input:
      case op_kind::backward_full: {
        M in{};
        if (!pl.is_last(g)) {
          in = fetch(t, g + 1, message_key{g, j, direction::backward});
        }
        M out = run_op(e, ctx, std::move(in));
        if (!pl.is_first(g)) {
          deliver(t, g - 1, message_key{g - 1, j, direction::backward}, std::move(out));
        }
        break;
      }
      case op_kind::backward_weight:
      case op_kind::recompute:  // re-runs the forward from the input its F kept
        (void)run_op(e, ctx, M{});
        break;
      case op_kind::send_forward:
      case op_kind::send_backward: {
        const bool fwd = o.kind == op_kind::send_forward;
        if (fwd ? pl.is_last(g) : pl.is_first(g)) {
          fail("run_stage: ", to_string(o.kind), " of chunk ", g, " has no peer chunk");
        }
        const global_chunk peer = fwd ? g + 1 : g - 1;
        const message_key k{peer, j, fwd ? direction::forward : direction::backward};
        t.send(pl.stage_of(peer), k, run_op(e, ctx, take(k)));
        break;
      }
      case op_kind::recv_forward:
      case op_kind::recv_backward: {
        const bool fwd = o.kind == op_kind::recv_forward;
        if (fwd ? pl.is_first(g) : pl.is_last(g)) {
          fail("run_stage: ", to_string(o.kind), " of chunk ", g, " has no peer chunk");
        }
        const global_chunk peer = fwd ? g - 1 : g + 1;
        const message_key k{g, j, fwd ? direction::forward : direction::backward};
        M out = run_op(e, ctx, t.receive(pl.stage_of(peer), k));
        put(k, std::move(out));
        break;
      }
    }
  }

  // The input produced by global chunk `producer`: local unless it ran on another stage of
  // a compute-only schedule (a lowered schedule has received it with a RECV op already).
  template <class T>
  M fetch(T& t, global_chunk producer, const message_key& k) {
    const stage_index from = sched_->layout().stage_of(producer);
    if (from == stage_ || lowered_) {
      return take(k);
    }
    return t.receive(from, k);
  }

  // Routes an output to global chunk `consumer`: the local mailbox when it lives here (or
  // when a SEND op will ship it), else the transport.
  template <class T>
  void deliver(T& t, global_chunk consumer, const message_key& k, M&& msg) {
    const stage_index to = sched_->layout().stage_of(consumer);
    if (to == stage_ || lowered_) {
      put(k, std::move(msg));
    } else {
      t.send(to, k, std::move(msg));
    }
  }

  M take(const message_key& k) {
    auto it = mailbox_.find(k);
    if (it == mailbox_.end()) {
      throw std::logic_error("run_stage: stage " + std::to_string(stage_) + " has no " +
                             to_string(k) + " (was the schedule validated?)");
    }
    M msg = std::move(it->second);
    mailbox_.erase(it);
    return msg;
  }

  void put(const message_key& k, M&& msg) {
    if (!mailbox_.try_emplace(k, std::move(msg)).second) {
      throw std::logic_error("run_stage: stage " + std::to_string(stage_) + " produced " +
                             to_string(k) + " twice");
    }
  }

  const schedule* sched_;
  stage_index stage_;
  bool lowered_;
  std::size_t pos_ = 0;
  std::map<message_key, M> mailbox_;
};

}  // namespace detail

/// Runs stage `s`'s op list in order, as one rank of a distributed job does.
///
/// For each op it takes the op's input message, calls the executor's run() with the op's
/// context (make_op_context; the short form e.run(s, op, input) when E has no context form),
/// and routes the returned message to its consumer. Inputs come from the stage's local mailbox
/// when the producer is on the same stage, else from the transport (`t.receive(producer
/// stage, key)`); outputs go to the local mailbox or to `t.send(consumer stage, key, msg)`. In
/// a lowered schedule (with SEND/RECV ops) only SEND_* and RECV_* touch the transport: F/B
/// outputs wait in the mailbox for their SEND, RECV puts what it received there for F/B.
/// Throws: invalid_argument / deadlock_error when the schedule is invalid (unless
/// opts.validate is false); execution_error (stage, op, nested original) when an op or the
/// transport fails.
template <class E, class T>
void run_stage(
    E& e, const schedule& sched, stage_index s, T& t, const run_stage_options& opts = {}) {
  static_assert(detail::check_executor<E>());
  // Only a model of executor gets further (see run_serial).
  if constexpr (executor<E>) {
    static_assert(transport<T, typename E::message>,
                  "pipesched run_stage: T must model pipesched::transport for E::message");
    if (s >= sched.stages()) {
      detail::fail("run_stage: stage (", s, ") must be less than stages (p=", sched.stages(), ")");
    }
    if (opts.validate) {
      detail::require_runnable(sched, "run_stage");
    }
    detail::stage_runner<typename E::message> runner(sched, s);
    while (!runner.done()) {
      runner.step(e, t);
    }
  }
}

}  // namespace pipesched
