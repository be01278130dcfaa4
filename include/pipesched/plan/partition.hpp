#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/placement.hpp"

// Layers to chunks (docs/model.md §10): `even`, `balanced` (the slowest stage as fast as the
// per-stage layer caps allow) or the user's own list.

namespace pipesched {

enum class partition_kind : std::uint8_t { even, balanced, given };

/// How the planner cuts the layers: even, balanced, or `layers` (one value per global chunk,
/// in model order).
struct partition_spec {
  partition_kind kind = partition_kind::balanced;
  std::vector<std::uint32_t> layers{};
};

/// "even", "balanced", or layers per global chunk "L1,L2,..." (whole numbers); nullopt for any
/// other text.
inline std::optional<partition_spec> parse_partition(std::string_view s) {
  partition_spec p;
  if (s == "even") {
    p.kind = partition_kind::even;
    return p;
  }
  if (s == "balanced") {
    return p;
  }
  p.kind = partition_kind::given;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = s.find(',', pos);
    const std::string_view piece =
        s.substr(pos, comma == std::string_view::npos ? comma : comma - pos);
    if (piece.empty() || piece.size() > 9 ||
        piece.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    std::uint32_t v = 0;
    for (char c : piece) {
      v = v * 10 + static_cast<std::uint32_t>(c - '0');
    }
    p.layers.push_back(v);
    if (comma == std::string_view::npos) {
      return p;
    }
    pos = comma + 1;
  }
}

/// The most chunks (p·v) a model of `layers` layers fills: every chunk holds at least one
/// layer, but the first chunk may hold only the embedding and the last only the LM head and
/// the loss, as Llama 3 405B ran (126 layers on PP 16 with v = 8, arXiv 2407.21783 §3.3.2;
/// Megatron-LM's --pipeline-model-parallel-layout).
inline std::uint64_t max_chunks_for(std::uint32_t layers) {
  return std::uint64_t{layers} + 2;
}

/// The fewest layers global chunk `g` of `chunks` holds in a partition of `layers` layers that
/// even_partition and balanced_partition make: one, except the end chunks when there are more
/// chunks than layers (then they may hold none; which one does is the balance's choice).
inline std::uint32_t min_chunk_layers(std::uint32_t g, std::uint32_t chunks, std::uint32_t layers) {
  return chunks > layers && (g == 0 || g + 1 == chunks) ? 0 : 1;
}

/// `layers` layers over `chunks` chunks as evenly as possible; the chunks that get one layer
/// more are those furthest from the ends (the first carries the embedding, the last the head).
/// With one or two chunks more than layers, the last chunk, then also the first, holds none
/// (the head's GEMMs weigh more than the embedding's lookup). Throws invalid_argument when
/// there are more chunks than that.
inline std::vector<std::uint32_t> even_partition(std::uint32_t layers, std::uint32_t chunks) {
  if (chunks == 0 || chunks > max_chunks_for(layers) || (chunks == 1 && layers == 0)) {
    detail::fail("plan: partition: ", layers, " layers cannot fill ", chunks,
                 " chunks (p·v): each chunk but the two ends needs at least one layer");
  }
  if (chunks > layers) {
    std::vector<std::uint32_t> out(chunks, 1);
    out.back() = 0;
    if (chunks == layers + 2) {
      out.front() = 0;
    }
    return out;
  }
  std::vector<std::uint32_t> out(chunks, layers / chunks);
  std::uint32_t extra = layers % chunks;
  // Middle-out: chunks ordered by distance from the nearer end, farthest first.
  std::vector<std::uint32_t> order(chunks);
  for (std::uint32_t g = 0; g < chunks; ++g) {
    order[g] = g;
  }
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t x, std::uint32_t y) {
    return std::min(x, chunks - 1 - x) > std::min(y, chunks - 1 - y);
  });
  for (std::uint32_t i = 0; i < extra; ++i) {
    ++out[order[i]];
  }
  return out;
}

/// What balanced_partition weighs: per global chunk the time of one layer and of the chunk's
/// fixed part (embedding, head) for one micro-batch (F + B + W), and per stage the most layers
/// memory lets it hold.
struct partition_weights {
  double layer_time = 1.0;
  std::vector<double> fixed_time;                 ///< per global chunk
  std::vector<std::uint32_t> max_stage_layers{};  ///< per stage; empty: no cap
};

