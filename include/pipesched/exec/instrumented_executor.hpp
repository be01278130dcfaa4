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

namespace pipesched {

/// Wall-clock interval of one op of a real run, in seconds since the run's start.
struct measured_op {
  stage_index stage = 0;
  std::size_t op_index = 0;  ///< position in the stage's list
  op o{};
  double start = 0.0;  ///< seconds since restart() (or construction)
  double end = 0.0;
};

/// An executor adapter that times every run() of the wrapped executor with steady_clock and
/// records {stage, op index, op, start, end} per stage, so a real run can be laid next to the
/// simulator's timeline (divide by the time unit of the costs to compare).
/// The op index is the count of earlier run() calls on the same stage, which is the list
/// position because drivers call run() in list order. An op that throws is not recorded.
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

  message run(stage_index s, const op& o, message&& in) {
    if (s >= records_.size()) {
      detail::fail("instrumented_executor: stage (", s,
                   ") must be less than stages (p=", records_.size(), ")");
    }
    const auto t0 = clock::now();
    message out = inner_->run(s, o, std::move(in));
    const auto t1 = clock::now();
    auto& list = records_[s];
    list.push_back({s, list.size(), o, seconds(t0), seconds(t1)});
    return out;
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
  const std::vector<measured_op>& timings(stage_index s) const { return records_.at(s); }
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

  E* inner_;
  std::vector<std::vector<measured_op>> records_;
  clock::time_point origin_;
};

}  // namespace pipesched
