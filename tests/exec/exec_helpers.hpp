#pragma once

// Test helpers for the exec tests: a lowering of compute-only schedules (SEND/RECV around each
// cross-stage edge) and an executor that checks message routing and dependency order.

#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <pipesched/exec/executor.hpp>
#include <pipesched/ir/dependencies.hpp>
#include <pipesched/ir/schedule.hpp>

namespace exec_test {

using namespace pipesched;

/// Inserts RECV right before and SEND right after every op whose producer / consumer lives on
/// another stage. Valid (rendezvous-feasible) for GPipe-shaped schedules.
inline schedule lower(const schedule& in) {
  schedule out = schedule::on(in.name() + "-lowered", in.layout(), in.microbatches());
  const placement& pl = in.layout();
  for (stage_index s = 0; s < in.stages(); ++s) {
    auto& ops = out.stage_ops(s);
    for (const op& o : in.ops(s)) {
      const global_chunk g = pl.global(s, o.chunk);
      const bool fwd = o.kind == op_kind::forward;
      const bool bwd = produces_input_grad(o.kind);
      if (fwd && !pl.is_first(g) && pl.stage_of(g - 1) != s) {
        ops.push_back(make_op(op_kind::recv_forward, o.mb, o.chunk));
      }
      if (bwd && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
        ops.push_back(make_op(op_kind::recv_backward, o.mb, o.chunk));
      }
      ops.push_back(o);
      if (fwd && !pl.is_last(g) && pl.stage_of(g + 1) != s) {
        ops.push_back(make_op(op_kind::send_forward, o.mb, o.chunk));
      }
      if (bwd && !pl.is_first(g) && pl.stage_of(g - 1) != s) {
        ops.push_back(make_op(op_kind::send_backward, o.mb, o.chunk));
      }
    }
  }
  return out;
}

/// A message that says where it came from.
struct tagged {
  bool valid = false;
  global_chunk chunk = 0;  ///< producer chunk
  microbatch_index mb = 0;
  bool forward = true;
};

/// Checks, at every run(): the op is the next one of its stage's list, its dependencies
/// (requirements_of) have completed, and its input message is exactly the one it needs.
/// Thread-safe (one mutex); throws std::logic_error describing the first problem.
class checking_executor {
 public:
  using message = tagged;

  explicit checking_executor(const schedule& s)
      : sched_(&s), next_(s.stages(), 0), lowered_(s.has_comm()) {}

  message run(stage_index s, const op& o, message&& in) {
    std::lock_guard lock(mu_);
    const placement& pl = sched_->layout();
    const auto list = sched_->ops(s);
    if (next_[s] >= list.size() || !(list[next_[s]] == o)) {
      throw std::logic_error("out of list order on stage " + std::to_string(s));
    }
    ++next_[s];
    for (const requirement& r : requirements_of(pl, s, o, lowered_)) {
      if (!done_.count({r.chunk, r.mb, static_cast<int>(r.what)})) {
        throw std::logic_error("dependency not met on stage " + std::to_string(s));
      }
    }
    const global_chunk g = pl.global(s, o.chunk);
    const auto expect = [&](bool valid, global_chunk c, bool fwd) {
      const bool ok =
          in.valid == valid && (!valid || (in.chunk == c && in.mb == o.mb && in.forward == fwd));
      if (!ok) {
        throw std::logic_error("wrong message for " + to_string(o, true) + " of chunk " +
                               std::to_string(g) + " on stage " + std::to_string(s));
      }
    };
    message out;
    switch (o.kind) {
      case op_kind::forward:
        expect(!pl.is_first(g), g - 1, true);
        out = {true, g, o.mb, true};
        break;
      case op_kind::backward_input:
      case op_kind::backward_full:
        expect(!pl.is_last(g), g + 1, false);
        out = {true, g, o.mb, false};
        break;
      case op_kind::backward_weight:
      case op_kind::recompute:
        expect(false, 0, true);
        break;
      case op_kind::send_forward:
        expect(true, g, true);
        out = in;
        break;
      case op_kind::send_backward:
        expect(true, g, false);
        out = in;
        break;
      case op_kind::recv_forward:
        expect(true, g - 1, true);
        out = in;
        break;
      case op_kind::recv_backward:
        expect(true, g + 1, false);
        out = in;
        break;
    }
    std::uint8_t ev = events_produced(o);
    for (int e = 0; e < 8; ++e) {
      if (ev & (1u << e)) {
        done_.insert({g, o.mb, e});
      }
    }
    ++calls_;
    return out;
  }

  std::size_t calls() const { return calls_; }
  bool finished() const {
    for (stage_index s = 0; s < sched_->stages(); ++s) {
      if (next_[s] != sched_->ops(s).size()) {
        return false;
      }
    }
    return true;
  }

