#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <queue>
#include <span>
#include <utility>
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

/// simulate_links' checks of its request, in order; the cost table's shape is checked by
/// perturbed_costs.
inline void check_link_request(const schedule& sched, const link_model& links, const char* who) {
  links.check(sched.stages(), who);
  if (sched.has_comm()) {
    fail(who, ": schedule \"", sched.name(),
         "\" has SEND/RECV ops: time the compute schedule (the links model the transfers)");
  }
  require_traversable(sched, who);
}

/// Room per (global chunk, micro-batch) in link_simulation's event tables: event_kind values,
/// with room to spare.
inline constexpr std::size_t link_event_kinds = 8;

/// Per (global chunk, event kind), the stage the event must reach when its consumer runs on
/// another stage (-1: none): the events that become link messages.
inline std::vector<std::int64_t> remote_consumers(const traversal_plan& plan,
                                                  std::uint32_t p,
                                                  std::uint32_t v,
                                                  std::size_t row) {
  constexpr std::size_t kinds = link_event_kinds;
  std::vector<std::int64_t> dest(row * kinds, -1);
  for (stage_index s = 0; s < p; ++s) {
    for (chunk_index c = 0; c < v; ++c) {
      for (op_kind k : all_op_kinds) {
        const op_plan& e = plan.at(s, make_op(k, 0, c));
        for (std::uint8_t j = 0; j < e.count; ++j) {
          if (e.deps[j].remote) {
            dest[std::size_t{e.deps[j].chunk} * kinds + static_cast<std::size_t>(e.deps[j].what)] =
                s;
          }
        }
      }
    }
  }
  return dest;
}

/// Per stage and local chunk, the index of the chunk's last W / BW in the stage's list (-1:
/// none): its end makes the chunk's gradients ready for the all-reduce.
inline std::vector<std::vector<std::int64_t>> last_weight_ops(const schedule& sched,
                                                              std::uint32_t v,
                                                              std::uint32_t m) {
  std::vector<std::vector<std::int64_t>> last_w(sched.stages(), std::vector<std::int64_t>(v, -1));
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto ops = sched.ops(s);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const op& o = ops[i];
      if ((o.kind == op_kind::backward_weight || o.kind == op_kind::backward_full) && o.chunk < v &&
          o.mb < m) {
        last_w[s][o.chunk] = static_cast<std::int64_t>(i);
      }
    }
  }
  return last_w;
}

/// simulate_links' event loop: its state, and one member per kind of event.
///
/// Why an event loop and not detail::timed_traverse: a message's departure depends on which
/// other messages are already queued on its link at that moment (and, under priority, on
/// pipeline messages handed to the link after a bulk one), so messages must be handled in
/// global time order. timed_traverse visits ops in dependency order, where a stage may run
/// far ahead in time of another, and can't tell which message came first. Everything else is
/// shared: durations and latencies (perturbed_costs), what an op waits for (the traversal
/// plan, ir/dependencies.hpp), which ops form an overlapped pair (detail::pair_candidate) and
/// how long the pair lasts (detail::pair_length). A test pins this loop to simulate() with free
/// links on every registered schedule family.
class link_simulation {
 public:
  link_simulation(const schedule& sched, const perturbed_costs& pc, const link_timing_options& o)
      : sched_(sched),
        pc_(pc),
        plan_(pc.plan()),
        options_(o),
        links_(o.links),
        pl_(sched.layout()),
        p_(sched.stages()),
        m_(sched.microbatches()),
        v_(pl_.chunks()),
        row_(pl_.total_chunks()),
        at_{row_},
        happened_(row_ * m_ * kinds, -1.0),
        sent_at_(row_ * m_ * kinds, -1.0),
        done_(row_ * m_, 0),
        dest_(remote_consumers(plan_, p_, v_, row_)),
        last_w_(last_weight_ops(sched, v_, m_)),
        st_(p_),
        ring_(p_) {
    r_.links.resize(p_);
    if (options_.record_ops) {  // written in place at (stage, index); a deadlock truncates
      std::vector<std::size_t> sizes(p_);
      for (stage_index s = 0; s < p_; ++s) {
        sizes[s] = sched_.ops(s).size();
      }
      r_.ops.reset(sizes);
    }
    for (stage_index s = 0; s < p_; ++s) {
      link_.emplace_back(links_.bandwidth_of(s), links_.discipline);
    }
  }

