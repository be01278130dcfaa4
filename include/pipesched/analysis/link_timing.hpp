#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/analysis/detail/timed_traverse.hpp"
#include "pipesched/analysis/perturbed_timing.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/stage_table.hpp"
#include "pipesched/ir/timed_op.hpp"
#include "pipesched/ir/traversal.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/link.hpp"
#include "pipesched/model/perturbation.hpp"

// Timing a schedule over links with bandwidth, shared by pipeline sends and bulk all-reduce
// traffic (model/link.hpp, docs/robustness.md §8).

namespace pipesched {

/// What a message on a link carries.
enum class message_kind : std::uint8_t {
  activation,      ///< an F's output, to the next chunk's stage
  input_gradient,  ///< a B's or BW's input gradient, to the previous chunk's stage
  allreduce,       ///< one ring step of a gradient bucket (bulk traffic)
};

/// One message as the link sent it.
struct link_message {
  message_kind kind = message_kind::activation;
  stage_index from = 0;     ///< the link it used (the sending stage)
  stage_index to = 0;       ///< the receiving stage; for allreduce `from` (its ring peer's replica)
  global_chunk chunk = 0;   ///< the producer's chunk; allreduce: the bucket's chunk
  microbatch_index mb = 0;  ///< allreduce: the ring step
  double bytes = 0.0;
  double submitted = 0.0;  ///< handed to the link (its producer's end)
  double sent = 0.0;       ///< its last byte left the link (it arrives T_comm later)
  /// sent − submitted − bytes / bandwidth: the time it waited for other messages.
  double wait = 0.0;
  /// The part of `wait` during which the link sent bulk bytes (0 for bulk messages, and for
  /// every message under link_discipline::priority).
  double behind_bulk = 0.0;
};

/// Traffic of one stage's link.
struct link_stats {
  std::size_t pipeline_messages = 0;
  std::size_t bulk_messages = 0;
  double pipeline_bytes = 0.0;
  double bulk_bytes = 0.0;
  double busy = 0.0;           ///< time spent sending (bytes / bandwidth, summed)
  double pipeline_wait = 0.0;  ///< Σ link_message::wait of its pipeline messages
  double behind_bulk = 0.0;    ///< Σ link_message::behind_bulk of its pipeline messages
  double allreduce_end = 0.0;  ///< when its last bucket's all-reduce ended (0: none)
};

/// simulate_links' options: the links, which sample of which noise, what to record.
struct link_timing_options {
  link_model links{};            ///< each stage's link; default: free links (simulate()'s times)
  perturbation noise{};          ///< none by default: the clean cost model
  std::uint64_t sample = 0;      ///< which sample of `noise`
  bool record_ops = true;        ///< fill link_timing_result::ops
  bool record_messages = false;  ///< fill link_timing_result::messages
};

/// The outcome of simulate_links().
struct link_timing_result {
  /// ops[s][i]: op i of stage s with its start and end (record_ops); when the schedule
  /// deadlocks, the ops that ran.
  stage_table<timed_op> ops;
  std::vector<link_stats> links;       ///< one per stage
  std::vector<link_message> messages;  ///< in the order they were sent (record_messages)
  double makespan = 0.0;               ///< the last op's end
  /// The iteration: the later of the makespan and the last all-reduce's end.
  double iteration = 0.0;
  double pipeline_wait = 0.0;  ///< Σ over stages of link_stats::pipeline_wait
  /// Σ over pipeline messages of the time they waited while their link sent bulk bytes: the
  /// stalls bulk traffic causes the pipeline's sends. 0 under link_discipline::priority.
  double stall_behind_bulk = 0.0;
  std::optional<deadlock_witness> deadlock;

  bool completed() const noexcept { return !deadlock.has_value(); }
};

namespace detail {

/// One stage's link: the messages waiting, served at `bandwidth` in the discipline's order.
/// Fluid: a message's bytes leave continuously, so under priority a pipeline message takes
/// the link from a bulk one at once (packet-level preemption, packets of size 0).
class link_queue {
 public:
  struct entry {
    std::size_t id = 0;  ///< the caller's message number
    double remaining = 0.0;
    bool bulk = false;
    double behind_bulk = 0.0;
  };

  link_queue(double bandwidth, link_discipline d) : bandwidth_(bandwidth), discipline_(d) {}

