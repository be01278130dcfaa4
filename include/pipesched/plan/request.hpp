#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "pipesched/gen/registry.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/transform/comm_lowering.hpp"
#include "pipesched/transform/recompute.hpp"

// The library front end: what a user asks for (a generator by name with its parameters, or a
// schedule read from a file; recomputation; communication lowering) in, the schedule and what
// its generator knows about it out. The CLI and the Python module build one of these and call
// build_schedule(), so they cannot drift apart (issue "one vocabulary").

namespace pipesched {

/// Activation recomputation asked of a request (transform/recompute.hpp, docs/model.md §1).
struct recompute_request {
  /// Every global chunk of the schedule (`--recompute all`), or only `chunks`.
  bool all = false;
  std::vector<global_chunk> chunks{};
  recompute_placement placement = recompute_placement::before_backward;
};

/// Where a request's schedule comes from: a registered generator by name, or a schedule given
/// as it is (read from a file by the caller: io/schedule_input.hpp).
struct generated_source {
  std::string generator;            ///< registry name, e.g. "zb-h1"
  generation_options options = {};  ///< search options (generators that search only)
};
struct given_source {
  schedule sched;
};

/// One request: source, then recompute, then lowering, in that order (recomputation is added
/// to the compute-only order; lowering comes last, as lower_communication requires).
struct schedule_request {
  std::variant<generated_source, given_source> source = generated_source{};
  /// Shape (generated sources: p, m and v; v = 0 for the generator's default), costs, memory
  /// and the per-stage memory limit. Costs, memory and limit also drive the recompute
  /// placement and the lowering of a given schedule; its shape comes from the schedule.
  generator_params params = {};
  std::optional<recompute_request> recompute = std::nullopt;
  /// Insert SEND / RECV ops (lower_communication) with this receive placement.
  std::optional<receive_placement> lowering = std::nullopt;
};

/// Builds the schedule `req` asks for, with what its generator knows about it: the lower bound
/// and search figures of a searching generator (kept with recompute, dropped by lowering: they
/// describe the compute-only order) and the memory violations of a hand-crafted order over
/// the limit. Throws invalid_argument naming the field and the rule: unknown
/// generator, search options for a generator that does not search or for a given schedule,
/// a shape (stages, microbatches, chunks) given with a given schedule, a recompute chunk out
/// of range, recompute asked of a schedule that already has SEND / RECV ops; and whatever the
/// generator, with_recompute or lower_communication throw.
inline generation_result build_schedule(const schedule_request& req,
                                        const generator_registry& registry) {
  generation_result g;
  if (const auto* gen = std::get_if<generated_source>(&req.source)) {
    if (gen->generator.empty()) {
      detail::fail("schedule_request: generator (the schedule name) must be given");
    }
    g = registry.generate_result(gen->generator, req.params, gen->options);
  } else {
    const auto& given = std::get<given_source>(req.source);
    const generator_params& p = req.params;
    if (p.stages != 0 || p.microbatches != 0 || p.chunks != 0) {
      detail::fail(
          "schedule_request: stages, microbatches and chunks come from the given "
          "schedule (p=",
          given.sched.stages(), ", m=", given.sched.microbatches(), ", v=", given.sched.chunks(),
          "); leave them 0");
    }
    g.sched = given.sched;
  }
  if (req.recompute) {
    const recompute_request& r = *req.recompute;
    recompute_options ro;
    ro.placement = r.placement;
    ro.costs = req.params.costs;
    ro.memory = req.params.memory;
    if (req.params.memory_limit) {
      ro.limits = {*req.params.memory_limit};
    }
    // The search's bound stays a bound: R ops only add work to the order it bounds.
    g.sched = with_recompute(g.sched, r.all ? all_chunks(g.sched) : r.chunks, ro);
  }
  if (req.lowering) {
    lowering_options lo;
    lo.receives = *req.lowering;
    lo.costs = req.params.costs;
    g.sched = lower_communication(g.sched, lo);
    // The search's figures describe the compute-only order, not the lowered one.
    g.lower_bound.reset();
    g.span.reset();
    g.published_span.reset();
  }
  return g;
}

}  // namespace pipesched
