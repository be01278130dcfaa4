#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "pipesched/analysis/detail/dynamic_stage.hpp"
#include "pipesched/exec/execution_error.hpp"
#include "pipesched/exec/executor.hpp"
#include "pipesched/exec/transport.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/memory_model.hpp"

namespace pipesched {

struct dynamic_run_options {
  /// Sizes for the admission test (docs/model.md §5, through memory_events.hpp).
  memory_model memory{};
  /// Per stage, static memory included; none: F is always admitted. Must leave room for one
  /// micro-batch's activations of every chunk of the stage.
  memory_limits memory_limit;
};

namespace detail {

/// One stage of a real dynamic run (run_threaded_dynamic, run_mpi_dynamic): the dynamic policy
/// (dynamic_policy_stage, the rule simulate_dynamic decides by too) with the messages its ops
/// exchange. The drivers differ only in how they learn that a message has arrived and how
/// they move messages.
class dynamic_stage : public dynamic_policy_stage {
 public:
  using dynamic_policy_stage::dynamic_policy_stage;

  /// The op the stage runs next, or nullopt when none may run yet: the policy's pick, where
  /// an op's input is here when `arrived(key)` says its message (message_key) is.
  template <class Arrived>
  std::optional<op> pick(Arrived&& arrived) const {
    return dynamic_policy_stage::pick([&](const op& x) {
      const std::optional<message_key> k = input_of(x);
      return !k || arrived(*k);
    });
  }

  /// The message `x` consumes (an F's activation, a B's gradient), or nullopt.
  std::optional<message_key> input_of(const op& x) const {
    const global_chunk g = pl_->global(s_, x.chunk);
    if (x.kind == op_kind::forward && !pl_->is_first(g)) {
      return message_key{g, x.mb, direction::forward};
    }
    if (x.kind == op_kind::backward_input && !pl_->is_last(g)) {
      return message_key{g, x.mb, direction::backward};
    }
    return std::nullopt;
  }

  /// Where `x`'s output goes: the stage of its consumer and the consumer's key, or nullopt.
  std::optional<std::pair<stage_index, message_key>> output_of(const op& x) const {
    const global_chunk g = pl_->global(s_, x.chunk);
    if (x.kind == op_kind::forward && !pl_->is_last(g)) {
      return std::pair{pl_->stage_of(g + 1), message_key{g + 1, x.mb, direction::forward}};
    }
    if (x.kind == op_kind::backward_input && !pl_->is_first(g)) {
      return std::pair{pl_->stage_of(g - 1), message_key{g - 1, x.mb, direction::backward}};
    }
    return std::nullopt;
  }

  /// The stage that produces the message under `k` (an activation: chunk k.chunk − 1's stage;
  /// a gradient: chunk k.chunk + 1's).
  stage_index producer_of(const message_key& k) const {
    return pl_->stage_of(k.dir == direction::forward ? k.chunk - 1 : k.chunk + 1);
  }