  /// Starts every stage, then handles the events in time order until none is left.
  void run() {
    for (stage_index s = 0; s < p_; ++s) {
      try_start(s);
    }
    while (!events_.empty()) {
      const event e = events_.top();
      events_.pop();
      handle(e);
      while (!woken_.empty()) {
        const stage_index s = woken_.back();
        woken_.pop_back();
        try_start(s);
      }
    }
  }

  /// The outcome once run() returned: totals, the witness of a deadlock, the messages.
  link_timing_result take_result() {
    std::vector<std::size_t> pos(p_);
    bool complete = true;
    for (stage_index s = 0; s < p_; ++s) {
      pos[s] = st_[s].pos;
      complete = complete && st_[s].pos == sched_.ops(s).size();
      if (st_[s].pos > 0) {
        r_.makespan = std::max(r_.makespan, st_[s].free_at);
      }
      r_.iteration = std::max(r_.iteration, r_.links[s].allreduce_end);
      r_.pipeline_wait += r_.links[s].pipeline_wait;
      r_.stall_behind_bulk += r_.links[s].behind_bulk;
    }
    r_.iteration = std::max(r_.iteration, r_.makespan);
    if (!complete) {
      if (options_.record_ops) {  // only the ops that ran: a prefix of each stage's list
        for (stage_index s = 0; s < p_; ++s) {
          r_.ops.truncate(s, pos[s]);
        }
      }
      r_.deadlock = traversal_outcome(sched_, false, pos, done_, at_).witness;
    }
    if (options_.record_messages) {
      std::stable_sort(
          msgs_.begin(), msgs_.end(),
          [](const message_state& a, const message_state& b) { return a.msg.sent < b.msg.sent; });
      for (const message_state& ms : msgs_) {
        r_.messages.push_back(ms.msg);
      }
    }
    return std::move(r_);
  }

 private:
  static constexpr std::size_t kinds = link_event_kinds;

