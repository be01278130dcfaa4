#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "pipesched/analysis/memory_events.hpp"
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
  std::optional<double> memory_limit;
};

namespace detail {

/// Throws invalid_argument when `limit` leaves no room for one micro-batch's activations of
/// every chunk of some stage (the policy could then block). `mem` is already for_shape'd.
inline void check_dynamic_limit(const placement& pl,
                                const memory_model& mem,
                                const std::optional<double>& limit,
                                const char* who) {
  if (!limit) {
    return;
  }
  for (stage_index s = 0; s < pl.stages(); ++s) {
    double need = mem.static_memory(s);
    for (chunk_index c = 0; c < pl.chunks(); ++c) {
      need += mem.at(s, c).activation;
    }
    if (!(*limit >= need)) {
      fail(who, ": memory_limit (", *limit, ") must be at least ", need, " on stage ", s,
           ": static memory plus one micro-batch's activations of each of its chunks");
    }
  }
}

/// One stage of a real dynamic run (run_threaded_dynamic, run_mpi_dynamic): its progress
/// (next F and B of each local chunk, the W whose B ran, live memory) and the policy's pick,
/// so every driver decides by the same rule. The drivers differ only in how they learn that
/// an input message has arrived and how they move messages.
class dynamic_stage {
 public:
  /// `mem` is already for_shape'd (memory_model::for_shape).
  dynamic_stage(const placement& pl,
                stage_index s,
                std::uint32_t microbatches,
                const memory_model& mem,
                std::optional<double> limit)
      : pl_(&pl),
        mem_(&mem),
        limit_(limit),
        s_(s),
        m_(microbatches),
        next_f_(pl.chunks(), 0),
        next_b_(pl.chunks(), 0),
        live_(mem.static_memory(s)) {}

  /// The op the stage runs next, or nullopt when none may run yet. `arrived(key)` says
  /// whether the message under `key` (message_key) is here. The rule: a B whose F ran and
  /// whose gradient arrived (lowest micro-batch, then the chunk later in the model), else an F
  /// whose input arrived and that memory admits (live memory + its activation + one activation
  /// of each later chunk of the stage that still has forwards, within the limit; the chunk
  /// later in the model first), else the oldest pending W.
  template <class Arrived>
  std::optional<op> pick(Arrived&& arrived) const {
    const placement& pl = *pl_;
    const std::uint32_t v = pl.chunks();
    std::optional<op> best;
    auto later = [&](const op& a, const op& b) {
      return pl.global(s_, a.chunk) > pl.global(s_, b.chunk);
    };
    for (chunk_index c = 0; c < v; ++c) {
      const global_chunk g = pl.global(s_, c);
      const microbatch_index j = next_b_[c];
      // B needs its own F (F runs in micro-batch order per chunk) and the gradient.
      if (j < m_ && next_f_[c] > j &&
          (pl.is_last(g) || arrived(message_key{g, j, direction::backward}))) {
        const op b{op_kind::backward_input, j, c};
        if (!best || b.mb < best->mb || (b.mb == best->mb && later(b, *best))) {
          best = b;
        }
      }
    }
    if (best) {
      return best;
    }
    for (chunk_index c = 0; c < v; ++c) {
      const global_chunk g = pl.global(s_, c);
      const microbatch_index j = next_f_[c];
      if (j >= m_ || (g > 0 && !arrived(message_key{g, j, direction::forward}))) {
        continue;
      }
      if (limit_) {
        double need = live_ + memory_delta(op_kind::forward, mem_->at(s_, c));
        for (chunk_index d = static_cast<chunk_index>(c + 1); d < v; ++d) {
          if (next_f_[d] < m_) {
            need += mem_->at(s_, d).activation;
          }
        }
        if (need > *limit_) {
          continue;
        }
      }
      const op f{op_kind::forward, j, c};
      if (!best || later(f, *best)) {
        best = f;
      }
    }
    if (best) {
      return best;
    }
    if (!pending_w_.empty()) {
      return pending_w_.front();
    }
    return std::nullopt;
  }