  /// Sends up to time t; calls done(entry, time its last byte left) for each message finished.
  template <class Done>
  void advance(double t, Done&& done) {
    while (!queue_.empty()) {
      const std::size_t h = head();
      const double fin = clock_ + queue_[h].remaining / bandwidth_;  // 0 at infinite bandwidth
      if (fin <= t) {
        credit(h, fin - clock_);
        clock_ = fin;
        const entry e = queue_[h];
        queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(h));
        ++version_;
        done(e, fin);
        continue;
      }
      if (t > clock_) {
        credit(h, t - clock_);
        queue_[h].remaining = std::max(0.0, queue_[h].remaining - (t - clock_) * bandwidth_);
        ++version_;
      }
      break;
    }
    clock_ = std::max(clock_, t);
  }
  /// Hands a message to the link at time t (after advance(t)).
  void submit(double t, const entry& e) {
    clock_ = std::max(clock_, t);
    queue_.push_back(e);
    ++version_;
  }
  /// When the message being sent finishes unless another takes the link first.
  std::optional<double> next_finish() const {
    if (queue_.empty()) {
      return std::nullopt;
    }
    return clock_ + queue_[head()].remaining / bandwidth_;
  }
  std::uint64_t version() const noexcept { return version_; }

 private:
  // FIFO: the oldest. Priority: the oldest pipeline message, else the oldest bulk one.
  std::size_t head() const noexcept {
    if (discipline_ == link_discipline::priority) {
      for (std::size_t i = 0; i < queue_.size(); ++i) {
        if (!queue_[i].bulk) {
          return i;
        }
      }
    }
    return 0;
  }
  // While the message at h is sent for dt, the waiting pipeline messages wait behind bulk
  // bytes when it is a bulk one.
  void credit(std::size_t h, double dt) {
    if (!queue_[h].bulk || dt <= 0.0) {
      return;
    }
    for (std::size_t i = 0; i < queue_.size(); ++i) {
      if (i != h && !queue_[i].bulk) {
        queue_[i].behind_bulk += dt;
      }
    }
  }

  double bandwidth_;
  link_discipline discipline_;
  double clock_ = 0.0;
  std::uint64_t version_ = 0;
  std::vector<entry> queue_;  // in submission order
};

}  // namespace detail

