#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <span>
#include <vector>

#include "pipesched/ir/error.hpp"

namespace pipesched {

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
    start_.assign(sizes.size() + 1, 0);
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      start_[s + 1] = start_[s] + sizes[s];
    }
    size_.assign(sizes.begin(), sizes.end());
    data_.assign(start_.back(), T{});
  }
  /// Keeps the first `n` elements of stage s (a deadlocked run's prefix); no reallocation.
  void truncate(std::size_t s, std::size_t n) {
    if (s >= size_.size() || n > size_[s]) {
      detail::fail("stage_table: truncate(", s, ", ", n, ") past stage ", s, "'s ",
                   s < size_.size() ? size_[s] : 0, " elements");
    }
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
  std::vector<T> data_;
  std::vector<std::size_t> start_;  ///< stage s begins at data_[start_[s]]
  std::vector<std::size_t> size_;   ///< stage s's elements (<= its room after truncate)
};

}  // namespace pipesched