  // Events in time order, ties in the order they were created.
  enum class ev : std::uint8_t { op_end, link_check, ring_step, bucket_ready };
  struct event {
    double t;
    std::uint64_t seq;
    ev what;
    stage_index stage;
    std::uint64_t version;  // link_check: the link's version; bucket_ready: the global chunk
    bool operator>(const event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
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
  struct message_state {
    link_message msg;
    std::size_t sent_at_key = 0;  // pipeline messages
  };

  std::size_t key(global_chunk g, microbatch_index mb, event_kind e) const noexcept {
    return (std::size_t{mb} * row_ + g) * kinds + static_cast<std::size_t>(e);
  }
  void push(double t, ev what, stage_index s, std::uint64_t version = 0) {
    events_.push(event{t, seq_++, what, s, version});
  }

  void handle(const event& e) {
    switch (e.what) {
      case ev::op_end:
        op_end(e.stage, e.t);
        break;
      case ev::link_check: {
        if (e.version != link_[e.stage].version()) {
          break;  // the link changed since: a newer check is queued
        }
        advance_link(e.stage, e.t);
        arm(e.stage);
        break;
      }
      case ev::bucket_ready:
        ring_[e.stage].waiting.push_back(
            bucket{static_cast<global_chunk>(e.version),
                   links_.bulk.bytes(e.stage) / v_ / links_.bulk.buckets_per_chunk});
        ring_next(e.stage, e.t);
        break;
      case ev::ring_step: {
        ring_state& rs = ring_[e.stage];
        if (++rs.step < links_.bulk.steps()) {
          ring_send(e.stage, e.t);
        } else {
          rs.active = false;
          r_.links[e.stage].allreduce_end = e.t;
          ring_next(e.stage, e.t);
        }
        break;
      }
    }
  }

  // --- Stages: starting and ending slots.

  bool in_range(const op& o) const noexcept { return o.chunk < v_ && o.mb < m_; }
  void record(stage_index s, std::size_t i, const op& o, double start, double end) {
    if (options_.record_ops) {
      r_.ops[s][i] = timed_op{s, static_cast<std::uint32_t>(i), o, start, end};
    }
  }
  // The time `x`'s inputs from other stages arrive, at least `t`; false when one is missing.
  bool inputs_ready(stage_index s, const op& x, double& t) const {
    const op_plan& e = plan_.at(s, x);
    const op_cost& c = pc_.of(s, x);
    for (std::uint8_t k = 0; k < e.count; ++k) {
      const std::size_t i = key(e.deps[k].chunk, x.mb, e.deps[k].what);
      if (!e.deps[k].remote) {
        if (happened_[i] < 0.0) {
          return false;
        }
        continue;  // it ran earlier on this stage: ended by free_at
      }
      if (sent_at_[i] < 0.0) {
        return false;
      }
      t = ready_time(t, sent_at_[i], c.latency[k]);
    }
    return true;
  }

  // Starts the stage's next slots while it is free and their inputs have arrived.
  void try_start(stage_index s) {
    stage_state& ss = st_[s];
    const auto ops = sched_.ops(s);
    while (!ss.running && ss.pos < ops.size()) {
      const std::size_t i = ss.pos;
      const op& o = ops[i];
      if (!in_range(o)) {  // takes no time and produces nothing, as in the timing engine
        record(s, i, o, ss.free_at, ss.free_at);
        ++ss.pos;
        continue;
      }
      if (!start_slot(s, ops, i)) {
        return;
      }
    }
  }
  // Runs ops[i] (with ops[i + 1] when they form an overlapped pair) unless an input is missing.
  bool start_slot(stage_index s, std::span<const op> ops, std::size_t i) {
    stage_state& ss = st_[s];
    const op& o = ops[i];
    double start = ss.free_at;
    if (!inputs_ready(s, o, start)) {
      return false;
    }
    double end = start + pc_.of(s, o).duration;
    std::size_t count = 1;
    if (pair_candidate(ops.data(), ops.size(), i, v_, m_)) {
      // One slot (docs/model.md §3), as detail::timed_traverse times it.
      const op& o2 = ops[i + 1];
      double ready2 = 0.0;
      if (!inputs_ready(s, o2, ready2)) {
        return false;
      }
      start = std::max(start, ready2);
      const op& f = o.kind == op_kind::forward ? o : o2;
      const double gain = pair_gains(o, o2) ? pc_.of(s, f).overlap_gain : 0.0;
      end = start + pair_length(pc_.of(s, o).duration, pc_.of(s, o2).duration, gain);
      count = 2;
    }
    ss.running = true;
    ss.count = count;
    ss.start = start;
    ss.end = end;
    push(end, ev::op_end, s);
    release_buckets(s, ops, i);
    return true;
  }
  // A chunk's last W (or BW) produces its gradients layer by layer: bucket j of K is ready
  // when (j + 1) / K of the op (of the pair's slot) has run.
  void release_buckets(stage_index s, std::span<const op> ops, std::size_t i) {
    const stage_state& ss = st_[s];
    for (std::size_t j = 0; j < ss.count && links_.bulk.any(); ++j) {
      const op& w = ops[i + j];
      if (last_w_[s][w.chunk] == static_cast<std::int64_t>(i + j)) {
        const std::uint32_t n = links_.bulk.buckets_per_chunk;
        for (std::uint32_t b = 1; b <= n; ++b) {
          const double t = b == n ? ss.end : ss.start + (ss.end - ss.start) * b / n;
          push(t, ev::bucket_ready, s, pl_.global(s, w.chunk));
        }
      }
    }
  }
  // The running slot ended at t: its ops' events happen, the stage takes its next slot.
  void op_end(stage_index s, double t) {
    stage_state& ss = st_[s];
    const auto ops = sched_.ops(s);
    for (std::size_t j = 0; j < ss.count; ++j) {
      const std::size_t i = ss.pos + j;
      record(s, i, ops[i], ss.start, ss.end);
      produce(s, ops[i], t);
    }
    ss.pos += ss.count;
    ss.free_at = ss.end;
    ss.running = false;
    try_start(s);
  }
  // The events `o` produces happen (at its slot's end, t); each one a consumer on another
  // stage waits for goes to the link as a message.
  void produce(stage_index s, const op& o, double t) {
    const op_plan& e = plan_.at(s, o);
    const std::uint8_t produced = static_cast<std::uint8_t>(e.produced & ~events_withheld(o));
    done_[at_(e.own, o.mb)] |= produced;
    for (std::size_t w = 0; w < kinds; ++w) {
      if ((produced & (1u << w)) == 0) {
        continue;
      }
      const auto what = static_cast<event_kind>(w);
      const std::size_t k = key(e.own, o.mb, what);
      happened_[k] = st_[s].end;
      const std::int64_t to = dest_[std::size_t{e.own} * kinds + w];
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
          msg.kind == message_kind::activation ? links_.activation_bytes : links_.gradient_bytes;
      send(s, t, msg, k);
    }
  }

  // --- Links: messages handed to a link, and sent.

  // Sends what the link can up to time t.
  void advance_link(stage_index s, double t) {
    link_[s].advance(t, [this, s](const link_queue::entry& e, double fin) { sent(s, e, fin); });
  }
  // Queues a check for when the link's current message would finish.
  void arm(stage_index s) {
    if (const auto f = link_[s].next_finish()) {
      push(*f, ev::link_check, s, link_[s].version());
    }
  }
  void send(stage_index s, double t, link_message msg, std::size_t event_key) {
    const bool bulk = msg.kind == message_kind::allreduce;
    advance_link(s, t);
    msg.submitted = t;
    link_stats& ls = r_.links[s];
    (bulk ? ls.bulk_messages : ls.pipeline_messages) += 1;
    (bulk ? ls.bulk_bytes : ls.pipeline_bytes) += msg.bytes;
    msgs_.push_back(message_state{msg, event_key});
    link_[s].submit(t, link_queue::entry{msgs_.size() - 1, msg.bytes, bulk, 0.0});
    arm(s);
  }
  // Message e's last byte left stage s's link at fin: a bulk one's ring step ends a step
  // latency later; a pipeline one's receiver may start (it arrives T_comm later).
  void sent(stage_index s, const link_queue::entry& e, double fin) {
    message_state& ms = msgs_[e.id];
    link_message& msg = ms.msg;
    msg.sent = fin;
    msg.wait = std::max(0.0, fin - msg.submitted - msg.bytes / links_.bandwidth_of(s));
    link_stats& ls = r_.links[s];
    ls.busy += msg.bytes / links_.bandwidth_of(s);
    if (e.bulk) {
      push(fin + links_.bulk.step_latency, ev::ring_step, s);
    } else {
      msg.behind_bulk = e.behind_bulk;
      ls.pipeline_wait += msg.wait;
      ls.behind_bulk += e.behind_bulk;
      sent_at_[ms.sent_at_key] = fin;
      woken_.push_back(msg.to);
    }
  }

  // --- Bulk: each stage's ring all-reduce, one bucket at a time.

  void ring_send(stage_index s, double t) {
    const ring_state& rs = ring_[s];
    link_message msg;
    msg.kind = message_kind::allreduce;
    msg.from = msg.to = s;
    msg.chunk = rs.current.chunk;
    msg.mb = rs.step;
    msg.bytes = rs.current.bytes / links_.bulk.replicas;
    send(s, t, msg, 0);
  }
  // Starts reducing the next waiting bucket when none is being reduced.
  void ring_next(stage_index s, double t) {
    ring_state& rs = ring_[s];
    if (rs.active || rs.waiting.empty()) {
      return;
    }
    rs.active = true;
    rs.current = rs.waiting.front();
    rs.waiting.pop_front();
    rs.step = 0;
    ring_send(s, t);
  }

  const schedule& sched_;
  const perturbed_costs& pc_;
  const traversal_plan& plan_;
  const link_timing_options& options_;
  const link_model& links_;
  const placement& pl_;
  std::uint32_t p_;
  std::uint32_t m_;
  std::uint32_t v_;
  std::size_t row_;
  event_index at_;
  // When an event happened (local use) and when its message left the link (remote use), by
  // key(); < 0: not yet. `done_` holds the produced-event bits as traverse keeps them (for the
  // witness).
  std::vector<double> happened_;
  std::vector<double> sent_at_;
  std::vector<std::uint8_t> done_;
  std::vector<std::int64_t> dest_;                 // remote_consumers
  std::vector<std::vector<std::int64_t>> last_w_;  // last_weight_ops
  link_timing_result r_;
  std::vector<link_queue> link_;
  std::vector<message_state> msgs_;
  std::priority_queue<event, std::vector<event>, std::greater<>> events_;
  std::uint64_t seq_ = 0;
  std::vector<stage_state> st_;
  std::vector<ring_state> ring_;
  std::vector<stage_index>
      woken_;  // stages whose input left a link: tried once the event is handled
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
  const char* who = "simulate_links";
  detail::check_link_request(sched, options.links, who);
  const perturbed_costs pc(sched.layout(), sched.microbatches(), false, costs, options.noise,
                           options.sample, who);
  detail::link_simulation sim(sched, pc, options);
  sim.run();
  return sim.take_result();
}

}  // namespace pipesched