  /// The context run() gets for `x`, the stage's op number `index`.
  op_context context(const op& x, std::size_t index) const {
    const global_chunk g = pl_->global(s_, x.chunk);
    return op_context{s_, index, x, g, pl_->is_first(g), pl_->is_last(g), m_, false};
  }
};

}  // namespace detail

/// The dynamic mode of the thread driver (run_threaded runs a fixed order): one std::jthread
/// per stage, and each stage, whenever it is free, runs among the ops whose input message has
/// arrived: a B (lowest micro-batch, then the chunk later in the model), else an F that memory
/// admits (the rule of simulate_dynamic, detail::dynamic_policy_stage: live memory + its
/// activation + one activation of each chunk of the stage later in the model, within the
/// limit up to the memory engine's tolerance), else its oldest pending W; otherwise it waits for a
/// message. Split backward only (F, B, W ops). Each micro-batch runs through the chunks of its
/// route only (placement: routes; with `dual` route 1 enters at stage p-1 and runs backwards).
///
/// Returns the order the stages actually ran (name "dynamic"): it validates and fits the limit
/// (check_memory). Failure: the first exception of any op stops every stage; all threads are
/// joined and it is rethrown as an execution_error naming the stage, the op's position in the
/// recorded order and the op. Throws invalid_argument for a limit below static memory plus one
/// activation of each chunk of a stage (require_minimum_memory).
template <class E>
schedule run_threaded_dynamic(E& e,
                              const placement& pl,
                              std::uint32_t microbatches,
                              const dynamic_run_options& opts = {}) {
  static_assert(detail::check_executor<E>());
  schedule order = schedule::on("dynamic", pl, microbatches);  // checks m
  if constexpr (executor<E>) {
    using message = typename E::message;
    const char* who = "run_threaded_dynamic";
    const std::uint32_t p = pl.stages();
    const std::uint32_t v = pl.chunks();
    const std::uint32_t m = microbatches;
    const shaped_memory_model mem = opts.memory.for_shape(p, v, m, who);
    const std::vector<double> cap = detail::dynamic_cap(who, pl, mem, opts.memory_limit);

    // One lock for the whole run: ops are coarse, and a single lock makes "every stage waits
    // and nothing is in flight" (a stuck run) a plain check instead of a race.
    struct stage_state {
      std::condition_variable cv;
      std::map<message_key, message> inbox;  // from any stage, itself included
      bool waiting = false;
      bool finished = false;
    };
    std::mutex mu;
    std::vector<stage_state> st(p);
    std::vector<detail::dynamic_stage> policy;
    policy.reserve(p);
    for (stage_index s = 0; s < p; ++s) {
      policy.emplace_back(pl, s, m, mem, detail::stage_cap(cap, s));
    }
    bool stop = false;
    std::exception_ptr first_error;
    auto fail_all = [&](std::exception_ptr ex) {  // with mu held
      if (!first_error) {
        first_error = std::move(ex);
      }
      stop = true;
      for (stage_state& x : st) {
        x.waiting = false;
        x.cv.notify_all();
      }
    };

    auto body = [&](stage_index s) {
      std::unique_lock lock(mu);
      stage_state& ss = st[s];
      detail::dynamic_stage& ds = policy[s];
      std::vector<op>& ran = order.stage_ops(s);
      const std::size_t total = ds.total();
      auto arrived = [&](const message_key& k) { return ss.inbox.count(k) > 0; };
      while (!stop && ran.size() < total) {
        std::optional<op> x = ds.pick(arrived);
        if (!x) {
          ss.waiting = true;
          bool stuck = true;  // every unfinished stage waits: no message can come
          for (const stage_state& y : st) {
            stuck = stuck && (y.finished || y.waiting);
          }
          if (stuck) {
            try {
              detail::fail(who, ": every stage waits and no message is in flight (stage ", s,
                           " after ", ran.size(), " ops)");
            } catch (...) {
              fail_all(std::current_exception());
            }
            break;
          }
          ss.cv.wait(lock);
          continue;
        }
        // Take the input and account the op before running it: its memory is committed.
        message in{};
        if (const std::optional<message_key> in_key = ds.input_of(*x)) {
          auto it = ss.inbox.find(*in_key);
          in = std::move(it->second);
          ss.inbox.erase(it);
        }
        ds.commit(*x);
        const std::size_t index = ran.size();
        ran.push_back(*x);
        const op_context ctx = ds.context(*x, index);
        lock.unlock();
        message out{};
        std::exception_ptr ex;
        try {
          out = detail::run_op(e, ctx, std::move(in));
        } catch (...) {
          try {
            throw execution_error(s, index, *x, v > 1, detail::current_what());
          } catch (...) {
            ex = std::current_exception();
          }
        }
        lock.lock();
        if (ex) {
          fail_all(ex);
          break;
        }
        // The output goes along the micro-batch's route: an activation to the next chunk, a
        // gradient to the previous one.
        if (const auto to = ds.output_of(*x)) {
          stage_state& dst = st[to->first];
          dst.inbox.emplace(to->second, std::move(out));
          dst.waiting = false;  // it has something new to look at, even before it wakes
          dst.cv.notify_all();
        }
      }
      ss.finished = true;
      for (stage_state& y : st) {  // a stage waiting on the stuck check must look again
        y.waiting = false;
        y.cv.notify_all();
      }
    };

    {
      std::vector<std::jthread> threads;
      threads.reserve(p);
      try {
        for (stage_index s = 0; s < p; ++s) {
          threads.emplace_back(body, s);
        }
      } catch (...) {
        {
          std::lock_guard lock(mu);
          fail_all(std::current_exception());
        }
        throw;  // the started threads stop and are joined
      }
    }  // joins
    if (first_error) {
      std::rethrow_exception(first_error);
    }
  }
  return order;
}

}  // namespace pipesched
