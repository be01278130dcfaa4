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
/// the limit. The request's own rules throw field_error (ir/error.hpp: the field, e.g.
/// "search", "chunks", "recompute.chunks", and the rule, so a front end can name the field in
/// its terms): no generator name, search options for a generator that does not search, a shape
/// (stages, microbatches, chunks) given with a given schedule, a recompute chunk out of range.
/// An unknown generator, and whatever the generator, with_recompute (e.g. recompute asked of a
/// schedule that already has SEND / RECV ops) or lower_communication throw, is invalid_argument.
inline generation_result build_schedule(const schedule_request& req,
                                        const generator_registry& registry) {
  constexpr const char* who = "schedule_request";
  generation_result g;
  if (const auto* gen = std::get_if<generated_source>(&req.source)) {
    if (gen->generator.empty()) {
      detail::fail_field(who, "generator", "the schedule name must be given");
    }
    const generator_entry& entry = registry.at(gen->generator);
    if (gen->options.search && !entry.searches) {
      std::string searching;
      for (const generator_entry& e : registry.entries()) {
        if (e.searches) {
          searching += (searching.empty() ? "" : ", ") + e.name;
        }
      }
      detail::fail_field(who, "search", "only meaningful for schedules that search (", searching,
                         "), not \"", entry.name, "\"");
    }
    g = entry.generate_result(req.params, gen->options);
  } else {
    const schedule& given = std::get<given_source>(req.source).sched;
    const generator_params& p = req.params;
    // The shape is the schedule's: a second, different one would be silently ignored.
    if (p.stages != 0) {
      detail::fail_field(who, "stages", "comes from the given schedule (p=", given.stages(),
                         "): leave it unset");
    }
    if (p.microbatches != 0) {
      detail::fail_field(who, "microbatches",
                         "comes from the given schedule (m=", given.microbatches(),
                         "): leave it unset");
    }
    if (p.chunks != 0) {
      detail::fail_field(who, "chunks", "comes from the given schedule (v=", given.chunks(),
                         "): leave it unset");
    }
    g.sched = given;
  }
  if (req.recompute) {
    const std::uint32_t total = g.sched.layout().total_chunks();
    for (global_chunk c : req.recompute->chunks) {
      if (c >= total) {
        detail::fail_field(who, "recompute.chunks", c,
                           " is not a global chunk of the schedule (0 .. ", total - 1, ")");
      }
    }
  }
  if (req.recompute) {
    const recompute_request& r = *req.recompute;
    recompute_options ro;
    ro.placement = r.placement;
    ro.costs = req.params.costs;
    ro.memory = req.params.memory;
    ro.memory_limit = req.params.memory_limit;
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
