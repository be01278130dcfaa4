#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/analysis/detail/op_ready.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/ir/error.hpp"

// The V-shape building blocks' port (gen/v_shape.hpp's v_half and v_min): the authors' slot
// lists, their squeeze and the published greedy, kept out of the public header.

namespace pipesched {

/// The two V-shape building blocks of Qi et al., "Pipeline Parallelism with Controllable
/// Memory" (NeurIPS 2024) that trade bubble for activation memory (docs/model.md §6).
enum class v_block : std::uint8_t {
  half,  ///< V-Half: peak (p+2)//2 stage activations, bubble rate about p/(2m)
  min,   ///< V-Min: peak (p+4)//3 stage activations, bubble rate about 2p/(3m)
};

namespace detail {

// The authors number a stage's passes F f B b W w: F and b are the forward and input-gradient
// backward of local chunk 0 (global chunk s, down the V), f and B those of local chunk 1 (global
// chunk 2p−1−s, up the V). Their first squeeze keeps one W list (index 4) for both chunks; the
// final split puts chunk 1's W at 4 and chunk 0's at 5.
inline constexpr int v_f0 = 0;
inline constexpr int v_f1 = 1;
inline constexpr int v_b1 = 2;
inline constexpr int v_b0 = 3;
inline constexpr int v_w = 4;

/// Per pass kind, the slot of each micro-batch's op (increasing in the micro-batch).
using v_slot_lists = std::vector<std::vector<std::int64_t>>;

/// The building block: the slots of F f B b of micro-batch 0 on stage s; micro-batch j runs
/// 6j slots later. The offsets are the paper's (and the authors' code's) V-Min / V-Half blocks.
inline std::array<std::int64_t, 4> v_block_offsets(v_block b, std::int64_t p, std::int64_t s) {
  if (b == v_block::min) {
    const std::int64_t gap = p % 3 == 0 ? 2 : 0;
    return {s, 2 * p - s - 1, 2 * p + gap + s, 4 * p + gap - s - 1};
  }
  const std::int64_t gap = p % 2 == 0 ? 3 : 0;
  return {2 * s, 3 * p - s - 2, 3 * p + gap + 2 * s - 1, 6 * p + gap - s - 2};
}

inline std::int64_t v_last_slot(const v_slot_lists& l) {
  std::int64_t last = -1;
  for (const auto& k : l) {
    if (!k.empty()) {
      last = std::max(last, k.back());
    }
  }
  return last;
}

/// Marks each slot up to the stage's last with the pass kind there (-1: free).
inline void v_slot_kinds(const v_slot_lists& l, std::vector<std::int8_t>& kinds) {
  kinds.assign(static_cast<std::size_t>(v_last_slot(l) + 1), -1);
  for (std::size_t k = 0; k < l.size(); ++k) {
    for (std::int64_t t : l[k]) {
      PIPESCHED_ASSERT(kinds[static_cast<std::size_t>(t)] < 0, "v-shape: two ops in one slot");
      kinds[static_cast<std::size_t>(t)] = static_cast<std::int8_t>(k);
    }
  }
}

/// Adds the W lists to a stage's F f B b lists: walking the slots, each free slot takes a W of a
/// B already run (chunk 1's first when `split`), the rest follow the last op back to back.
inline void v_put_w(v_slot_lists& l, bool split, std::vector<std::int8_t>& kinds) {
  v_slot_kinds(l, kinds);
  l.resize(split ? 6 : 5);
  std::array<std::size_t, 2> due{0, 0};
  std::int64_t slot = 0;
  for (; slot < static_cast<std::int64_t>(kinds.size()); ++slot) {
    const int k = kinds[static_cast<std::size_t>(slot)];
    if (k == v_b1 || k == v_b0) {
      ++due[split ? static_cast<std::size_t>(k - v_b1) : 0];
    } else if (k < 0) {
      for (std::size_t w = 0; w < 2; ++w) {
        if (due[w] > 0) {
          l[v_w + w].push_back(slot);
          --due[w];
          break;
        }
      }
    }
  }
  for (std::size_t w = 0; w < 2; ++w) {
    for (; due[w] > 0; --due[w]) {
      l[v_w + w].push_back(slot++);
    }
  }
}

/// One stage's live chunk activations slot by slot, as the authors' greedy counts them: F and
/// f hold one until their W; with no W lists (`explicit_w` false) each free slot frees one of a
/// B already run. Tests and makes moves of one op to an earlier free slot without recounting
/// the whole stage: the curve before that slot does not change, and with explicit W lists
/// neither does the curve after the op's old slot.
class v_stage_memory {
 public:
  v_stage_memory(const v_slot_lists& l, bool explicit_w) : explicit_w_(explicit_w) {
    v_slot_kinds(l, kinds_);
    live_.assign(kinds_.size(), 0);
    due_.assign(kinds_.size(), 0);
    recount(0, static_cast<std::int64_t>(kinds_.size()) - 1, nullptr);
  }

