#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "pipesched/exec/executor.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/timed_op.hpp"

namespace pipesched {

/// An executor adapter that times every run() of the wrapped executor with steady_clock and
/// records a timed_op {stage, index, op, start, end} (seconds since restart()) per stage, so a
/// real run feeds timeline_from_measured (io/timeline.hpp) and can be laid next to the
/// simulator's timeline (divide by the time unit of the costs to compare).
/// Drivers call the context form, which forwards the op_context to the wrapped executor and
/// records its list index. The short form run(s, o, in), for direct calls, exists when the
/// wrapped executor has one; it takes the count of earlier calls on the stage as the index
/// (the list position when called in list order). An op that throws is not recorded.
/// Safe under the thread driver: each stage writes only its own list. Holds a reference to
/// the wrapped executor.
///   instrumented_executor<sleep_executor> timed(sleeper, sched.stages());
///   run_threaded(timed, sched);   timed.timings(0)[3].end ...
template <class E>
class instrumented_executor {
  static_assert(detail::check_executor<E>());  // plain-English diagnostics for a near miss

 public:
  using message = typename E::message;

  instrumented_executor(E& inner, std::uint32_t stages) : inner_(&inner), records_(stages) {
    restart();
  }

  message run(const op_context& c, message&& in) {
    return timed(c.stage, c.index, c.o, [&] { return detail::run_op(*inner_, c, std::move(in)); });
  }
  message run(stage_index s, const op& o, message&& in) requires detail::stage_run<E> {
    const std::size_t index = s < records_.size() ? records_[s].size() : 0;
    return timed(s, index, o, [&] { return inner_->run(s, o, std::move(in)); });
  }

  /// Forgets every record and makes "now" time zero. Call right before a driver.
  void restart() {
    for (auto& list : records_) {
      list.clear();
    }
    origin_ = clock::now();
  }

  std::uint32_t stages() const noexcept { return static_cast<std::uint32_t>(records_.size()); }
  /// Stage s's ops in the order they ran.
  const std::vector<timed_op>& timings(stage_index s) const { return records_.at(s); }
  /// Latest end over all stages (0 when nothing ran).
  double makespan() const noexcept {
    double m = 0.0;
    for (const auto& list : records_) {
      for (const auto& t : list) {
        m = std::max(m, t.end);
      }
    }
    return m;
  }
  E& inner() noexcept { return *inner_; }

 private:
  using clock = std::chrono::steady_clock;
  double seconds(clock::time_point t) const {
    return std::chrono::duration<double>(t - origin_).count();
  }

  template <class F>
  message timed(stage_index s, std::size_t index, const op& o, F&& call) {
    if (s >= records_.size()) {
      detail::fail("instrumented_executor: stage (", s,
                   ") must be less than stages (p=", records_.size(), ")");
    }
    const std::uint32_t at = detail::op_position(index, s, "instrumented_executor");
    const auto t0 = clock::now();
    message out = std::forward<F>(call)();
    const auto t1 = clock::now();
    records_[s].push_back({s, at, o, seconds(t0), seconds(t1)});
    return out;
  }

  E* inner_;
  std::vector<std::vector<timed_op>> records_;
  clock::time_point origin_;
};

}  // namespace pipesched