 private:
  const schedule* sched_;
  std::mutex mu_;
  std::vector<std::size_t> next_;
  std::set<std::tuple<global_chunk, microbatch_index, int>> done_;
  bool lowered_;
  std::size_t calls_ = 0;
};

/// Stage 0: F0 BW0 F1 BW1; stage 1: F1 BW1 F0 BW0 — each stage waits on the other.
inline schedule deadlocking_schedule() {
  schedule s = schedule::sequential("deadlock", 2, 2);
  s.stage_ops(0) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0),
                    make_op(op_kind::forward, 1), make_op(op_kind::backward_full, 1)};
  s.stage_ops(1) = {make_op(op_kind::forward, 1), make_op(op_kind::backward_full, 1),
                    make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  return s;
}

}  // namespace exec_test

namespace exec_test {

/// A GPipe-like schedule on the V placement (stage s holds global chunks s and 2p-1-s): every
/// stage runs all F of its first chunk, all F of its second, then BW of the second, then BW of
/// the first. Exercises same-stage hand-offs (global chunk p-1 -> p on stage p-1).
inline schedule v_shape_gpipe(std::uint32_t p, std::uint32_t m) {
  schedule s = schedule::on("v-gpipe", placement::v_shape(p), m);
  for (stage_index st = 0; st < p; ++st) {
    auto& ops = s.stage_ops(st);
    for (chunk_index c : {chunk_index{0}, chunk_index{1}}) {
      for (microbatch_index j = 0; j < m; ++j) {
        ops.push_back(make_op(op_kind::forward, j, c));
      }
    }
    for (chunk_index c : {chunk_index{1}, chunk_index{0}}) {
      for (microbatch_index j = 0; j < m; ++j) {
        ops.push_back(make_op(op_kind::backward_full, j, c));
      }
    }
  }
  return s;
}

}  // namespace exec_test

namespace exec_test {

/// A context-form executor: records every op_context it receives (per stage) and checks that
/// messages follow the context's global chunk: an F gets chunk-1's activation unless it is the
/// first chunk, a B / BW gets chunk+1's gradient unless it is the last. Thread-safe.
class context_executor {
 public:
  using message = tagged;

  explicit context_executor(std::uint32_t stages) : seen_(stages) {}

  message run(const op_context& c, message&& in) {
    const auto expect = [&](bool valid, global_chunk from, bool fwd) {
      if (in.valid != valid ||
          (valid && (in.chunk != from || in.mb != c.o.mb || in.forward != fwd))) {
        throw std::logic_error("context_executor: wrong message for " + to_string(c.o, true) +
                               " of chunk " + std::to_string(c.chunk));
      }
    };
    message out = in;
    switch (c.o.kind) {
      case op_kind::forward:
        expect(!c.first_chunk, c.chunk - 1, true);
        out = {true, c.chunk, c.o.mb, true};
        break;
      case op_kind::backward_input:
      case op_kind::backward_full:
        expect(!c.last_chunk, c.chunk + 1, false);
        out = {true, c.chunk, c.o.mb, false};
        break;
      case op_kind::backward_weight:
        expect(false, 0, true);
        break;
      default:  // SEND / RECV pass the message on
        break;
    }
    std::lock_guard lock(mu_);
    seen_.at(c.stage).push_back(c);
    return out;
  }

  const std::vector<op_context>& seen(stage_index s) const { return seen_.at(s); }

 private:
  std::mutex mu_;
  std::vector<std::vector<op_context>> seen_;
};

/// "" when `seen[s]` holds, for every stage s, exactly the contexts of `sched`'s op list,
/// computed here from the placement (not with make_op_context); else the first mismatch.
template <class Seen>
std::string check_contexts(const schedule& sched, const Seen& seen) {
  const placement& pl = sched.layout();
  for (stage_index s = 0; s < sched.stages(); ++s) {
    const auto& got = seen(s);
    const auto list = sched.ops(s);
    if (got.size() != list.size()) {
      return "stage " + std::to_string(s) + ": " + std::to_string(got.size()) + " contexts for " +
             std::to_string(list.size()) + " ops";
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const op_context& c = got[i];
      const global_chunk g = pl.global(s, list[i].chunk);
      const bool ok = c.stage == s && c.index == i && c.o == list[i] && c.chunk == g &&
                      c.first_chunk == pl.is_first(g) && c.last_chunk == pl.is_last(g) &&
                      c.microbatches == sched.microbatches();
      if (!ok) {
        return "stage " + std::to_string(s) + ", op " + std::to_string(i) + " (" +
               to_string(list[i], true) + "): wrong context";
      }
    }
  }
  return "";
}

}  // namespace exec_test
