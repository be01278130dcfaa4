#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace pipesched::detail {

/// Per-key scratch storage for the analyses (validate, traverse, simulate, check_memory), keyed
/// by (global chunk, micro-batch) and the like. A plain zero-filled vector when the key space is
/// small or comparable to the schedule's op count; a hash map otherwise. So a schedule that
/// declares far more (chunk, micro-batch) pairs than it has ops (a JSON file with
/// `"stages": 65536, "microbatches": 16777216` and ten ops) costs memory and time in
/// proportion to its ops, not to p*v*m. Absent keys read as T{}.
template <class T>
class key_table {
 public:
  /// Always dense up to this many bytes.
  static constexpr std::uint64_t dense_bytes = std::uint64_t{1} << 26;
  /// Dense when keys <= ops_factor * ops: memory stays proportional to the schedule itself.
  static constexpr std::uint64_t ops_factor = 8;

  /// True when a dense table of `keys` entries is acceptable for a schedule of `ops` ops.
  static constexpr bool fits_dense(std::uint64_t keys, std::uint64_t ops) noexcept {
    return keys * sizeof(T) <= dense_bytes || keys <= ops_factor * ops;
  }

  key_table(std::uint64_t keys, std::uint64_t ops) : dense_(fits_dense(keys, ops)) {
    if (dense_) {
      values_.assign(static_cast<std::size_t>(keys), T{});
    } else {
      sparse_.reserve(static_cast<std::size_t>(ops));
    }
  }

  bool dense() const noexcept { return dense_; }

  /// The value of key k (T{} when never written).
  T get(std::uint64_t k) const {
    if (dense_) {
      return values_[static_cast<std::size_t>(k)];
    }
    const auto it = sparse_.find(k);
    return it == sparse_.end() ? T{} : it->second;
  }
  /// A writable reference to key k (created as T{} on first use).
  T& slot(std::uint64_t k) {
    if (dense_) {
      return values_[static_cast<std::size_t>(k)];
    }
    return sparse_[k];
  }

 private:
  bool dense_;
  std::vector<T> values_;
  std::unordered_map<std::uint64_t, T> sparse_;
};

}  // namespace pipesched::detail
