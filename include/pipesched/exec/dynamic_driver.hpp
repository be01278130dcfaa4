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
    if (opts.memory_limit) {
      for (stage_index s = 0; s < p; ++s) {
        double need = mem.static_memory(s);
        for (chunk_index c = 0; c < v; ++c) {
          need += mem.at(s, c).activation;
        }
        if (!(*opts.memory_limit >= need)) {
          detail::fail(who, ": memory_limit (", *opts.memory_limit, ") must be at least ", need,
                       " on stage ", s,
                       ": static memory plus one micro-batch's activations of each of its chunks");
        }
      }
    }

    // One lock for the whole run: ops are coarse, and a single lock makes "every stage waits
    // and nothing is in flight" (a stuck run) a plain check instead of a race.
    struct stage_state {
      std::condition_variable cv;
      std::map<message_key, message> inbox;  // from any stage, itself included
      std::vector<microbatch_index> next_f, next_b;
      std::deque<op> pending_w;
      double live = 0.0;
      bool waiting = false;
      bool finished = false;
    };
    std::mutex mu;
    std::vector<stage_state> st(p);
    for (stage_index s = 0; s < p; ++s) {
      st[s].next_f.assign(v, 0);
      st[s].next_b.assign(v, 0);
      st[s].live = mem.static_memory(s);
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

    // The op stage s may start now by the policy (mu held), or nullopt.
    auto choose = [&](stage_index s) -> std::optional<op> {
      stage_state& ss = st[s];
      std::optional<op> best;
      auto later = [&](const op& a, const op& b) {
        return pl.global(s, a.chunk) > pl.global(s, b.chunk);
      };
      for (chunk_index c = 0; c < v; ++c) {
        const global_chunk g = pl.global(s, c);
        const microbatch_index j = ss.next_b[c];
        // B needs its own F (F runs in micro-batch order per chunk) and the gradient.
        if (j < m && ss.next_f[c] > j &&
            (pl.is_last(g) || ss.inbox.count(message_key{g, j, direction::backward}) > 0)) {
          const op b{op_kind::backward_input, j, c};
          if (!best || best->kind != op_kind::backward_input || b.mb < best->mb ||
              (b.mb == best->mb && later(b, *best))) {
            best = b;
          }
        }
      }
      if (best) {
        return best;
      }
      for (chunk_index c = 0; c < v; ++c) {
        const global_chunk g = pl.global(s, c);
        const microbatch_index j = ss.next_f[c];
        if (j >= m || (g > 0 && ss.inbox.count(message_key{g, j, direction::forward}) == 0)) {
          continue;
        }
        if (opts.memory_limit) {
          double need = ss.live + memory_delta(op_kind::forward, mem.at(s, c));
          for (chunk_index d = static_cast<chunk_index>(c + 1); d < v; ++d) {
            if (ss.next_f[d] < m) {
              need += mem.at(s, d).activation;
            }
          }
          if (need > *opts.memory_limit) {
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
      if (!ss.pending_w.empty()) {
        return ss.pending_w.front();
      }
      return std::nullopt;
    };

    auto body = [&](stage_index s) {
      std::unique_lock lock(mu);
      stage_state& ss = st[s];
      std::vector<op>& ran = order.stage_ops(s);
      const std::size_t total = std::size_t{v} * m * 3;
      while (!stop && ran.size() < total) {
        std::optional<op> x = choose(s);
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
        const global_chunk g = pl.global(s, x->chunk);
        message in{};
        std::optional<message_key> in_key;
        if (x->kind == op_kind::forward && g > 0) {
          in_key = message_key{g, x->mb, direction::forward};
        } else if (x->kind == op_kind::backward_input && !pl.is_last(g)) {
          in_key = message_key{g, x->mb, direction::backward};
        }
        if (in_key) {
          auto it = ss.inbox.find(*in_key);
          in = std::move(it->second);
          ss.inbox.erase(it);
        }
        ss.live += memory_delta(x->kind, mem.at(s, x->chunk));
        switch (x->kind) {
          case op_kind::forward:
            ++ss.next_f[x->chunk];
            break;
          case op_kind::backward_input:
            ++ss.next_b[x->chunk];
            ss.pending_w.push_back(op{op_kind::backward_weight, x->mb, x->chunk});
            break;
          default:
            ss.pending_w.pop_front();
            break;
        }
        const std::size_t index = ran.size();
        ran.push_back(*x);
        const op_context ctx{s, index, *x, g, pl.is_first(g), pl.is_last(g), m, false};
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
        std::optional<std::pair<global_chunk, message_key>> to;
        if (x->kind == op_kind::forward && !pl.is_last(g)) {
          to.emplace(g + 1, message_key{g + 1, x->mb, direction::forward});
        } else if (x->kind == op_kind::backward_input && g > 0) {
          to.emplace(g - 1, message_key{g - 1, x->mb, direction::backward});
        }
        if (to) {
          stage_state& dst = st[pl.stage_of(to->first)];
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
