#pragma once

#include <algorithm>
#include <cstdint>

// The summary numbers of a timed schedule, defined once: the simulator, the timelines (io/), the
// zero-bubble search and every writer call these.

namespace pipesched {

/// Bubble rate (S − B) / S, where S is the longest stage span (first start to last end) and B
/// the largest stage busy time (compute only); 0 when S is 0.
///
/// With equal stages (every stage the same work, the zero-bubble paper's setting) B is
/// m·v·(T_F + T_B + T_W) per chunk, so this is the paper's (S − m(T_F+T_B+T_W)) / S. With
/// unequal stages it is the share of the longest span during which even the busiest stage
/// waits: 0 means the pipeline is as short as its heaviest stage allows. It does not count
/// the lighter stages' spare time; utilization_of() does. Never negative: a stage is never
/// busier than its span, so B > S is the rounding of summed op times (-1e-16), read as 0.
constexpr double bubble_rate_of(double longest_span, double largest_busy) noexcept {
  return longest_span > 0.0 && largest_busy < longest_span
             ? (longest_span - largest_busy) / longest_span
             : 0.0;
}

/// Utilization Σ_s busy_s / (p · makespan): the share of all stages' time from 0 to the
/// makespan spent computing, the same meaning for any costs (1 − utilization is everything
/// idle, including lighter stages' spare time and the fill and drain); 0 when the makespan
/// is 0.
constexpr double utilization_of(double total_busy, std::uint32_t stages, double makespan) noexcept {
  return makespan > 0.0 && stages > 0 ? total_busy / (double(stages) * makespan) : 0.0;
}

namespace detail {

/// The largest of one per-stage number (`member` of each of `stages`), 0 without stages: a
/// report's max_peak() or max_idle().
template <class Stages, class Member>
double largest_over_stages(const Stages& stages, Member member) noexcept {
  double v = 0.0;
  for (const auto& st : stages) {
    v = std::max(v, static_cast<double>(st.*member));
  }
  return v;
}

}  // namespace detail

}  // namespace pipesched
