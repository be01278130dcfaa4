#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/zb_search_types.hpp"
#include "pipesched/ir/detail/linkage.hpp"

namespace pipesched {

/// What a registry call asks of a generator beyond generator_params.
struct generation_options {
  /// Options for the generators that search (generator_entry::searches: zb-auto, zb-1p, zb-2p,
  /// zb-v): the local-search budget in evaluations (zb_auto_options::search_evaluations) and
  /// wall-clock milliseconds (search_budget_ms), the candidates, the threads. Unset: the
  /// generator's defaults. Given to a generator that does not search, generate_result() throws
  /// invalid_argument rather than ignore it; a negative or non-finite search_budget_ms throws too.
  std::optional<zb_auto_options> search;
};

/// A schedule with what its generator knows about it. A value is absent (std::nullopt) when the
/// generator does not compute it: hand-crafted generators return the schedule alone.
struct generation_result {
  schedule sched;
  /// No schedule for the same parameters within the same memory limits has a shorter longest
  /// stage span (zb_auto_result::lower_bound; searching generators).
  std::optional<double> lower_bound;
  /// The longest stage span of `sched`, as the search timed it (zb_auto_result::span).
  std::optional<double> span;
  /// The best span of the zero-bubble authors' published heuristics, when the search ran them
  /// (zb_auto_options::published; zb_auto_result::published_span).
  std::optional<double> published_span;
  /// Candidate orders the local search timed (0 when it did not run).
  std::optional<std::size_t> search_evaluations;
  /// generator_params::memory_limit is never ignored: a generator that searches stays within
  /// it; any other (a hand-crafted order such as 1f1b) has its schedule checked against it,
  /// and every stage over the limit is listed here (check_memory's report). Empty when no
  /// limit was given or the schedule fits.
  std::vector<budget_violation> memory_violations;
  /// The parameters the schedule was generated for, as given (generator_entry::generate_result
  /// sets them): a schedule forgets its costs, memory and memory limit, and checking it
  /// against other ones (unit costs by default) is a silent mistake. report_schedule(const
  /// generation_result&) (gen/generation_report.hpp) checks it against these.
  generator_params params;
};

namespace detail {

/// A search's result as a generation_result (the schedule moved out).
inline generation_result to_generation_result(zb_auto_result&& r) {
  generation_result out;
  out.sched = std::move(r.sched);
  out.lower_bound = r.lower_bound;
  out.span = r.span;
  out.published_span = r.published_span;
  out.search_evaluations = r.search_evaluations;
  return out;
}

/// Generators the registry runs through their search(), so it can pass options and keep the
/// bound (zb_auto, zb_v): a member, so this header needs the search's types, not the search.
template <class G>
concept searching_generator = requires(const G& g,
                                       const generator_params& p,
                                       const zb_auto_options& o) {
  { g.search(p, o) } -> std::same_as<zb_auto_result>;
};

}  // namespace detail

struct generator_entry;

namespace detail {

// generator_entry::generate_result's work: compiled once in the library unless
// PIPESCHED_HEADER_ONLY (ir/detail/linkage.hpp), so that a file calling generate_result() does
// not compile the memory checker again.
PIPESCHED_INLINE generation_result generate_result_of(const generator_entry& e,
                                                      const generator_params& params,
                                                      const generation_options& opts);

}  // namespace detail

/// A generator reachable by name (CLI, file formats, plugins).
struct generator_entry {
  std::string name;                  ///< e.g. "zb-h1"
  std::string description;           ///< one line, for `pipesched list`
  std::uint32_t default_chunks = 1;  ///< chunks per stage when generator_params::chunks is 0
  std::function<schedule(const generator_params&)> generate;
  /// The schedule with what the generator knows about it, honouring generation_options. Set by
  /// generator_registry::add for searching generators; may be empty (entries built by hand),
  /// and then generate_result() calls `generate`. Call generate_result(), not this: it checks
  /// the options.
  std::function<generation_result(const generator_params&, const generation_options&)>
      generate_full = {};
  /// True when the generator searches and accepts generation_options::search.
  bool searches = false;