  /// The highest count over the stage's slots.
  std::int64_t peak() const {
    return live_.empty() ? 0
                         : std::max<std::int64_t>(0, *std::max_element(live_.begin(), live_.end()));
  }

  /// Moves the op in slot `from` to the free slot `to` < `from` when the count then stays at
  /// most `limit` in every slot (it is already everywhere else); returns whether it moved.
  bool try_move(std::int64_t from, std::int64_t to, std::int64_t limit) {
    auto& src = kinds_[static_cast<std::size_t>(from)];
    auto& dst = kinds_[static_cast<std::size_t>(to)];
    PIPESCHED_ASSERT(dst < 0, "v-shape: moving an op onto a taken slot");
    dst = src;
    src = -1;
    const std::int64_t last = explicit_w_ ? from : static_cast<std::int64_t>(kinds_.size()) - 1;
    if (!recount(to, last, &limit)) {
      src = dst;
      dst = -1;
      return false;
    }
    recount(to, last, nullptr);
    return true;
  }

 private:
  // Counts slots first..last from the state after slot first−1: into live_ / due_ when `limit`
  // is null, else only checking that no slot exceeds *limit.
  bool recount(std::int64_t first, std::int64_t last, const std::int64_t* limit) {
    std::int64_t live = first > 0 ? live_[static_cast<std::size_t>(first - 1)] : 0;
    std::int64_t due = first > 0 ? due_[static_cast<std::size_t>(first - 1)] : 0;
    for (std::int64_t i = first; i <= last; ++i) {
      const std::int8_t k = kinds_[static_cast<std::size_t>(i)];
      if (k == v_f0 || k == v_f1) {
        ++live;
      } else if (k == v_b1 || k == v_b0) {
        ++due;
      } else if (k >= v_w) {
        --live;
      } else if (!explicit_w_ && due > 0) {
        --live;
        --due;
      }
      if (limit != nullptr) {
        if (live > *limit) {
          return false;
        }
      } else {
        live_[static_cast<std::size_t>(i)] = live;
        due_[static_cast<std::size_t>(i)] = due;
      }
    }
    return true;
  }

