#pragma once

#include <chrono>
#include <thread>
#include <utility>

#include "pipesched/exec/executor.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"

namespace pipesched {

/// An executor whose ops take their modeled time: each op sleeps
/// cost_model::duration(stage, kind, chunk) × `unit` (communication ops take 0). Messages carry
/// no data. With the thread driver it measures how a real run's makespan compares with the
/// simulator's prediction for the same costs (examples/fidelity).
/// Sleeps overshoot by the OS timer slack (typically 50-100 µs on Linux), so use units of
/// 1 ms or more for a comparison within a few percent.
///
/// Per-stage costs are split over the schedule's v chunks (cost_model): construct with the
/// schedule, or with a model already read for its shape (cost_model::for_shape).
class sleep_executor {
 public:
  struct message {};

  explicit sleep_executor(shaped_cost_model costs,
                          std::chrono::nanoseconds unit = std::chrono::milliseconds(1))
      : costs_(std::move(costs)), unit_(unit) {
    if (unit.count() <= 0) {
      detail::fail("sleep_executor: unit (", unit.count(), " ns) must be positive");
    }
  }
  /// For `sched`: costs read for its shape.
  sleep_executor(const schedule& sched,
                 const cost_model& costs,
                 std::chrono::nanoseconds unit = std::chrono::milliseconds(1))
      : sleep_executor(
            costs.for_shape(sched.stages(), sched.chunks(), sched.microbatches(), "sleep_executor"),
            unit) {}

  message run(stage_index s, const op& o, message&&) {
    if (o.chunk >= costs_.chunks()) {
      detail::fail("sleep_executor: chunk ", o.chunk,
                   " of a schedule with more chunks per stage "
                   "than the costs were read for (v=",
                   costs_.chunks(), ")");
    }
    const double d = costs_.duration(s, o.kind, o.chunk, o.mb);
    if (d > 0.0) {
      const auto dur = std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::duration<double, std::nano>(d * static_cast<double>(unit_.count())));
      std::this_thread::sleep_until(std::chrono::steady_clock::now() + dur);
    }
    return {};
  }

  const shaped_cost_model& costs() const noexcept { return costs_; }
  std::chrono::nanoseconds unit() const noexcept { return unit_; }

 private:
  shaped_cost_model costs_;
  std::chrono::nanoseconds unit_;
};

}  // namespace pipesched