  /// The schedule and what the generator knows about it (lower bound, search figures), from one
  /// run of the generator. Throws invalid_argument when `opts.search` is given and the generator
  /// does not search, or when opts.search->search_budget_ms is negative or not finite; and
  /// whatever the generator throws for `params`.
  generation_result generate_result(const generator_params& params,
                                    const generation_options& opts = {}) const {
    return detail::generate_result_of(*this, params, opts);
  }
};

namespace detail {

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_REGISTRY)
PIPESCHED_INLINE generation_result generate_result_of(const generator_entry& e,
                                                      const generator_params& params,
                                                      const generation_options& opts) {
  if (opts.search) {
    if (!e.searches) {
      detail::fail(e.name,
                   ": search options (generation_options::search) apply only to generators "
                   "that search (generator_entry::searches), such as zb-auto and zb-v");
    }
    const double ms = opts.search->search_budget_ms;
    if (!std::isfinite(ms) || ms < 0.0) {
      detail::fail(e.name, ": search_budget_ms (", ms,
                   ") must be finite and >= 0 (0: no wall-clock cap)");
    }
  }
  generation_result r;
  if (e.generate_full) {
    r = e.generate_full(params, opts);
  } else {
    r.sched = e.generate(params);
    if (params.memory_limit) {
      memory_options mo = memory_options::with_limit(params.memory_limit);
      mo.record_curve = false;
      r.memory_violations = check_memory(r.sched, params.memory, mo).violations;
    }
  }
  r.params = params;
  return r;
}

#endif

}  // namespace detail

/// Name -> generator. Holds type-erased copies of schedule_generator models. The built-in
/// generators are in gen/builtin_registry.hpp (builtin_registry(), default_registry()): this
/// header holds only the registry, so it stays cheap to include (no generator, no search).
class generator_registry {
 public:
  /// Registers a generator under g.name(). Replaces an entry of the same name. A generator with
  /// a member `search(const generator_params&, const zb_auto_options&) -> zb_auto_result`
  /// (zb_auto, zb_v, or a user's) is registered as searching: generate_result() passes it the
  /// search options and keeps its bound.
  template <schedule_generator G>
  generator_registry& add(G g, std::string description, std::uint32_t default_chunks = 1) {
    return add_as(std::string(g.name()), std::move(g), std::move(description), default_chunks);
  }

  /// Registers a generator under another name (aliases such as zb-1p).
  template <schedule_generator G>
  generator_registry& add_as(std::string name,
                             G g,
                             std::string description,
                             std::uint32_t default_chunks = 1) {
    generator_entry e{std::move(name), std::move(description), default_chunks, {}};
    if constexpr (detail::searching_generator<G>) {
      e.generate_full = [g](const generator_params& p, const generation_options& o) {
        return detail::to_generation_result(g.search(p, o.search.value_or(zb_auto_options{})));
      };
      e.searches = true;
    }
    e.generate = [g = std::move(g)](const generator_params& p) { return g.generate(p); };
    for (auto& old : entries_) {
      if (old.name == e.name) {
        old = std::move(e);
        return *this;
      }
    }
    entries_.push_back(std::move(e));
    return *this;
  }

  /// nullptr when no generator has that name.
  const generator_entry* find(std::string_view name) const noexcept {
    for (const auto& e : entries_) {
      if (e.name == name) {
        return &e;
      }
    }
    return nullptr;
  }

  /// Throws invalid_argument listing the known names when `name` is unknown.
  const generator_entry& at(std::string_view name) const {
    if (const auto* e = find(name)) {
      return *e;
    }
    std::string known;
    for (const auto& e : entries_) {
      known += known.empty() ? "" : ", ";
      known += e.name;
    }
    detail::fail("unknown schedule \"", name, "\" (known: ", known, ")");
  }

  /// The schedule alone. A memory_limit it cannot honour (a hand-crafted order over it) throws
  /// invalid_argument naming the first stage over it, never a schedule silently above the limit:
  /// generate_result() returns such a schedule with every stage over it.
  schedule generate(std::string_view name, const generator_params& params) const {
    const generator_entry& e = at(name);
    if (!params.memory_limit) {
      return e.generate(params);
    }
    generation_result g = e.generate_result(params);
    if (!g.memory_violations.empty()) {
      detail::fail(e.name, ": memory_limit (", g.memory_violations.front().limit,
                   ") cannot be honoured: ", g.memory_violations.front().message,
                   " (generate_result() returns the schedule with every stage over it)");
    }
    return std::move(g.sched);
  }

  /// The schedule and what its generator knows about it (generator_entry::generate_result),
  /// from one run: the lower bound comes with the schedule, no second search.
  generation_result generate_result(std::string_view name,
                                    const generator_params& params,
                                    const generation_options& opts = {}) const {
    return at(name).generate_result(params, opts);
  }

  std::span<const generator_entry> entries() const noexcept { return entries_; }

 private:
  std::vector<generator_entry> entries_;
};

}  // namespace pipesched
