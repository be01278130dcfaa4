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
  /// 0: no limit. Otherwise a watchdog that fails the run when an op's run() does not return,
  /// and names that op, whatever the machine's load:
  ///  1. Once some op has been inside run() for longer than op_timeout, the driver pauses the
  ///     run: no stage starts another op (ops already inside run() go on).
  ///  2. It gives the ops still inside run() a further op_timeout to return. If they all do, the
  ///     run resumes: an op that is slow (or whose thread was descheduled) but returns is not a
  ///     failure. While some of them return, the rest get another op_timeout: the machine is
  ///     making progress, and a healthy op held off the CPU is not named while others return.
  ///  3. Otherwise, after a whole op_timeout in which none of them returned, the run fails with
  ///     an execution_error (nested: op_timeout_error) naming, of the ops still inside run(),
  ///     the one that entered it first. It has been inside run() for at least op_timeout, the
  ///     last op_timeout with no other op starting or returning; an op that returned is never
  ///     named.
  /// Only time inside the executor's run() counts: a stage waiting for a message (the
  /// driver's receive, before a RECV or an F / B runs) is never inside run(), so it is never
  /// named while the op it waits for has not returned. (An executor that waits inside run()
  /// for another stage's work, e.g. the message of an overlapped pair, is named if that work
  /// never completes: the driver cannot tell such a wait from computing.)
  /// The threads of ops still inside run() at step 3 can't be interrupted: they are detached,
  /// touch only the driver's own shared state when run() eventually returns, and then exit. The
  /// executor must outlive those returns. At most max_op_timeout.
  std::chrono::milliseconds op_timeout{0};
  /// Validate the schedule first (recommended: an invalid schedule could wait forever).
  bool validate = true;

  /// The largest op_timeout (about 35 years), so that clock arithmetic cannot overflow.
  static constexpr std::chrono::milliseconds max_op_timeout{std::int64_t{1} << 40};
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

inline std::int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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
      stop.store(true);
    }
    resume_cv.notify_all();
    hub.cancel();
  }

  /// Waits while the watchdog has paused the run, then publishes "stage s is inside op
  /// `index` since <returned start>". Under `mu`, so no op starts once the pause is set.
  std::int64_t enter_op(stage_index s, std::size_t index) {
    std::unique_lock lock(mu);
    resume_cv.wait(lock, [&] { return !paused.load() || stop.load(); });
    if (stop.load()) {
      throw run_cancelled();
    }
    op_index[s].store(index);
    const std::int64_t started = steady_now_ns();
    in_op_since[s].store(started);
    return started;
  }

  /// Leaving run() and being abandoned by the watchdog race on one atomic word, so exactly one
  /// wins: false when the watchdog did (the stage must leave touching nothing else).
  bool leave_op(stage_index s, std::int64_t started) {
    if (!in_op_since[s].compare_exchange_strong(started, stage_idle)) {
      return false;
    }
    if (paused.load()) {  // the watchdog waits for the ops inside run() to return
      { std::lock_guard lock(mu); }
      finished_cv.notify_all();
    }
    return true;
  }

  bool any_inside_op() const { return inside_ops() > 0; }

  std::size_t inside_ops() const {
    return static_cast<std::size_t>(
        std::count_if(in_op_since.begin(), in_op_since.end(),
                      [](const std::atomic<std::int64_t>& t) { return t.load() >= 0; }));
  }

  channel_hub<M> hub;
  std::atomic<bool> stop{false};        // written under mu
  std::atomic<bool> paused{false};      // written under mu
  std::mutex mu;                        // guards first_error, running; orders enter_op and pauses
  std::condition_variable finished_cv;  // to the watchdog: a stage exited or left run()
  std::condition_variable resume_cv;    // to the stages: the pause is over
  std::exception_ptr first_error;
  std::uint32_t running = 0;
  std::vector<std::atomic<std::int64_t>> in_op_since;
  std::vector<std::atomic<std::size_t>> op_index;
};

/// Wraps the user's executor to publish "stage s is inside run() since t" for the watchdog.
template <class E>
struct watched_executor {
  using message = typename E::message;
  E* inner;
  thread_run_state<message>* state;

  message run(const op_context& c, message&& in) {
    const std::int64_t started = state->enter_op(c.stage, c.index);
    message out;
    try {
      out = run_op(*inner, c, std::move(in));
    } catch (...) {
      if (!state->leave_op(c.stage, started)) {
        throw run_cancelled();
      }
      throw;
    }
    if (!state->leave_op(c.stage, started)) {
      throw run_cancelled();  // abandoned by the watchdog: leave at once
    }
    return out;
  }
};

