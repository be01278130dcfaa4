#pragma once

#include <cstdint>
#include <string_view>

#include "pipesched/gen/detail/zb_search.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/zb_search_types.hpp"

namespace pipesched {

/// Which memory limit zb_auto uses.
enum class zb_memory_preset : std::uint8_t {
  given,  ///< "zb-auto": generator_params::memory_limit, or p·M_B per stage (1F1B's peak)
  one_p,  ///< "zb-1p": p·M_B per stage (+ static memory)
  two_p,  ///< "zb-2p": 2p·M_B per stage (+ static memory)
};

/// The memory-bounded automatic zero-bubble scheduler (docs/model.md §7), one chunk per stage,
/// split B/W. Honours per-stage costs, T_comm (uniform or per link), M_B / M_W, static memory
/// and a per-stage memory limit (in the units of generator_params::memory, static included).
/// The hand-crafted ZB-H1 / ZB-H2 orders are timed when they fit the limits; unless one
/// reaches the lower bound (detail/zb_bound.hpp; then nothing can be shorter and the search
/// ends), the paper's greedy is run for every choice combination (16 here: the paper's 8 and
/// the bubble rule off), best-first with exact pruning (search_choices: runs proven identical
/// are skipped, runs that provably lose are cut). The shortest longest-stage span is kept
/// (ties: shorter makespan, then the greedy, then the lower choice), then W ops are moved
/// into earlier gaps. The result carries the lower bound on any schedule's span within the
/// same limits. Never exceeds the limit; throws invalid_argument when the limit is below one
/// micro-batch's activations plus static memory on some stage (the true minimum: a
/// one-micro-batch-at-a-time order needs exactly that). With unit costs it reaches ZB-H1's
/// span at p·M_B and zero bubble at 2p·M_B. Each greedy run is O(p·m·log p).
inline zb_auto_result zb_auto_search(const generator_params& given,
                                     const zb_auto_options& opts = {},
                                     zb_memory_preset preset = zb_memory_preset::given,
                                     std::string_view who = "zb-auto") {
  detail::check_shape(who, given, 1, 3);
  const generator_params params = detail::for_shape(who, given, 1);
  if (preset != zb_memory_preset::given && params.memory_limit) {
    detail::fail(who, ": memory_limit must not be given: this preset fixes it to ",
                 preset == zb_memory_preset::one_p ? "p" : "2p", "*M_B (use zb-auto)");
  }
  const placement pl = placement::sequential(params.stages);
  const double factor = preset == zb_memory_preset::two_p ? 2.0 : 1.0;
  return detail::zb_search(who, params, pl, detail::stage_limits(who, params, pl, factor), opts);
}

/// schedule_generator for zb_auto_search: "zb-auto", "zb-1p" or "zb-2p".
struct zb_auto {
  zb_memory_preset preset = zb_memory_preset::given;

  std::string_view name() const noexcept {
    switch (preset) {
      case zb_memory_preset::one_p:
        return "zb-1p";
      case zb_memory_preset::two_p:
        return "zb-2p";
      default:
        return "zb-auto";
    }
  }
  schedule generate(const generator_params& params) const {
    return zb_auto_search(params, {}, preset, name()).sched;
  }
};

}  // namespace pipesched