  /// The message `x` consumes (an F's activation, a B's gradient), or nullopt.
  std::optional<message_key> input_of(const op& x) const {
    const global_chunk g = pl_->global(s_, x.chunk);
    if (x.kind == op_kind::forward && g > 0) {
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
    if (x.kind == op_kind::backward_input && g > 0) {
      return std::pair{pl_->stage_of(g - 1), message_key{g - 1, x.mb, direction::backward}};
    }
    return std::nullopt;
  }

  /// The stage that produces the message under `k` (an activation: chunk k.chunk − 1's stage;
  /// a gradient: chunk k.chunk + 1's).
  stage_index producer_of(const message_key& k) const {
    return pl_->stage_of(k.dir == direction::forward ? k.chunk - 1 : k.chunk + 1);
  }

  /// Accounts `x` (the op pick() returned) as started: its memory is committed.
  void commit(const op& x) {
    live_ += memory_delta(x.kind, mem_->at(s_, x.chunk));
    switch (x.kind) {
      case op_kind::forward:
        ++next_f_[x.chunk];
        break;
      case op_kind::backward_input:
        ++next_b_[x.chunk];
        pending_w_.push_back(op{op_kind::backward_weight, x.mb, x.chunk});
        break;
      default:
        pending_w_.pop_front();
        break;
    }
  }

  /// The context run() gets for `x`, the stage's op number `index`.
  op_context context(const op& x, std::size_t index) const {
    const global_chunk g = pl_->global(s_, x.chunk);
    return op_context{s_, index, x, g, pl_->is_first(g), pl_->is_last(g), m_, false};
  }

  /// The ops the stage runs in all: F, B and W of each chunk and micro-batch.
  std::size_t total() const noexcept { return std::size_t{pl_->chunks()} * m_ * 3; }

 private:
  const placement* pl_;
  const memory_model* mem_;
  std::optional<double> limit_;
  stage_index s_;
  std::uint32_t m_;
  std::vector<microbatch_index> next_f_, next_b_;
  std::deque<op> pending_w_;
  double live_;
};

}  // namespace detail

/// The dynamic mode of the thread driver (run_threaded runs a fixed order): one std::jthread
/// per stage, and each stage, whenever it is free, runs among the ops whose input message has
/// arrived: a B (lowest micro-batch, then the chunk later in the model), else an F that memory
/// admits (the rule of simulate_dynamic, analysis/dynamic_policy.hpp: live memory + its
/// activation + one activation of each later chunk of the stage that still has forwards,
/// within the limit), else its oldest pending W; otherwise it waits for a message. Split
/// backward only (F, B, W ops).
///
/// Returns the order the stages actually ran (name "dynamic"): it validates and fits the limit
/// (check_memory). Failure: the first exception of any op stops every stage; all threads are
/// joined and it is rethrown as an execution_error naming the stage, the op's position in the
/// recorded order and the op. Throws invalid_argument for a limit below one activation of each
/// chunk of a stage.
template <class E>
schedule run_threaded_dynamic(E& e,
                              const placement& pl,
                              std::uint32_t microbatches,
                              const dynamic_run_options& opts = {}) {
  static_assert(detail::check_executor<E>());
  schedule order("dynamic", microbatches, pl);  // checks m
  if constexpr (executor<E>) {
    using message = typename E::message;
    const char* who = "run_threaded_dynamic";
    const std::uint32_t p = pl.stages();
    const std::uint32_t v = pl.chunks();
    const std::uint32_t m = microbatches;
    const memory_model mem = opts.memory.for_shape(p, v, who);
    detail::check_dynamic_limit(pl, mem, opts.memory_limit, who);

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
      policy.emplace_back(pl, s, m, mem, opts.memory_limit);
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
        // Route the output: an activation to chunk g+1, a gradient to chunk g-1.
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
