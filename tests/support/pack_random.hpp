#pragma once

// The random orders `pack` is measured against (docs/benchmarks.md §10, tests/plan/test_pack.cpp):
// the naive baseline's rule (equal counts per micro-batch, in order) applied to the sequences
// shuffled, so both the packing and the order of the micro-batches are random. Deterministic for
// a seed (a Fisher-Yates shuffle over splitmix64, not <random>'s, which differ between standard
// libraries).
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include <pipesched/plan/pack.hpp>

#include "support/length_mixes.hpp"

namespace test_support {

struct random_orders_result {
  pipesched::pack_evaluation best;  ///< the best that fits (none fits: the lowest peak)
  std::size_t fitting = 0;          ///< how many of them fit the memory limit
};

/// The best of `count` random orders of `problem`'s sequences cut into m micro-batches, each
/// generated as `pack` generates its candidates (a searching generator's greedy and seeds
/// only); the best one then also gets the generator's own local search, as `pack`'s result does.
inline random_orders_result best_random_orders(const pipesched::pack_problem& problem,
                                               std::uint32_t m,
                                               std::size_t count,
                                               std::uint64_t seed) {
  const std::size_t n = problem.request().lengths.size();
  std::vector<std::size_t> seq(n);
  std::iota(seq.begin(), seq.end(), std::size_t{0});
  std::vector<std::uint32_t> slots(m);
  std::iota(slots.begin(), slots.end(), 0u);
  std::uint64_t x = seed;
  random_orders_result out;
  std::vector<std::size_t> best_seq;
  for (std::size_t k = 0; k < count; ++k) {
    for (std::size_t i = n; i > 1; --i) {
      std::swap(seq[i - 1], seq[detail::split_mix(x) % i]);
    }
    const pipesched::pack_evaluation e =
        problem.evaluate(problem.prepare(problem.in_order(seq, m)), slots);
    out.fitting += e.fits ? 1 : 0;
    if (k == 0 || e.better_than(out.best)) {
      out.best = e;
      best_seq = seq;
    }
  }
  if (count > 0) {
    const pipesched::pack_evaluation polished =
        problem.evaluate(problem.prepare(problem.in_order(best_seq, m)), slots, std::nullopt);
    if (polished.better_than(out.best)) {
      out.best = polished;
    }
  }
  return out;
}

}  // namespace test_support
