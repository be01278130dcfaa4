#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "pipesched/analysis/metrics.hpp"
#include "pipesched/ir/schedule.hpp"

// The automatic zero-bubble scheduler's public options and results, apart from the search
// (gen/detail/zb_search.hpp) so that a caller reading results does not compile the search.

namespace pipesched {

/// What the automatic zero-bubble search minimises (docs/model.md §7).
enum class zb_objective : std::uint8_t {
  /// `span` when every stage is the same (op costs and memory: the zero-bubble paper's
  /// setting, where its bubble rate ranks schedules), else `makespan`: with unequal stages the
  /// longest span hides when the heavy stages start, and the makespan is the step time.
  automatic,
  span,      ///< the longest stage span, ties broken by the makespan
  makespan,  ///< time 0 to the last end, ties broken by the longest stage span
};

constexpr std::string_view to_string(zb_objective o) noexcept {
  switch (o) {
    case zb_objective::automatic:
      return "automatic";
    case zb_objective::span:
      return "span";
    case zb_objective::makespan:
      return "makespan";
  }
  return "?";
}

/// The yes/no heuristics of one greedy run of the automatic zero-bubble scheduler.
/// The first three are the paper's (tried in all 8 combinations); the others are ours.
struct zb_choices {
  /// Prefer a ready B over a ready F only when the stage is >= 2 forwards ahead of the stage
  /// consuming its output (else the F first, to keep the next stage fed).
  bool b_first_when_ahead = false;
  /// Never start an F that would delay a B arriving before the F could end: accept a short
  /// bubble (the paper's "allow a bubble before the first B" choice, applied throughout).
  bool wait_for_b = false;
  /// Fill any gap before the next F/B with a pending W, even one shorter than T_W.
  bool fill_small_gaps = false;
  /// Fill a gap shorter than T_W when leaving it would raise the largest accumulated bubble
  /// of any stage (on in the paper's runs; off is an extra choice here).
  bool bubble_rule = true;
  /// With several chunks per stage: among ready forwards, run the later model chunk first.
  bool later_chunk_first = true;
  /// With several chunks per stage and later_chunk_first: rather than start an F whose end
  /// would delay the F of a later model chunk arriving meanwhile (by as little as T_comm),
  /// wait for that one. Keeps the V turn on time when transfers skew arrivals.
  bool wait_for_later_chunk = false;