  bool explicit_w_;
  std::vector<std::int8_t> kinds_;
  std::vector<std::int64_t> live_;
  std::vector<std::int64_t> due_;
};

/// One op of the slot lists.
struct v_item {
  std::int64_t slot;
  std::uint32_t stage;
  int kind;
  std::uint32_t mb;
};

/// The ops of the stages in `r`, in the order the authors' passes visit them: by slot, then
/// by stage (a stage holds one op per slot). Linear in the ops and slots.
inline std::vector<v_item> v_visit_order(const std::vector<v_slot_lists>& r) {
  std::int64_t last = -1;
  std::size_t n = 0;
  for (const auto& l : r) {
    last = std::max(last, v_last_slot(l));
    for (const auto& k : l) {
      n += k.size();
    }
  }
  const auto width = static_cast<std::size_t>(last + 1);
  std::vector<std::int64_t> at(r.size() * width, -1);  // (mb << 3) | kind, -1 when free
  for (std::size_t s = 0; s < r.size(); ++s) {
    for (std::size_t k = 0; k < r[s].size(); ++k) {
      for (std::size_t j = 0; j < r[s][k].size(); ++j) {
        auto& cell = at[s * width + static_cast<std::size_t>(r[s][k][j])];
        PIPESCHED_ASSERT(cell < 0, "v-shape: two ops in one slot");
        cell = static_cast<std::int64_t>(j << 3 | k);
      }
    }
  }
  std::vector<v_item> items;
  items.reserve(n);
  for (std::size_t t = 0; t < width; ++t) {
    for (std::size_t s = 0; s < r.size(); ++s) {
      const std::int64_t cell = at[s * width + t];
      if (cell >= 0) {
        items.push_back(v_item{static_cast<std::int64_t>(t), static_cast<std::uint32_t>(s),
                               static_cast<int>(cell & 7), static_cast<std::uint32_t>(cell >> 3)});
      }
    }
  }
  return items;
}

/// The slot an op's inputs are ready after, in the slot lists (F f B b plus one W list): the
/// neighbouring stage's op of the same pass, the same stage's previous pass of the micro-batch
/// (f after F, B after f, b after B), the previous micro-batch of the same pass, and for W the
/// j-th backward of the stage. `at(s, k, j)` reads a slot.
template <class At>
std::int64_t v_ready_after(const std::vector<v_slot_lists>& r, const v_item& it, At at) {
  const std::uint32_t p = static_cast<std::uint32_t>(r.size());
  constexpr std::int64_t no_latency = 0;  // slots: a transfer takes no slot
  std::int64_t ready = -1;
  if ((it.kind == v_f0 || it.kind == v_b1) && it.stage > 0) {
    ready = ready_time(ready, at(it.stage - 1, it.kind, it.mb), no_latency);
  }
  if ((it.kind == v_f1 || it.kind == v_b0) && it.stage + 1 < p) {
    ready = ready_time(ready, at(it.stage + 1, it.kind, it.mb), no_latency);
  }
  if (it.kind > v_f0 && it.kind < v_w) {
    ready = ready_time(ready, at(it.stage, it.kind - 1, it.mb), no_latency);
  }
  if (it.mb > 0) {
    ready = ready_time(ready, at(it.stage, it.kind, it.mb - 1), no_latency);
  }
  return ready;
}

/// Unit-time list scheduling of the slot lists in slot order (the authors' "eager execution"
/// with every op one slot long): each op starts as soon as its inputs and its stage allow.
/// Returns the start slots.
inline std::vector<v_slot_lists> v_unit_times(const std::vector<v_slot_lists>& r) {
  std::vector<v_slot_lists> start = r;
  for (auto& l : start) {
    for (auto& k : l) {
      std::fill(k.begin(), k.end(), std::int64_t{-1});
    }
  }
  std::vector<std::int64_t> stage_free(r.size(), 0);
  const auto end_of = [&](std::uint32_t s, int k, std::uint32_t j) {
    const std::int64_t t = start[s][static_cast<std::size_t>(k)][j];
    PIPESCHED_ASSERT(t >= 0, "v-shape: an op visited before its inputs");
    return t + 1;
  };
  for (const v_item& it : v_visit_order(r)) {
    const std::int64_t t =
        std::max({std::int64_t{0}, stage_free[it.stage], v_ready_after(r, it, end_of)});
    start[it.stage][static_cast<std::size_t>(it.kind)][it.mb] = t;
    stage_free[it.stage] = t + 1;
  }
  return start;
}

/// The slot of the stage's j-th backward (B or b, 0-based) in slot order: the smallest slot by
/// which j+1 of them have run (the two lists are increasing and share no slot).
inline std::int64_t v_nth_backward(const v_slot_lists& l, std::uint32_t j) {
  const auto& b1 = l[v_b1];
  const auto& b0 = l[v_b0];
  const auto run_by = [&](std::int64_t t) {
    return static_cast<std::size_t>(std::upper_bound(b1.begin(), b1.end(), t) - b1.begin()) +
           static_cast<std::size_t>(std::upper_bound(b0.begin(), b0.end(), t) - b0.begin());
  };
  std::int64_t lo = 0;
  std::int64_t hi = std::max(b1.back(), b0.back());
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (run_by(mid) > j) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

/// One squeeze of the authors' greedy ("reorder"): visiting ops in slot order, each op moves
/// to the earliest free slot after its inputs that keeps its stage's peak within the largest
/// stage peak of the input; ops of the steady phase (from stage 0's first chunk-0 B until a
/// stage's last F), and with `with_w` false those before it as well, stay. With `with_w` the W
/// are placed first (one list) and squeezed too. Returns the unit-time start slots of the
/// result, with its W list.
inline std::vector<v_slot_lists> v_squeeze(std::vector<v_slot_lists> r,
                                           bool with_w,
                                           std::uint32_t m) {
  std::vector<std::int8_t> kinds;
  if (with_w) {
    for (auto& l : r) {
      v_put_w(l, false, kinds);
    }
  }
  std::vector<v_stage_memory> memory;
  std::int64_t limit = 0;
  for (const auto& l : r) {
    memory.emplace_back(l, with_w);
    limit = std::max(limit, memory.back().peak());
  }
  std::vector<std::vector<char>> taken(r.size());
  for (std::size_t s = 0; s < r.size(); ++s) {
    taken[s].assign(static_cast<std::size_t>(v_last_slot(r[s]) + 1), 0);
  }
  const auto at = [&](std::uint32_t s, int k, std::uint32_t j) {
    return r[s][static_cast<std::size_t>(k)][j];
  };
  int phase = 0;
  for (const v_item& it : v_visit_order(r)) {
    std::int64_t& slot = r[it.stage][static_cast<std::size_t>(it.kind)][it.mb];
    if (it.kind == v_b0 && it.stage == 0 && phase == 0) {
      phase = 1;
    }
    if (phase == 1 && it.kind == v_f0 && it.mb + 1 == m) {
      phase = 2;
      taken[it.stage][static_cast<std::size_t>(slot)] = 1;
      continue;
    }
    if (phase == 1 || (phase == 0 && !with_w)) {
      taken[it.stage][static_cast<std::size_t>(slot)] = 1;
      continue;
    }
    std::int64_t ready = v_ready_after(r, it, at);
    if (it.kind == v_w) {
      ready = std::max(ready, v_nth_backward(r[it.stage], it.mb));
    }
    PIPESCHED_ASSERT(ready < it.slot, "v-shape: an op's inputs are not ready before its slot");
    for (std::int64_t t = ready + 1; t < it.slot; ++t) {
      if (taken[it.stage][static_cast<std::size_t>(t)] == 0 &&
          memory[it.stage].try_move(it.slot, t, limit)) {
        slot = t;
        break;
      }
    }
    taken[it.stage][static_cast<std::size_t>(slot)] = 1;
  }
  if (!with_w) {
    for (auto& l : r) {
      v_put_w(l, false, kinds);
    }
  }
  return v_unit_times(r);
}

/// The authors' V-Half / V-Min order: the building block repeated every 6 slots, squeezed with
/// the W, squeezed again without them, then each W put in the first free slot after its B.
/// Only the warm-up and the drain (O(p) ops per stage) move, so the work is about linear in
/// the ops (both orders for p = 128, m = 512 in about 1 s at -O2), the memory a few words per op.
inline schedule v_block_schedule(v_block b, const generator_params& params, std::string_view who) {
  detail::check_shape(who, params, 2, 3);
  const std::uint32_t p = params.stages;
  const std::uint32_t m = params.microbatches;
  std::vector<v_slot_lists> r(p, v_slot_lists(4));
  for (std::uint32_t s = 0; s < p; ++s) {
    const auto offsets = v_block_offsets(b, p, s);
    for (std::size_t k = 0; k < 4; ++k) {
      r[s][k].resize(m);
      for (std::uint32_t j = 0; j < m; ++j) {
        r[s][k][j] = offsets[k] + 6 * std::int64_t{j};
      }
    }
  }
  r = v_squeeze(std::move(r), true, m);
  for (auto& l : r) {
    l.resize(4);
  }
  r = v_squeeze(std::move(r), false, m);
  std::vector<std::int8_t> kinds;
  schedule out = schedule::on(std::string(who), placement::v_shape(p), m);
  // Pass kind -> (op kind, local chunk); 4 and 5 are chunk 1's and chunk 0's W.
  constexpr std::array<op_kind, 6> kind_of = {op_kind::forward,         op_kind::forward,
                                              op_kind::backward_input,  op_kind::backward_input,
                                              op_kind::backward_weight, op_kind::backward_weight};
  constexpr std::array<chunk_index, 6> chunk_of = {0, 1, 1, 0, 1, 0};
  for (auto& l : r) {
    l.resize(4);
    v_put_w(l, true, kinds);
  }
  for (const v_item& it : v_visit_order(r)) {
    const auto k = static_cast<std::size_t>(it.kind);
    out.stage_ops(it.stage).push_back(make_op(kind_of[k], it.mb, chunk_of[k]));
  }
  return out;
}

}  // namespace detail

}  // namespace pipesched
