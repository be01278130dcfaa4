#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"

// Micro-batches that differ (docs/model.md §3.1): per-micro-batch multipliers of a chunk's costs
// and sizes, for every stage and chunk, per stage, or per (stage, chunk). cost_model and
// memory_model hold one table each; this header holds the table and its shape rule, once.

namespace pipesched {

/// Multipliers of one micro-batch's op costs (docs/model.md §3.1): its F lasts T_F·forward, its
/// B T_B·backward_input, its W T_W·backward_weight, its BW the sum of those two, its R
/// T_R·recompute. All 1: the costs as they are, bit for bit.
struct cost_factors {
  double forward = 1.0;
  double backward_input = 1.0;
  double backward_weight = 1.0;
  /// T_R's multiplier; unset: forward's (an R re-runs the forward).
  std::optional<double> recompute{};

  /// The same multiplier for every op kind.
  static cost_factors all(double f) noexcept { return cost_factors{f, f, f, std::nullopt}; }
  friend bool operator==(const cost_factors&, const cost_factors&) = default;
};

/// Multipliers of one micro-batch's buffer sizes (docs/model.md §5.1): M_B·activation,
/// M_W·weight_grad_input, M_in·input, receive buffers·received. All 1: the sizes as they are.
struct memory_factors {
  double activation = 1.0;
  double weight_grad_input = 1.0;
  double input = 1.0;
  double received = 1.0;

  /// The same multiplier for every buffer.
  static memory_factors all(double f) noexcept { return memory_factors{f, f, f, f}; }
  friend bool operator==(const memory_factors&, const memory_factors&) = default;
};

namespace detail {

/// One value per (micro-batch, stage, local chunk), where `stages` is 1 (every stage) or p, and
/// `chunks` 1 (every chunk of a stage) or v: index (mb·stages + s)·chunks + c. Empty: none.
template <class T>
class microbatch_table {
 public:
  microbatch_table() = default;
  /// Throws invalid_argument, prefixed with `who`, when `values` is not a whole number of
  /// micro-batches of stages × chunks entries.
  microbatch_table(std::uint32_t stages,
                   std::uint32_t chunks,
                   std::vector<T> values,
                   std::string_view who)
      : stages_(stages), chunks_(chunks), values_(std::move(values)) {
    const std::size_t row = std::size_t{stages} * chunks;
    if (row == 0 || values_.size() % row != 0) {
      fail(who, ": per-micro-batch table (", values_.size(),
           " entries) must hold stages x chunks (", stages, " x ", chunks,
           ") entries per micro-batch");
    }
    if (values_.empty()) {
      fail(who, ": per-micro-batch table must hold at least one micro-batch");
    }
  }

  bool empty() const noexcept { return values_.empty(); }
  std::uint32_t stages() const noexcept { return stages_; }
  std::uint32_t chunks() const noexcept { return chunks_; }
  std::uint32_t microbatches() const noexcept {
    return empty() ? 0u
                   : static_cast<std::uint32_t>(values_.size() / (std::size_t{stages_} * chunks_));
  }
  const std::vector<T>& values() const noexcept { return values_; }

  /// The entry of micro-batch mb for local chunk c on stage s; the neutral T{} (all 1) when
  /// the table is empty or mb, s or c is out of its range (the validator reports such ops).
  const T& at(stage_index s, chunk_index c, microbatch_index mb) const noexcept {
    static const T one{};
    const std::uint32_t ss = stages_ == 1 ? 0u : s.value;
    const std::uint32_t cc = chunks_ == 1 ? 0u : std::uint32_t{c};
    if (ss >= stages_ || cc >= chunks_ || mb >= microbatches()) {
      return one;
    }
    return values_[(std::size_t{mb} * stages_ + ss) * chunks_ + cc];
  }

  /// The shape rule: `stages` is 1 or p, `chunks` 1 or v, and one entry per micro-batch of the
  /// schedule, when `m` is given. Throws invalid_argument naming `what`.
  void check_shape(std::uint32_t p,
                   std::uint32_t v,
                   std::optional<std::uint32_t> m,
                   std::string_view who,
                   std::string_view what) const {
    if (empty()) {
      return;
    }
    if (stages_ != 1 && stages_ != p) {
      fail(who, ": ", what, " microbatches table has ", stages_,
           " stages per micro-batch; it must have 1 (every stage) or p (p=", p, ")");
    }
    if (chunks_ != 1 && chunks_ != v) {
      fail(who, ": ", what, " microbatches table has ", chunks_,
           " chunks per stage; it must have 1 (every chunk) or v (v=", v, ")");
    }
    if (m && *m != microbatches()) {
      fail(who, ": ", what, " microbatches table (", microbatches(),
           " entries) must hold one entry per micro-batch (m=", *m, ")");
    }
  }

  /// Every micro-batch has the same entries (then the micro-batches do not differ).
  bool rows_equal() const noexcept {
    const std::size_t row = std::size_t{stages_} * chunks_;
    for (std::size_t i = row; i < values_.size(); ++i) {
      if (!(values_[i] == values_[i % row])) {
        return false;
      }
    }
    return true;
  }
  /// Every entry is T{} (all 1).
  bool all_one() const noexcept {
    for (const T& x : values_) {
      if (!(x == T{})) {
        return false;
      }
    }
    return true;
  }

  friend bool operator==(const microbatch_table&, const microbatch_table&) = default;

 private:
  std::uint32_t stages_ = 1;
  std::uint32_t chunks_ = 1;
  std::vector<T> values_;
};

/// Throws invalid_argument unless `f` is finite and >= 0, naming the micro-batch entry.
inline void check_factor(double f, std::string_view who, std::size_t entry, const char* field) {
  if (!std::isfinite(f) || f < 0.0) {
    fail(who, ": microbatches entry ", entry, ": ", field, " factor (", f,
         ") must be finite and >= 0");
  }
}

}  // namespace detail
}  // namespace pipesched
