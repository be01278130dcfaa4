#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

namespace pipesched {

/// Largest schedule a generator will build, in ops (2 GB of op lists; the p = 1024, m = 16384
/// target is 50M ops). Larger requests are errors, not allocations.
inline constexpr std::uint64_t max_schedule_ops = std::uint64_t{1} << 28;

/// What a generator is asked for. Hand-crafted generators read only the shape; cost-aware
/// ones (zb-v, zb-auto) also read costs, memory and the per-stage memory limit.
struct generator_params {
  std::uint32_t stages = 0;        ///< p, >= 1
  std::uint32_t microbatches = 0;  ///< m, >= 1
  std::uint32_t chunks = 0;        ///< v, chunks per stage; 0 = the generator's default
  cost_model costs{};              ///< costs (per stage, split over v; see cost_model) and T_comm
  memory_model memory{};           ///< M_B / M_W (per stage, split over v; see memory_model)
  /// Per stage, in the units of `memory`, static memory included (one value for every stage or
  /// one per stage): the same number means the same bytes for every schedule. Generators that
  /// search stay within it; the others are checked against it by
  /// generator_entry::generate_result().
  memory_limits memory_limit;
  /// N, micro-batches per round of the virtual stages (interleaved-1f1b only; Megatron-LM's
  /// --microbatch-group-size-per-virtual-pipeline-stage); 0 = the generator's default, p. Last,
  /// so that aggregate initialisations written before it keep their meaning.
  std::uint32_t group_size = 0;
};

/// schedule_generator: builds a schedule from generator_params.
/// A model G provides, for a `const G& g` and `const generator_params& p`:
///   g.name()      -> convertible to std::string_view   the registry / file-format name
///   g.generate(p) -> pipesched::schedule               a schedule for p
/// Not checked by the compiler, but required: generate() is deterministic (same params, same
/// schedule), returns a schedule that passes validate() whenever it returns, and throws
/// pipesched::invalid_argument naming the field and the rule for parameters it can't serve.
/// Models: gpipe, one_f_one_b, zb_h1, zb_h2 (and the advanced generators).
///   static_assert(schedule_generator<zb_h1>);   static_assert(!schedule_generator<int>);
template <class G>
concept schedule_generator = requires(const G& g, const generator_params& p) {
  { g.name() } -> std::convertible_to<std::string_view>;
  { g.generate(p) } -> std::same_as<schedule>;
};

/// Generates with any schedule_generator: `generate(zb_h1{}, 4, 8)`.
template <schedule_generator G>
schedule generate(const G& g,
                  std::uint32_t stages,
                  std::uint32_t microbatches,
                  std::uint32_t chunks = 0) {
  generator_params p;
  p.stages = stages;
  p.microbatches = microbatches;
  p.chunks = chunks;
  return g.generate(p);
}

namespace detail {

/// Checks p, m and v (v must equal `chunks`, or be 0 for the default) and the total op count.
/// Returns the effective chunk count.
inline std::uint32_t check_shape(std::string_view who,
                                 const generator_params& p,
                                 std::uint32_t chunks,
                                 std::uint32_t ops_per_chunk_mb) {
  if (p.stages == 0) {
    fail(who, ": stages (p=0) must be at least 1");
  }
  if (p.stages > max_stages) {
    fail(who, ": stages (p=", p.stages, ") must be at most ", max_stages);
  }
  if (p.microbatches == 0) {
    fail(who, ": microbatches (m=0) must be at least 1");
  }
  if (p.microbatches > max_microbatches) {
    fail(who, ": microbatches (m=", p.microbatches, ") must be at most ", max_microbatches);
  }
  if (p.chunks != 0 && p.chunks != chunks) {
    fail(who, ": chunks (v=", p.chunks, ") must be ", chunks, " for this schedule");
  }
  const std::uint64_t total = std::uint64_t{p.stages} * p.microbatches * chunks * ops_per_chunk_mb;
  if (total > max_schedule_ops) {
    fail(who, ": stages*microbatches*chunks (", std::uint64_t{p.stages} * p.microbatches * chunks,
         ") is too large: the schedule would have ", total, " ops, more than ", max_schedule_ops);
  }
  return chunks;
}

/// generator_params read for one shape (for_shape below): what a generator's internals read a
/// chunk's costs and sizes from. `costs` and `memory` hide the base's members with their shaped
/// copies (the base holds the same values, so a shaped_params passed where generator_params is
/// taken reads the same numbers once shaped again).
struct shaped_params : generator_params {
  shaped_cost_model costs;
  shaped_memory_model memory;
};

/// `p` with its cost and memory models read for `chunks` chunks per stage (per-stage values
/// split over them; tables checked against p, v and m, errors prefixed with `who`), with
/// per-micro-batch factors that are the same for every micro-batch folded into the costs and
/// sizes (with_equal_factors_folded).
inline shaped_params for_shape(std::string_view who,
                               const generator_params& p,
                               std::uint32_t chunks) {
  // Equal micro-batches, whatever their factors, are searched as the model they scale.
  shaped_cost_model costs =
      p.costs.for_shape(p.stages, chunks, p.microbatches, who).with_equal_factors_folded();
  shaped_memory_model memory =
      p.memory.for_shape(p.stages, chunks, p.microbatches, who).with_equal_factors_folded();
  generator_params base = p;
  base.costs = costs;
  base.memory = memory;
  return shaped_params{std::move(base), std::move(costs), std::move(memory)};
}

/// The zero-bubble searches' start: `p` checked for `chunks` chunks per stage with split
/// backwards (check_shape, 3 ops per chunk and micro-batch), then read for that shape.
inline shaped_params split_backward_shape(std::string_view who,
                                          const generator_params& p,
                                          std::uint32_t chunks) {
  check_shape(who, p, chunks, 3);
  return for_shape(who, p, chunks);
}

}  // namespace detail
}  // namespace pipesched
