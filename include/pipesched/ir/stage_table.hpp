#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"

namespace pipesched {

namespace detail {

/// std::allocator whose element construction without arguments does nothing, so
/// stage_table::reset_for_overwrite sizes its block without the pass that value-initialises
/// it. Only for implicit-lifetime T (allocation creates the objects; C++20 [intro.object]):
/// stage_table checks that T is trivially copyable and destructible before using it.
template <class T>
struct overwrite_allocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = overwrite_allocator<U>;
  };
  overwrite_allocator() noexcept = default;
  template <class U>
  overwrite_allocator(const overwrite_allocator<U>&) noexcept {}  // NOLINT: as std::allocator

  template <class U>
  void construct(U*) noexcept {}
  template <class U, class... Args>
  void construct(U* at, Args&&... args) {
    ::new (static_cast<void*>(at)) U(std::forward<Args>(args)...);
  }
};

}  // namespace detail

/// Per-stage lists of T kept in one block: `t[s]` is stage s's list (a span), `t[s][i]` its
/// element i, `t.size()` the number of stages; iterating gives the stages' lists in order.
/// Why one block: a result made and dropped in a loop (a simulation per candidate or sample)
/// then reuses the allocator's memory, where one vector per stage past glibc's mmap threshold
/// is unmapped and faulted in again on every call (docs/benchmarks.md §6).
template <class T>
class stage_table {
 public:
  /// A read-only or mutable stage list.
  using list = std::span<T>;
  using const_list = std::span<const T>;

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = const_list;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = const_list;

    const_iterator() = default;
    const_iterator(const stage_table* t, std::size_t s) : t_(t), s_(s) {}
    const_list operator*() const { return (*t_)[s_]; }
    const_iterator& operator++() {
      ++s_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++s_;
      return old;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) {
      return a.s_ == b.s_;
    }

   private:
    const stage_table* t_ = nullptr;
    std::size_t s_ = 0;
  };

  stage_table() = default;
  /// `sizes.size()` stages, stage s holding `sizes[s]` value-initialised elements.
  explicit stage_table(std::span<const std::size_t> sizes) { reset(sizes); }
  /// The same lists, copied into one block (readers, hand-built results).
  stage_table(const std::vector<std::vector<T>>& lists) {  // NOLINT: converting on purpose
    std::vector<std::size_t> sizes;
    sizes.reserve(lists.size());
    for (const auto& l : lists) {
      sizes.push_back(l.size());
    }
    reset(sizes);
    for (std::size_t s = 0; s < lists.size(); ++s) {
      std::copy(lists[s].begin(), lists[s].end(), (*this)[s].begin());
    }
  }

  /// Makes it `sizes.size()` stages of `sizes[s]` value-initialised elements, in one block.
  void reset(std::span<const std::size_t> sizes) {
    set_shape(sizes);
    data_.assign(start_.back(), T{});
  }
  /// The same shape as reset(sizes), but the elements are left unwritten: the caller writes
  /// every one of them (or truncates the lists it did not write) before the table is read or
  /// copied. For a producer that fills the whole table anyway (simulate's per-op records):
  /// one pass over the block instead of two (docs/benchmarks.md §6).
  void reset_for_overwrite(std::span<const std::size_t> sizes) {
    static_assert(std::is_trivially_copyable_v<T> && std::is_trivially_destructible_v<T>,
                  "stage_table::reset_for_overwrite needs an implicit-lifetime element type");
    set_shape(sizes);
    data_.clear();
    data_.resize(start_.back());
    for (std::size_t s = 0; s < size_.size(); ++s) {  // the gaps: written here, once
      std::fill(data_.begin() + static_cast<std::ptrdiff_t>(start_[s] + size_[s]),
                data_.begin() + static_cast<std::ptrdiff_t>(start_[s + 1]), T{});
    }
  }
  /// Keeps the first `n` elements of stage s (a deadlocked run's prefix); no reallocation.
  /// The dropped elements are reset to T{}, so no unwritten element is left behind after
  /// reset_for_overwrite.
  void truncate(std::size_t s, std::size_t n) {
    if (s >= size_.size() || n > size_[s]) {
      detail::fail("stage_table: truncate(", s, ", ", n, ") past stage ", s, "'s ",
                   s < size_.size() ? size_[s] : 0, " elements");
    }
    std::fill(data_.begin() + static_cast<std::ptrdiff_t>(start_[s] + n),
              data_.begin() + static_cast<std::ptrdiff_t>(start_[s] + size_[s]), T{});
    size_[s] = n;
  }

  std::size_t size() const noexcept { return size_.size(); }
  bool empty() const noexcept { return size_.empty(); }
  /// Elements over all stages.
  std::size_t total() const noexcept {
    std::size_t n = 0;
    for (const std::size_t k : size_) {
      n += k;
    }
    return n;
  }
  list operator[](std::size_t s) noexcept { return {data_.data() + start_[s], size_[s]}; }
  const_list operator[](std::size_t s) const noexcept {
    return {data_.data() + start_[s], size_[s]};
  }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

  /// The lists as separate vectors (for an API that wants them).
  std::vector<std::vector<T>> to_vectors() const {
    std::vector<std::vector<T>> out;
    out.reserve(size());
    for (const const_list l : *this) {
      out.emplace_back(l.begin(), l.end());
    }
    return out;
  }

  /// Same stages, each with the same elements in the same order.
  friend bool operator==(const stage_table& a, const stage_table& b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (std::size_t s = 0; s < a.size(); ++s) {
      const const_list x = a[s];
      const const_list y = b[s];
      if (x.size() != y.size() || !std::equal(x.begin(), x.end(), y.begin())) {
        return false;
      }
    }
    return true;
  }

 private:
  // One cache line between two stages' lists. Stage lists of 2^k bytes (p = 64, m = 1024:
  // 64 KB to 128 KB of records each) would otherwise start at a power-of-two stride, and the
  // p write streams of a simulation, one per stage, would share a few cache sets (measured:
  // 5 % of an interleaved-1f1b simulate at p = 64, m = 1024; docs/benchmarks.md §6).
  static constexpr std::size_t gap = (64 + sizeof(T) - 1) / sizeof(T);

  void set_shape(std::span<const std::size_t> sizes) {
    start_.assign(sizes.size() + 1, 0);
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      start_[s + 1] = start_[s] + sizes[s] + gap;
    }
    size_.assign(sizes.begin(), sizes.end());
  }

  std::vector<T, detail::overwrite_allocator<T>> data_;
  std::vector<std::size_t> start_;  ///< stage s begins at data_[start_[s]], then its room, a gap
  std::vector<std::size_t> size_;   ///< stage s's elements (<= its room after truncate)
};

}  // namespace pipesched