/// The watchdog of run_threaded (thread_driver_options::op_timeout), on the caller's thread
/// until every stage has exited or is abandoned. Returns which stages are abandoned: their
/// threads are still inside run() and must be detached. `lock` holds state.mu.
template <class M>
std::vector<bool> watch_threaded_run(thread_run_state<M>& state,
                                     std::unique_lock<std::mutex>& lock,
                                     const schedule& sched,
                                     std::chrono::milliseconds limit) {
  const std::uint32_t p = sched.stages();
  std::vector<bool> abandoned(p, false);
  const std::int64_t limit_ns = std::chrono::nanoseconds(limit).count();
  const auto poll =
      std::clamp(limit / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(50));
  const auto all_exited = [&] { return state.running == 0; };
  for (;;) {
    if (state.finished_cv.wait_for(lock, poll, all_exited)) {
      return abandoned;
    }
    const std::int64_t now = steady_now_ns();
    const bool overdue = std::any_of(state.in_op_since.begin(), state.in_op_since.end(),
                                     [&](const std::atomic<std::int64_t>& t) {
                                       const std::int64_t t0 = t.load();
                                       return t0 >= 0 && now - t0 > limit_ns;
                                     });
    if (!overdue) {
      continue;
    }
    // Confirm before blaming: with no new op starting, a slow op returns, a hung one doesn't;
    // while some return, the rest get another op_timeout (no op starts, so the count of ops
    // inside only falls).
    state.paused.store(true);
    bool returned = false;
    for (std::size_t inside = state.inside_ops();;) {
      if (state.finished_cv.wait_for(lock, limit,
                                     [&] { return all_exited() || !state.any_inside_op(); })) {
        returned = true;
        break;
      }
      const std::size_t now_inside = state.inside_ops();
      if (now_inside >= inside) {
        break;  // a whole op_timeout in which none returned
      }
      inside = now_inside;
    }
    if (returned) {
      state.paused.store(false);
      state.resume_cv.notify_all();
      continue;
    }
    // The oldest op still inside run() is the culprit; every op still inside is abandoned.
    std::vector<std::pair<std::int64_t, stage_index>> inside;
    for (stage_index s = 0; s < p; ++s) {
      if (const std::int64_t t0 = state.in_op_since[s].load(); t0 >= 0) {
        inside.emplace_back(t0, s);
      }
    }
    std::sort(inside.begin(), inside.end());
    std::uint32_t n_abandoned = 0;
    std::exception_ptr blame;
    for (auto [t0, s] : inside) {
      if (!state.in_op_since[s].compare_exchange_strong(t0, stage_abandoned)) {
        continue;  // it returned just now
      }
      abandoned[s] = true;
      ++n_abandoned;
      if (!blame) {
        const std::size_t i = state.op_index[s].load();
        try {
          throw op_timeout_error(limit);
        } catch (...) {
          blame = std::make_exception_ptr(
              execution_error(s, i, sched.ops(s)[i], sched.chunks() > 1, current_what()));
        }
      }
    }
    if (!blame) {  // every one returned between the wait and the exchange
      state.paused.store(false);
      state.resume_cv.notify_all();
      continue;
    }
    lock.unlock();
    state.fail(std::move(blame));
    lock.lock();
    // The others are outside run() and stopped: they exit without starting an op.
    state.finished_cv.wait(lock, [&] { return state.running <= n_abandoned; });
    return abandoned;
  }
}

}  // namespace detail

/// Runs `sched` with one std::jthread per stage; in-process channels (mutex + condition
/// variable, matched by message_key) carry the executor's activations and gradients.
///
/// Failure: the first exception of any op (or of the transport) cancels the channels, so
/// blocked stages wake up, and every stage stops before its next op; all threads are joined,
/// then the first exception is rethrown as an execution_error naming the stage and op.
/// An op that does not return: see thread_driver_options::op_timeout.
/// An invalid schedule throws deadlock_error / invalid_argument before any thread starts.
/// e.run() is called concurrently for different stages (see the executor concept).
template <class E>
void run_threaded(E& e, const schedule& sched, const thread_driver_options& opts = {}) {
  static_assert(detail::check_executor<E>());
  // Only a model of executor gets further (see run_serial).
  if constexpr (executor<E>) {
    using message = typename E::message;
    if (opts.op_timeout.count() < 0 || opts.op_timeout > thread_driver_options::max_op_timeout) {
      detail::fail("run_threaded: op_timeout (", opts.op_timeout.count(),
                   " ms) must be >= 0 (0: no limit) and at most max_op_timeout (",
                   thread_driver_options::max_op_timeout.count(), " ms)");
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

    std::vector<bool> abandoned(p, false);
    {
      std::unique_lock lock(state->mu);
      if (opts.op_timeout.count() == 0) {
        state->finished_cv.wait(lock, [&] { return state->running == 0; });
      } else {
        abandoned = detail::watch_threaded_run(*state, lock, sched, opts.op_timeout);
      }
    }
    for (stage_index s = 0; s < p; ++s) {
      if (abandoned[s]) {
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