/// Times `sched` (compute ops; a lowered schedule is refused) under `costs` over the links of
/// `options.links`: each op starts at the later of its stage's previous op's end and the arrival of
/// each input from another stage, where an input arrives T_comm(from, to) after its message
/// left the sending stage's link (model/link.hpp), not T_comm after its producer ended.
/// Durations, latencies, overlapped pairs and recompute ops are the timing engine's
/// (docs/model.md §3, with the sampled costs of `options.noise` as simulate_perturbed takes
/// them); the bulk all-reduce of each chunk's gradients (link_model::bulk) becomes ready as the
/// chunk's last W / BW on the stage runs (bucket j of K when j / K of it ran) and shares the
/// link. With infinite bandwidth (or messages
/// of 0 bytes) and no bulk traffic, every op's start and end equal simulate()'s exactly
/// (tested on a grid of schedules).
///
/// Throws invalid_argument for an invalid link model (link_model::check), a cost table of
/// another shape, or a lowered schedule. A schedule that cannot complete returns with
/// `deadlock` set.
inline link_timing_result simulate_links(const schedule& sched,
                                         const cost_model& costs,
                                         const link_timing_options& options = {}) {
  const link_model& links = options.links;
  const char* who = "simulate_links";
  const placement& pl = sched.layout();
  const std::uint32_t p = sched.stages();
  const std::uint32_t m = sched.microbatches();
  const std::uint32_t v = pl.chunks();
  links.check(p, who);
  if (sched.has_comm()) {
    detail::fail(who, ": schedule \"", sched.name(),
                 "\" has SEND/RECV ops: time the compute schedule (the links model the transfers)");
  }
  detail::require_traversable(sched, who);
  const perturbed_costs pc(pl, m, false, costs, options.noise, options.sample, who);
  const detail::traversal_plan& plan = pc.plan();

  // Why an event loop and not detail::timed_traverse: a message's departure depends on which
  // other messages are already queued on its link at that moment (and, under priority, on
  // pipeline messages handed to the link after a bulk one), so messages must be handled in
  // global time order. timed_traverse visits ops in dependency order, where a stage may run
  // far ahead in time of another, and can't tell which message came first. Everything else is
  // shared: durations and latencies (perturbed_costs), what an op waits for (the traversal
  // plan, ir/dependencies.hpp), which ops form an overlapped pair (detail::pair_candidate) and
  // how long the pair lasts. The pair's formula is timed_traverse's; a test pins this loop to
  // simulate() with free links on every registered schedule family.

  constexpr std::size_t kinds = 8;  // event_kind values, room to spare
  const std::size_t row = pl.total_chunks();
  auto key = [row](global_chunk g, microbatch_index mb, event_kind e) {
    return (std::size_t{mb} * row + g) * kinds + static_cast<std::size_t>(e);
  };
  // When an event happened (local use) and when its message left the link (remote use); < 0:
  // not yet. `done` holds the produced-event bits as traverse keeps them (for the witness).
  std::vector<double> happened(row * m * kinds, -1.0);
  std::vector<double> sent_at(row * m * kinds, -1.0);
  const detail::event_index at{row};
  std::vector<std::uint8_t> done(row * m, 0);

  // The stage an event must reach, when its consumer runs on another stage (-1: none).
  std::vector<std::int64_t> dest(row * kinds, -1);
  for (stage_index s = 0; s < p; ++s) {
    for (chunk_index c = 0; c < v; ++c) {
      for (op_kind k : all_op_kinds) {
        const detail::op_plan& e = plan.at(s, make_op(k, 0, c));
        for (std::uint8_t j = 0; j < e.count; ++j) {
          if (e.deps[j].remote) {
            dest[std::size_t{e.deps[j].chunk} * kinds + static_cast<std::size_t>(e.deps[j].what)] =
                s;
          }
        }
      }
    }
  }
  // The last W / BW of each local chunk in its stage's list: its end makes the chunk's
  // gradients ready for the all-reduce.
  std::vector<std::vector<std::int64_t>> last_w(p, std::vector<std::int64_t>(v, -1));
  for (stage_index s = 0; s < p; ++s) {
    const auto ops = sched.ops(s);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const op& o = ops[i];
      if ((o.kind == op_kind::backward_weight || o.kind == op_kind::backward_full) && o.chunk < v &&
          o.mb < m) {
        last_w[s][o.chunk] = static_cast<std::int64_t>(i);
      }
    }
  }

  link_timing_result r;
  r.links.resize(p);
  if (options.record_ops) {  // written in place at (stage, index); a deadlock truncates
    std::vector<std::size_t> sizes(p);
    for (stage_index s = 0; s < p; ++s) {
      sizes[s] = sched.ops(s).size();
    }
    r.ops.reset(sizes);
  }
  std::vector<detail::link_queue> link;
  for (stage_index s = 0; s < p; ++s) {
    link.emplace_back(links.bandwidth_of(s), links.discipline);
  }
  struct message_state {
    link_message msg;
    std::size_t event = 0;  // sent_at key (pipeline messages)
  };
  std::vector<message_state> msgs;

  // Events in time order, ties in the order they were created.
  enum class ev : std::uint8_t { op_end, link_check, ring_step, bucket_ready };
  struct event {
    double t;
    std::uint64_t seq;
    ev what;
    stage_index stage;
    std::uint64_t version;
    bool operator>(const event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
  };
  std::priority_queue<event, std::vector<event>, std::greater<>> events;
  std::uint64_t seq = 0;
  auto push = [&](double t, ev what, stage_index s, std::uint64_t version = 0) {
    events.push(event{t, seq++, what, s, version});
  };
  auto arm = [&](stage_index s) {
    if (const auto f = link[s].next_finish()) {
      push(*f, ev::link_check, s, link[s].version());
    }
  };

  // Stages: the next op, when the stage is free, and the slot running (one op or a pair).
  struct stage_state {
    std::size_t pos = 0;
    double free_at = 0.0;
    bool running = false;
    std::size_t count = 0;  // ops in the running slot
    double start = 0.0;
    double end = 0.0;
  };
  std::vector<stage_state> st(p);

  // Bulk: per stage, the buckets waiting and the ring step of the one being reduced.
  struct bucket {
    global_chunk chunk = 0;
    double bytes = 0.0;
  };
  struct ring_state {
    std::deque<bucket> waiting;
    bool active = false;
    bucket current{};
    std::uint32_t step = 0;
  };
  std::vector<ring_state> ring(p);
  // Stages whose input left a link: tried again once the current event is handled.
  std::vector<stage_index> woken;

  auto on_sent = [&](stage_index s) {
    return [&, s](const detail::link_queue::entry& e, double fin) {
      message_state& ms = msgs[e.id];
      link_message& msg = ms.msg;
      msg.sent = fin;
      msg.wait = std::max(0.0, fin - msg.submitted - msg.bytes / links.bandwidth_of(s));
      link_stats& ls = r.links[s];
      ls.busy += msg.bytes / links.bandwidth_of(s);
      if (e.bulk) {
        push(fin + links.bulk.step_latency, ev::ring_step, s);
      } else {
        msg.behind_bulk = e.behind_bulk;
        ls.pipeline_wait += msg.wait;
        ls.behind_bulk += e.behind_bulk;
        sent_at[ms.event] = fin;
        woken.push_back(msg.to);
      }
    };
  };
  auto send = [&](stage_index s, double t, link_message msg, std::size_t event_key) {
    const bool bulk = msg.kind == message_kind::allreduce;
    link[s].advance(t, on_sent(s));
    msg.submitted = t;
    link_stats& ls = r.links[s];
    (bulk ? ls.bulk_messages : ls.pipeline_messages) += 1;
    (bulk ? ls.bulk_bytes : ls.pipeline_bytes) += msg.bytes;
    msgs.push_back(message_state{msg, event_key});
    link[s].submit(t, detail::link_queue::entry{msgs.size() - 1, msg.bytes, bulk, 0.0});
    arm(s);
  };
  auto ring_send = [&](stage_index s, double t) {
    const ring_state& rs = ring[s];
    link_message msg;
    msg.kind = message_kind::allreduce;
    msg.from = msg.to = s;
    msg.chunk = rs.current.chunk;
    msg.mb = rs.step;
    msg.bytes = rs.current.bytes / links.bulk.replicas;
    send(s, t, msg, 0);
  };
  auto ring_next = [&](stage_index s, double t) {
    ring_state& rs = ring[s];
    if (rs.active || rs.waiting.empty()) {
      return;
    }
    rs.active = true;
    rs.current = rs.waiting.front();
    rs.waiting.pop_front();
    rs.step = 0;
    ring_send(s, t);
  };

  // The time `x`'s inputs from other stages arrive, at least `t`; false when one is missing.
  auto inputs_ready = [&](stage_index s, const op& x, double& t) {
    const detail::op_plan& e = plan.at(s, x);
    const detail::op_cost& c = pc.of(s, x);
    for (std::uint8_t k = 0; k < e.count; ++k) {
      const std::size_t i = key(e.deps[k].chunk, x.mb, e.deps[k].what);
      if (!e.deps[k].remote) {
        if (happened[i] < 0.0) {
          return false;
        }
        continue;  // it ran earlier on this stage: ended by free_at
      }
      if (sent_at[i] < 0.0) {
        return false;
      }
      t = detail::ready_time(t, sent_at[i], c.latency[k]);
    }
    return true;
  };
  auto in_range = [&](const op& o) { return o.chunk < v && o.mb < m; };
  auto record = [&](stage_index s, std::size_t i, const op& o, double start, double end) {
    if (options.record_ops) {
      r.ops[s][i] = timed_op{s, static_cast<std::uint32_t>(i), o, start, end};
    }
  };

  auto try_start = [&](stage_index s) {
    stage_state& ss = st[s];
    const auto ops = sched.ops(s);
    while (!ss.running && ss.pos < ops.size()) {
      const std::size_t i = ss.pos;
      const op& o = ops[i];
      if (!in_range(o)) {  // takes no time and produces nothing, as in the timing engine
        record(s, i, o, ss.free_at, ss.free_at);
        ++ss.pos;
        continue;
      }
      double start = ss.free_at;
      if (!inputs_ready(s, o, start)) {
        return;
      }
      double end = start + pc.of(s, o).duration;
      std::size_t count = 1;
      if (detail::pair_candidate(ops.data(), ops.size(), i, v, m)) {
        // One slot (docs/model.md §3; the length as in detail::timed_traverse).
        const op& o2 = ops[i + 1];
        double ready2 = 0.0;
        if (!inputs_ready(s, o2, ready2)) {
          return;
        }
        start = std::max(start, ready2);
        const op& f = o.kind == op_kind::forward ? o : o2;
        const bool f_and_b = (o.kind == op_kind::forward) != (o2.kind == op_kind::forward) &&
                             (produces_input_grad(o.kind) || produces_input_grad(o2.kind));
        const double gain = f_and_b ? pc.of(s, f).overlap_gain : 0.0;
        end = start + std::max(0.0, pc.of(s, o).duration + pc.of(s, o2).duration - gain);
        count = 2;
      }
      ss.running = true;
      ss.count = count;
      ss.start = start;
      ss.end = end;
      push(end, ev::op_end, s);
      // A chunk's last W (or BW) produces its gradients layer by layer: bucket j of K is
      // ready when (j + 1) / K of the op (of the pair's slot) has run.
      for (std::size_t j = 0; j < count && links.bulk.any(); ++j) {
        const op& w = ops[i + j];
        if (last_w[s][w.chunk] == static_cast<std::int64_t>(i + j)) {
          const std::uint32_t n = links.bulk.buckets_per_chunk;
          for (std::uint32_t b = 1; b <= n; ++b) {
            const double t = b == n ? end : start + (end - start) * b / n;
            push(t, ev::bucket_ready, s, pl.global(s, w.chunk));
          }
        }
      }
    }
  };

  auto op_end = [&](stage_index s, double t) {
    stage_state& ss = st[s];
    const auto ops = sched.ops(s);
    for (std::size_t j = 0; j < ss.count; ++j) {
      const std::size_t i = ss.pos + j;
      const op& o = ops[i];
      record(s, i, o, ss.start, ss.end);
      const detail::op_plan& e = plan.at(s, o);
      const std::uint8_t produced = static_cast<std::uint8_t>(e.produced & ~events_withheld(o));
      done[at(e.own, o.mb)] |= produced;
      for (std::size_t w = 0; w < kinds; ++w) {
        if ((produced & (1u << w)) == 0) {
          continue;
        }
        const auto what = static_cast<event_kind>(w);
        const std::size_t k = key(e.own, o.mb, what);
        happened[k] = ss.end;
        const std::int64_t to = dest[std::size_t{e.own} * kinds + w];
        if (to < 0) {
          continue;
        }
        link_message msg;
        msg.kind = what == event_kind::forward_done ? message_kind::activation
                                                    : message_kind::input_gradient;
        msg.from = s;
        msg.to = static_cast<stage_index>(to);
        msg.chunk = e.own;
        msg.mb = o.mb;
        msg.bytes =
            msg.kind == message_kind::activation ? links.activation_bytes : links.gradient_bytes;
        send(s, t, msg, k);
      }
    }
    ss.pos += ss.count;
    ss.free_at = ss.end;
    ss.running = false;
    try_start(s);
  };

  for (stage_index s = 0; s < p; ++s) {
    try_start(s);
  }
  while (!events.empty()) {
    const event e = events.top();
    events.pop();
    switch (e.what) {
      case ev::op_end:
        op_end(e.stage, e.t);
        break;
      case ev::link_check: {
        if (e.version != link[e.stage].version()) {
          break;  // the link changed since: a newer check is queued
        }
        link[e.stage].advance(e.t, on_sent(e.stage));
        arm(e.stage);
        break;
      }
      case ev::bucket_ready:
        ring[e.stage].waiting.push_back(
            bucket{static_cast<global_chunk>(e.version),
                   links.bulk.bytes(e.stage) / v / links.bulk.buckets_per_chunk});
        ring_next(e.stage, e.t);
        break;
      case ev::ring_step: {
        ring_state& rs = ring[e.stage];
        if (++rs.step < links.bulk.steps()) {
          ring_send(e.stage, e.t);
        } else {
          rs.active = false;
          r.links[e.stage].allreduce_end = e.t;
          ring_next(e.stage, e.t);
        }
        break;
      }
    }
    while (!woken.empty()) {
      const stage_index s = woken.back();
      woken.pop_back();
      try_start(s);
    }
  }

  std::vector<std::size_t> pos(p);
  bool complete = true;
  for (stage_index s = 0; s < p; ++s) {
    pos[s] = st[s].pos;
    complete = complete && st[s].pos == sched.ops(s).size();
    if (st[s].pos > 0) {
      r.makespan = std::max(r.makespan, st[s].free_at);
    }
    r.iteration = std::max(r.iteration, r.links[s].allreduce_end);
    r.pipeline_wait += r.links[s].pipeline_wait;
    r.stall_behind_bulk += r.links[s].behind_bulk;
  }
  r.iteration = std::max(r.iteration, r.makespan);
  if (!complete) {
    if (options.record_ops) {  // only the ops that ran: a prefix of each stage's list
      for (stage_index s = 0; s < p; ++s) {
        r.ops.truncate(s, pos[s]);
      }
    }
    r.deadlock = detail::traversal_outcome(sched, false, pos, done, at).witness;
  }
  if (options.record_messages) {
    std::stable_sort(msgs.begin(), msgs.end(), [](const message_state& a, const message_state& b) {
      return a.msg.sent < b.msg.sent;
    });
    for (const message_state& ms : msgs) {
      r.messages.push_back(ms.msg);
    }
  }
  return r;
}

}  // namespace pipesched
