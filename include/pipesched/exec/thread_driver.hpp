#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "pipesched/exec/detail/channel.hpp"
#include "pipesched/exec/execution_error.hpp"
#include "pipesched/exec/executor.hpp"
#include "pipesched/exec/run_stage.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"

namespace pipesched {

struct thread_driver_options {
  /// 0: no limit. Otherwise an op whose run() has not returned after this long fails the run
  /// with an execution_error naming its stage and op (nested: op_timeout_error). Its thread
  /// can't be interrupted: it is detached, touches only the driver's own shared state when
  /// run() eventually returns, and then exits. The executor must outlive that return.
  std::chrono::milliseconds op_timeout{0};
  /// Validate the schedule first (recommended: an invalid schedule could wait forever).
  bool validate = true;
};

/// The nested exception of the execution_error a timed-out op produces.
class op_timeout_error : public std::runtime_error {
 public:
  explicit op_timeout_error(std::chrono::milliseconds limit)
      : std::runtime_error("op did not return within " + std::to_string(limit.count()) +
                           " ms (op_timeout)") {}
};

namespace detail {

/// Per-stage watchdog word: the steady_clock start (ns) of the op inside run(), or one of:
inline constexpr std::int64_t stage_idle = -1;       ///< not inside run()
inline constexpr std::int64_t stage_abandoned = -2;  ///< timed out; the driver has moved on

template <class M>
struct thread_run_state {
  explicit thread_run_state(std::uint32_t stages)
      : hub(stages), in_op_since(stages), op_index(stages) {
    for (std::uint32_t s = 0; s < stages; ++s) {
      in_op_since[s].store(stage_idle);
      op_index[s].store(0);
    }
  }

  /// Records the first failure and stops everything else.
  void fail(std::exception_ptr e) {
    {
      std::lock_guard lock(mu);
      if (!first_error) {
        first_error = std::move(e);
      }
    }
    stop.store(true);
    hub.cancel();
  }

  channel_hub<M> hub;
  std::atomic<bool> stop{false};
  std::mutex mu;  // guards first_error, running
  std::condition_variable finished_cv;
  std::exception_ptr first_error;
  std::uint32_t running = 0;
  std::vector<std::atomic<std::int64_t>> in_op_since;
  std::vector<std::atomic<std::size_t>> op_index;
};

inline std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Wraps the user's executor to publish "stage s is inside run() since t" for the watchdog.
/// Leaving run() and being abandoned by the watchdog race on one atomic word, so exactly one
/// wins: either the stage continues normally, or it leaves without touching anything but the
/// shared state (the driver may have returned, and the caller's executor may be gone).
template <class E>
struct watched_executor {
  using message = typename E::message;
  E* inner;
  thread_run_state<message>* state;

