#pragma once

#include <algorithm>

// The rule of docs/model.md §3 for one input, written once: every clock of the library — the
// timing engine (analysis/detail/timed_traverse.hpp) and the places that keep their own
// clock while they decide (docs/model.md §3 lists them and why) — times an op's inputs with
// these two functions. Templates, so that the slot clock of the V-shape schedules (integer
// slots, no latency) uses them as well.

namespace pipesched::detail {

/// When an input reaches its consumer: its producer's end plus the latency of the transfer
/// (T_comm; 0 when producer and consumer share a stage).
template <class T>
constexpr T input_arrival(T producer_end, T latency) noexcept {
  return producer_end + latency;
}

/// When an op that could start at `t` (its stage free, its other inputs here) may start once
/// this input has arrived as well: the later of the two.
template <class T>
constexpr T ready_time(T t, T producer_end, T latency) noexcept {
  return std::max(t, input_arrival(producer_end, latency));
}

}  // namespace pipesched::detail
