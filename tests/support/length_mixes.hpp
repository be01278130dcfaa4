#pragma once

// Sequence-length distributions users meet (benchmark and its test): log-normal at
// several spreads, a bimodal short / long mix, and a long tail where one sequence is 16x the
// median. Deterministic for a seed: our own transforms over splitmix64, not <random>'s
// distributions (which differ between standard libraries).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

namespace test_support {

struct length_mix {
  std::string name;
  /// "lognormal" (median, sigma), "bimodal" (a share `long_share` of long ones), "long-tail".
  std::string kind;
  double sigma = 1.0;
};

/// The mixes of the benchmark (docs/benchmarks.md §10).
inline std::vector<length_mix> length_mixes() {
  return {{"log-normal s=0.5", "lognormal", 0.5},
          {"log-normal s=1.0", "lognormal", 1.0},
          {"log-normal s=1.5", "lognormal", 1.5},
          {"bimodal 80/20", "bimodal", 0.0},
          {"long-tail 16x", "long-tail", 0.0}};
}

namespace detail {
inline std::uint64_t split_mix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline double unit(std::uint64_t& x) {
  return (static_cast<double>(split_mix(x) >> 11) + 1.0) * 0x1.0p-53;
}
inline double normal(std::uint64_t& x) {
  return std::sqrt(-2.0 * std::log(unit(x))) * std::cos(2.0 * std::numbers::pi * unit(x));
}
}  // namespace detail

/// n lengths of `mix` around a median of `median` tokens, within [16, 16·median].
inline std::vector<std::uint64_t> sample_lengths(const length_mix& mix,
                                                 std::size_t n,
                                                 double median,
                                                 std::uint64_t seed) {
  std::uint64_t x = seed * 0x51ed27ull + 7;
  std::vector<std::uint64_t> out;
  auto clamp = [&](double v) {
    return static_cast<std::uint64_t>(std::clamp(std::round(v), 16.0, 16.0 * median));
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (mix.kind == "lognormal") {
      out.push_back(clamp(median * std::exp(mix.sigma * detail::normal(x))));
    } else if (mix.kind == "bimodal") {
      const bool long_one = detail::unit(x) < 0.2;
      out.push_back(
          clamp((long_one ? 4.0 * median : median / 4.0) * std::exp(0.25 * detail::normal(x))));
    } else {  // long tail: the rest near the median, one sequence 16x it
      out.push_back(clamp(median * std::exp(0.3 * detail::normal(x))));
    }
  }
  if (mix.kind == "long-tail" && !out.empty()) {
    out[static_cast<std::size_t>(detail::split_mix(x) % n)] =
        static_cast<std::uint64_t>(16.0 * median);
  }
  return out;
}

}  // namespace test_support
