#pragma once

#include <cstdint>

// SplitMix64 (Steele, Lea, Flood 2014): the library's one deterministic generator, the same
// numbers on every platform (<random>'s distributions differ between standard libraries).

namespace pipesched::detail {

/// SplitMix64's finalizer of z + the golden-ratio increment: a bijective mix of 64 bits, used
/// as a counter-based generator so a value is a pure function of its key.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// The next number of the stream whose state is `x` (advances it).
constexpr std::uint64_t splitmix64(std::uint64_t& x) noexcept {
  const std::uint64_t out = mix64(x);
  x += 0x9e3779b97f4a7c15ULL;
  return out;
}

}  // namespace pipesched::detail