/// The partition minimising the slowest stage's time Σ_{chunks on it} (layers·layer_time +
/// fixed), every chunk at least min_chunk_layers, each stage within its cap; ties go to fewer
/// layers on the heavier stages. Within a stage the layers go to its chunks so their own times
/// are as even as possible. nullopt when the caps leave too few layers.
inline std::optional<std::vector<std::uint32_t>> balanced_partition(std::uint32_t layers,
                                                                    const placement& pl,
                                                                    const partition_weights& w) {
  const std::uint32_t p = pl.stages();
  const std::uint32_t v = pl.chunks();
  const std::uint32_t n = p * v;
  if (n == 0 || n > max_chunks_for(layers) || w.fixed_time.size() != n || !(w.layer_time > 0.0)) {
    return std::nullopt;
  }
  std::vector<double> fixed(p, 0.0);
  std::vector<std::uint32_t> least(p, 0);  // the fewest layers each stage holds
  for (global_chunk g = 0; g < n; ++g) {
    fixed[pl.stage_of(g)] += w.fixed_time[g];
    least[pl.stage_of(g)] += min_chunk_layers(g, n, layers);
  }
  auto cap = [&](stage_index s) {
    return w.max_stage_layers.empty() ? layers : w.max_stage_layers[s];
  };
  // Layers stage s can take within a stage time T (at most its cap), or -1 when T leaves it
  // less than its fewest.
  auto room = [&](stage_index s, double t) -> std::int64_t {
    const double free = (t - fixed[s]) / w.layer_time;
    if (free < least[s] || cap(s) < least[s]) {
      return -1;
    }
    const double whole = std::floor(free * (1.0 + 1e-12));
    return static_cast<std::int64_t>(std::min<double>(whole, cap(s)));
  };
  auto feasible = [&](double t) {
    std::uint64_t total = 0;
    for (stage_index s = 0; s < p; ++s) {
      const std::int64_t r = room(s, t);
      if (r < 0) {
        return false;
      }
      total += static_cast<std::uint64_t>(r);
    }
    return total >= layers;
  };
  // The optimum is fixed[s] + k·layer_time for some stage and count: search those values.
  std::vector<double> candidates;
  candidates.reserve(std::size_t{p} * layers);
  for (stage_index s = 0; s < p; ++s) {
    for (std::uint32_t k = least[s]; k <= std::min(layers, cap(s)); ++k) {
      candidates.push_back(fixed[s] + k * w.layer_time);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  std::size_t lo = 0;
  std::size_t hi = candidates.size();
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (feasible(candidates[mid])) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  if (lo == candidates.size()) {
    return std::nullopt;
  }
  const double t = candidates[lo];
  std::vector<std::uint64_t> per_stage(p);
  std::uint64_t total = 0;
  for (stage_index s = 0; s < p; ++s) {
    per_stage[s] = static_cast<std::uint64_t>(room(s, t));
    total += per_stage[s];
  }
  // Take the surplus back from the currently slowest stages.
  while (total > layers) {
    stage_index worst = p;
    double worst_time = -1.0;
    for (stage_index s = 0; s < p; ++s) {
      const double time = fixed[s] + static_cast<double>(per_stage[s]) * w.layer_time;
      if (per_stage[s] > least[s] && time > worst_time) {
        worst = s;
        worst_time = time;
      }
    }
    --per_stage[worst];
    --total;
  }
  std::vector<std::uint32_t> out(n);
  for (global_chunk g = 0; g < n; ++g) {
    out[g] = min_chunk_layers(g, n, layers);
  }
  for (stage_index s = 0; s < p; ++s) {
    for (std::uint64_t k = least[s]; k < per_stage[s]; ++k) {
      // The chunk of this stage that is lightest so far (lowest global chunk on ties).
      global_chunk best = 0;
      double best_time = std::numeric_limits<double>::infinity();
      for (chunk_index c = 0; c < v; ++c) {
        const global_chunk g = pl.global(s, c);
        const double time = out[g] * w.layer_time + w.fixed_time[g];
        if (time < best_time || (time == best_time && g < best)) {
          best = g;
          best_time = time;
        }
      }
      ++out[best];
    }
  }
  return out;
}

/// Checks a user's list: p·v values summing to the model's layers, each at least 1 but the
/// first and the last (a chunk of only the embedding or only the head).
inline void check_given_partition(const std::vector<std::uint32_t>& layers_per_chunk,
                                  std::uint32_t layers,
                                  std::uint32_t chunks) {
  if (layers_per_chunk.size() != chunks) {
    detail::fail("plan: --partition lists ", layers_per_chunk.size(),
                 " values; the layout has p·v = ", chunks, " chunks");
  }
  std::uint64_t sum = 0;
  for (std::size_t g = 0; g < layers_per_chunk.size(); ++g) {
    const std::uint32_t l = layers_per_chunk[g];
    if (l == 0 && g != 0 && g + 1 != layers_per_chunk.size()) {
      detail::fail("plan: --partition: chunk ", g,
                   " has no layer: every chunk but the first (the embedding) and the last (the "
                   "head) needs at least one");
    }
    sum += l;
  }
  if (sum != layers) {
    detail::fail("plan: --partition sums to ", sum, " layers; the model has ", layers);
  }
}

}  // namespace pipesched