  /// Bit i of the index is the i-th field above.
  unsigned index() const noexcept {
    return unsigned(b_first_when_ahead) | unsigned(wait_for_b) << 1 |
           unsigned(fill_small_gaps) << 2 | unsigned(!bubble_rule) << 3 |
           unsigned(!later_chunk_first) << 4 | unsigned(wait_for_later_chunk) << 5;
  }
  static zb_choices from_index(unsigned i) noexcept {
    zb_choices c;
    c.b_first_when_ahead = (i & 1u) != 0;
    c.wait_for_b = (i & 2u) != 0;
    c.fill_small_gaps = (i & 4u) != 0;
    c.bubble_rule = (i & 8u) == 0;
    c.later_chunk_first = (i & 16u) == 0;
    c.wait_for_later_chunk = (i & 32u) != 0;
    return c;
  }
  friend bool operator==(const zb_choices&, const zb_choices&) = default;
};

/// The outcome of one greedy run.
struct zb_choice_outcome {
  zb_choices choices;
  bool ok = false;      ///< a complete schedule (false when pruned)
  bool pruned = false;  ///< stopped early: provably loses to a finished run or a seed
  int same_as = -1;     ///< index of an earlier choice that provably makes the same decisions
  double span = 0.0;    ///< longest stage span (when ok)
  double makespan = 0.0;
};

struct zb_auto_options {
  /// Only the paper's 8 combinations (bubble_rule and later_chunk_first on,
  /// wait_for_later_chunk off).
  bool paper_choices_only = false;
  /// Also run the zero-bubble authors' published heuristics (detail/zb_published.hpp: their
  /// automatic scheduler's greedy in its 8 combinations for zb-auto, their ZB-V greedy for
  /// zb-v) as candidates, so the result is never worse than theirs.
  bool published = true;
  /// Run the improvement phase on the best order found: W moved into earlier gaps, then the
  /// local search (detail/zb_improve.hpp) within the budget below.
  bool improve = true;
  /// Local search budget, in candidate orders timed (each costs one timing of the whole
  /// order). Deterministic: the same input gives the same schedule. The default spends about
  /// 6·10^5 op timings (at least 16 and at most 2000 candidates): a few milliseconds; a
  /// deeper search (say 2000) is opt-in.
  std::size_t search_evaluations = default_evaluations;
  /// A wall-clock cap on the local search in milliseconds (0: none). When it cuts the search
  /// the result depends on the machine's speed; the evaluation budget alone never does.
  double search_budget_ms = 0.0;
  /// search_evaluations' default: sized from the problem (see above).
  static constexpr std::size_t default_evaluations = std::size_t(-1);
  /// Also try the hand-crafted orders when they fit the limits, and keep them if shorter:
  /// ZB-H1 and ZB-H2 for zb-auto, the ZB-V order (detail/zb_v_order.hpp) for zb-v.
  bool seed_handcrafted = true;
  /// Search the choices best-first: skip a choice when an earlier run shows it makes the
  /// same decisions (its flags that differ never influenced that run), stop a run once it is
  /// provably longer than the best so far (a seed included), and run no choice when a seed
  /// reaches the lower bound. Exact: the schedule is the same; off, every choice runs to its
  /// end and reports its own span.
  bool prune = true;
  /// Threads advancing the greedy runs of the best-first search (prune on): 0 (default)
  /// picks 2 when the machine has them, the problem is large (p·m·chunks >= 2048) and some
  /// choice has to run, else 1; 1 stays on the calling thread; n uses n. The schedule, span
  /// and winning choice are the same for any value (which other choices are reported cut
  /// rather than finished can differ). If a thread cannot be started, fewer are used.
  unsigned threads = 0;
  /// zb_auto_search only: also search an order for activation recomputation of every chunk
  /// (docs/model.md §1: each F keeps M_in, an R right before each B) and return it, with its R
  /// ops, when its span is shorter. It pays T_R per micro-batch for memory: M_in instead of M_B
  /// until the R, so more micro-batches fit in flight under a tight limit. It does not lower the
  /// floor (an R holds the whole M_B until its B).
  bool recompute = false;
  /// What the search minimises; automatic: the span when all stages are the same, else the
  /// makespan (zb_objective). Every candidate, cut and local-search move is judged by it.
  zb_objective objective = zb_objective::automatic;
};

/// The result of zb_auto_search / zb_v_search: the schedule, how good it is and how it won.
struct zb_auto_result {
  schedule sched;
  /// What the search minimised: span or makespan (zb_auto_options::objective resolved).
  zb_objective objective = zb_objective::span;
  double span = 0.0;         ///< longest stage span
  double makespan = 0.0;     ///< time 0 to the last end
  double lower_bound = 0.0;  ///< no schedule within the limits has a shorter span
  /// No schedule within the limits has a shorter makespan.
  double makespan_lower_bound = 0.0;
  double ideal = 0.0;  ///< the largest per-stage busy time (zero-bubble span)
  /// The span of the best greedy run by the objective (choices only); empty when no greedy
  /// run finished: a seed reached the lower bound (the choices are then not run and `tried` is
  /// empty) or every run was cut as worse than a seed.
  std::optional<double> greedy_span;
  double seeded_span = 0.0;          ///< after also trying the hand-crafted seeds, before improving
  std::optional<double> zb_h1_span;  ///< ZB-H1's span when it fits the limits and was tried
  std::optional<double> zb_h2_span;  ///< ZB-H2's span likewise
  /// The hand-crafted ZB-V order's span (zb-v) when it fits the limits and was tried.
  std::optional<double> zb_v_handcrafted_span;
  /// The best span among the authors' published heuristics' runs that finished (a run that
  /// provably loses to an earlier candidate stops early); empty when none did or none ran.
  std::optional<double> published_span;
  /// Span after the W gap-filling pass, before the local search.
  double filled_span = 0.0;
  /// Candidate orders the local search timed, and moves it kept.
  std::size_t search_evaluations = 0;
  std::size_t search_moves = 0;
  /// "greedy", or the seed that won: "zb-h1", "zb-h2", "zb-v-handcrafted" or "published"
  /// (before the improvement phase).
  std::string_view winner = "greedy";
  /// zb_auto_options::recompute chose the recomputing order (its F marked, R before each B).
  bool recomputed = false;
  zb_choices best;                       ///< the winning greedy choice
  std::vector<zb_choice_outcome> tried;  ///< every choice tried, in index order
  std::vector<double> limits;            ///< per stage, including static memory
  std::vector<double> peak;              ///< per stage peak of the result, including static

  /// How far the span can be from the shortest possible (whatever the objective).
  double gap_to_bound() const noexcept { return span - lower_bound; }
  /// How far the makespan can be from the shortest possible.
  double makespan_gap_to_bound() const noexcept { return makespan - makespan_lower_bound; }
  /// bubble_rate_of(span, ideal) (analysis/metrics.hpp): the paper's bubble rate at equal stages.
  double bubble_rate() const noexcept { return bubble_rate_of(span, ideal); }
};

}  // namespace pipesched
