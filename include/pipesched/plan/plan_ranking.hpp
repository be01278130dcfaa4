#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "pipesched/gen/registry.hpp"
#include "pipesched/plan/plan_types.hpp"

// Which plan is better: the one order of the planner's ranking and pack's search.

namespace pipesched {

namespace detail {

/// What the orders compare of a plan or a packing.
struct plan_outcome {
  bool fits = false;
  double step_time_s = 0.0;
  double peak_memory_bytes = 0.0;  ///< the fullest stage's
};

/// The one "better" order of plans and packings: -1 when `a` is better, 1 when `b` is, 0 when
/// neither. Better: fits where the other does not; both fit: a shorter step, then less peak
/// memory; neither fits: less peak memory (nearer to fitting), then a shorter step. Steps
/// within `relative_tolerance` of the longer are equal: pack's local search takes 1e-12 so
/// that rounding never counts as a gain; the planner's ranking sorts, so it takes 0 (a strict
/// weak order).
inline int outcome_order(const plan_outcome& a, const plan_outcome& b, double relative_tolerance) {
  if (a.fits != b.fits) {
    return a.fits ? -1 : 1;
  }
  auto by_step = [&] {
    const double tol = relative_tolerance * std::max(a.step_time_s, b.step_time_s);
    return a.step_time_s < b.step_time_s - tol ? -1 : a.step_time_s > b.step_time_s + tol ? 1 : 0;
  };
  auto by_peak = [&] {
    return a.peak_memory_bytes < b.peak_memory_bytes   ? -1
           : a.peak_memory_bytes > b.peak_memory_bytes ? 1
                                                       : 0;
  };
  const int first = a.fits ? by_step() : by_peak();
  return first != 0 ? first : a.fits ? by_peak() : by_step();
}

/// Orders plans by outcome_order (exact steps), then by the generator's place in the registry
/// and the label (so the order never depends on the evaluation order).
inline bool better_plan(const plan_entry& a,
                        const plan_entry& b,
                        const generator_registry& registry) {
  const int o = outcome_order({a.fits, a.step_time_s, a.peak_memory_bytes},
                              {b.fits, b.step_time_s, b.peak_memory_bytes}, 0.0);
  if (o != 0) {
    return o < 0;
  }
  const auto rank = [&](const std::string& name) {
    return registry.find(name) - registry.entries().data();
  };
  if (a.choice.schedule != b.choice.schedule) {
    return rank(a.choice.schedule) < rank(b.choice.schedule);
  }
  return plan_label(a.choice) < plan_label(b.choice);
}

/// The Pareto frontier of `ranked` (better_plan's order): the plans no earlier one is both
/// faster than and smaller than, by step time.
inline std::vector<plan_frontier_point> plan_frontier(const std::vector<plan_entry>& ranked) {
  std::vector<plan_frontier_point> out;
  double smallest = std::numeric_limits<double>::infinity();
  for (const plan_entry& e : ranked) {
    if (e.peak_memory_bytes < smallest) {
      smallest = e.peak_memory_bytes;
      out.push_back({e.step_time_s, e.peak_memory_bytes, e.fits, plan_label(e.choice)});
    }
  }
  return out;
}

}  // namespace detail

}  // namespace pipesched
