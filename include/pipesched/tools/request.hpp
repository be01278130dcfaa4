#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "pipesched/gen/registry.hpp"
#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/transform/comm_lowering.hpp"
#include "pipesched/transform/recompute.hpp"

// The library front end: what a user asks for (a generator by name with its parameters, or a
// schedule read from a file; recomputation; communication lowering) in, the schedule and what
// its generator knows about it out. The CLI and the Python module build one of these and call
// build_schedule(), so they cannot drift apart.

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

namespace detail {

/// The registered schedules that search, "a, b, c": named by the rules on search options.
inline std::string searching_names(const generator_registry& registry) {
  std::string out;
  for (const generator_entry& e : registry.entries()) {
    if (e.searches) {
      out += (out.empty() ? "" : ", ") + e.name;
    }
  }
  return out;
}

}  // namespace detail

/// The options a front end reads one by one (the CLI's --search-budget / --search-evaluations,
/// --recompute, --recompute-policy, --with-comm, --recv; Python's keywords of the same names)
/// before they are a schedule_request. A request cannot even say "a recompute policy without
/// recompute", so the rules between these options are checked by make_request, once for both
/// front ends, which only parse their spellings and name the fields in their terms.
struct request_options {
  /// Search options (zb_auto_options) for a generator that searches.
  std::optional<zb_auto_options> search = std::nullopt;
  /// Recompute every global chunk, or `recompute_chunks`; neither: no recomputation.
  bool recompute_all = false;
  std::vector<global_chunk> recompute_chunks{};
  /// Where each R goes, by name (parse_recompute_placement); only with recomputation.
  std::string recompute_policy{to_string(recompute_placement::before_backward)};
  /// Insert SEND / RECV ops, the receives placed by name (parse_receive_placement); `recv` only
  /// with `with_comm`.
  bool with_comm = false;
  std::string recv{to_string(receive_placement::eager)};
};

/// The receive placement named `name` (parse_receive_placement); a field_error on `recv` of
/// `who` names the choices otherwise. Every front end's `recv` spelling goes through it.
inline receive_placement named_receive_placement(std::string_view name, const char* who) {
  const std::optional<receive_placement> recv = parse_receive_placement(name);
  if (!recv) {
    detail::fail_field(who, "recv", "must be eager or late, not \"", name, "\"");
  }
  return *recv;
}

/// `source` and `params` with `opts` as one schedule_request, for build_schedule. Throws
/// field_error naming the option (the field of request_options) and the rule: an unknown
/// `recv` or `recompute_policy` name, either one given (not its default) without `with_comm` /
/// recomputation (the rule names that option, "recompute" or "with_comm", so a front end can
/// respell it), `search` with a given schedule. (Search options for a generator that does not
/// search are build_schedule's rule: the registry knows which ones search.)
PIPESCHED_INLINE schedule_request make_request(std::variant<generated_source, given_source> source,
                                               generator_params params,
                                               const request_options& opts,
                                               const generator_registry& registry);

/// Builds the schedule `req` asks for, with what its generator knows about it: the lower bound
/// and search figures of a searching generator (kept with recompute, dropped by lowering: they
/// describe the compute-only order) and the memory violations of a hand-crafted order over
/// the limit. The request's own rules throw field_error (ir/error.hpp: the field, e.g.
/// "search", "chunks", "recompute.chunks", and the rule, so a front end can name the field in
/// its terms): no generator name, search options for a generator that does not search, a shape
/// (stages, microbatches, chunks) given with a given schedule, a recompute chunk out of range.
/// An unknown generator, and whatever the generator, with_recompute (e.g. recompute asked of a
/// schedule that already has SEND / RECV ops) or lower_communication throw, is invalid_argument.
PIPESCHED_INLINE generation_result build_schedule(const schedule_request& req,
                                                  const generator_registry& registry);

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_REQUEST)
PIPESCHED_INLINE schedule_request make_request(std::variant<generated_source, given_source> source,
                                               generator_params params,
                                               const request_options& opts,
                                               const generator_registry& registry) {
  constexpr const char* who = "schedule_request";
  const receive_placement recv = named_receive_placement(opts.recv, who);
  if (recv != receive_placement::eager && !opts.with_comm) {
    detail::fail_field(who, "recv", "only meaningful with with_comm");
  }
  const std::optional<recompute_placement> policy =
      parse_recompute_placement(opts.recompute_policy);
  if (!policy) {
    detail::fail_field(who, "recompute_policy", "must be before-backward or idle-slot, not \"",
                       opts.recompute_policy, "\"");
  }
  const bool recompute = opts.recompute_all || !opts.recompute_chunks.empty();
  if (*policy != recompute_placement::before_backward && !recompute) {
    detail::fail_field(who, "recompute_policy", "only meaningful with recompute");
  }
  schedule_request req;
  req.params = std::move(params);
  if (auto* gen = std::get_if<generated_source>(&source)) {
    if (opts.search) {
      gen->options.search = opts.search;
    }
  } else if (opts.search) {
    // A given schedule has no search: the request cannot even say it.
    detail::fail_field(who, "search", "only meaningful when a schedule that searches (",
                       detail::searching_names(registry),
                       ") is generated, not with a given schedule");
  }
  req.source = std::move(source);
  if (recompute) {
    req.recompute = recompute_request{opts.recompute_all, opts.recompute_chunks, *policy};
  }
  if (opts.with_comm) {
    req.lowering = recv;
  }
  return req;
}

PIPESCHED_INLINE generation_result build_schedule(const schedule_request& req,
                                                  const generator_registry& registry) {
  constexpr const char* who = "schedule_request";
  generation_result g;
  if (const auto* gen = std::get_if<generated_source>(&req.source)) {
    if (gen->generator.empty()) {
      detail::fail_field(who, "generator", "the schedule name must be given");
    }
    const generator_entry& entry = registry.at(gen->generator);
    if (gen->options.search && !entry.searches) {
      detail::fail_field(who, "search", "only meaningful for schedules that search (",
                         detail::searching_names(registry), "), not \"", entry.name, "\"");
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
#endif

}  // namespace pipesched