  message run(const op_context& c, message&& in) {
    const stage_index s = c.stage;
    if (state->stop.load()) {
      throw run_cancelled();
    }
    state->op_index[s].store(c.index);
    std::int64_t started = steady_now_ns();
    state->in_op_since[s].store(started);
    message out = run_op(*inner, c, std::move(in));
    if (!state->in_op_since[s].compare_exchange_strong(started, stage_idle)) {
      throw run_cancelled();  // abandoned by the watchdog: leave at once
    }
    return out;
  }
};

}  // namespace detail

/// Runs `sched` with one std::jthread per stage; in-process channels (mutex + condition
/// variable, matched by message_key) carry the executor's activations and gradients.
///
/// Failure: the first exception of any op (or of the transport) cancels the channels, so
/// blocked stages wake up, and every stage stops before its next op; all threads are joined,
/// then the first exception is rethrown as an execution_error naming the stage and op.
/// An invalid schedule throws deadlock_error / invalid_argument before any thread starts.
/// e.run() is called concurrently for different stages (see the executor concept).
template <class E>
void run_threaded(E& e, const schedule& sched, const thread_driver_options& opts = {}) {
  static_assert(detail::check_executor<E>());
  // Only a model of executor gets further (see run_serial).
  if constexpr (executor<E>) {
    using message = typename E::message;
    if (opts.op_timeout.count() < 0) {
      detail::fail("run_threaded: op_timeout (", opts.op_timeout.count(), " ms) must be >= 0");
    }
    if (opts.validate) {
      detail::require_runnable(sched, "run_threaded");
    }
    const std::uint32_t p = sched.stages();
    auto state = std::make_shared<detail::thread_run_state<message>>(p);
    state->running = p;
    // A thread abandoned by the watchdog may outlive this call: it must not reach the caller's
    // schedule then, so with a timeout the runners read a copy it co-owns.
    std::shared_ptr<const schedule> owned;
    if (opts.op_timeout.count() > 0) {
      owned = std::make_shared<const schedule>(sched);
    }
    const schedule& run_sched = owned ? *owned : sched;

    auto body = [state, owned, &e](std::unique_ptr<detail::stage_runner<message>> runner,
                                   stage_index s) {
      detail::watched_executor<E> watched{&e, state.get()};
      detail::channel_endpoint<message> ep(state->hub, s);
      try {
        while (!state->stop.load() && !runner->done()) {
          runner->step(watched, ep);
        }
      } catch (const detail::run_cancelled&) {
        // another stage failed first, or this stage was abandoned
      } catch (...) {
        state->fail(std::current_exception());
      }
      std::lock_guard lock(state->mu);
      --state->running;
      state->finished_cv.notify_all();
    };

    std::vector<std::jthread> threads;
    threads.reserve(p);
    try {
      for (stage_index s = 0; s < p; ++s) {
        threads.emplace_back(body, std::make_unique<detail::stage_runner<message>>(run_sched, s),
                             s);
      }
    } catch (...) {
      {
        std::lock_guard lock(state->mu);
        state->running -= p - static_cast<std::uint32_t>(threads.size());
      }
      state->fail(std::current_exception());
      threads.clear();  // joins the started ones, which stop at once
      throw;
    }

    std::vector<bool> stuck(p, false);
    if (opts.op_timeout.count() == 0) {
      std::unique_lock lock(state->mu);
      state->finished_cv.wait(lock, [&] { return state->running == 0; });
    } else {
      const auto limit_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(opts.op_timeout).count();
      const auto poll = std::clamp(opts.op_timeout / 4, std::chrono::milliseconds(1),
                                   std::chrono::milliseconds(50));
      std::unique_lock lock(state->mu);
      for (;;) {
        if (state->finished_cv.wait_for(lock, poll, [&] { return state->running == 0; })) {
          break;
        }
        lock.unlock();
        const std::int64_t now = detail::steady_now_ns();
        std::uint32_t n_stuck = 0;
        for (stage_index s = 0; s < p; ++s) {
          std::int64_t t0 = state->in_op_since[s].load();
          if (!stuck[s] && t0 >= 0 && now - t0 > limit_ns &&
              state->in_op_since[s].compare_exchange_strong(t0, detail::stage_abandoned)) {
            stuck[s] = true;  // the stage is still inside that op, and will never run another
            const std::size_t i = state->op_index[s].load();
            try {
              throw op_timeout_error(opts.op_timeout);
            } catch (...) {
              state->fail(std::make_exception_ptr(execution_error(
                  s, i, sched.ops(s)[i], sched.chunks() > 1, detail::current_what())));
            }
          }
          if (stuck[s]) {
            ++n_stuck;
          }
        }
        lock.lock();
        if (state->running <= n_stuck) {
          break;  // everyone else has stopped; the stuck ones are left behind
        }
      }
    }
    for (stage_index s = 0; s < p; ++s) {
      if (stuck[s]) {
        threads[s].detach();
      }
    }
    threads.clear();  // joins
    if (state->first_error) {
      std::rethrow_exception(state->first_error);
    }
  }
}

}  // namespace pipesched
