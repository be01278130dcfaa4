#pragma once

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/gen/builtin_registry.hpp"
#include "pipesched/ir/detail/linkage.hpp"
#include "pipesched/ir/detail/parallel.hpp"
#include "pipesched/ir/detail/splitmix.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/model/inline_recompute.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/job_costs.hpp"
#include "pipesched/plan/partition.hpp"
#include "pipesched/plan/plan_ranking.hpp"
#include "pipesched/plan/plan_search.hpp"
#include "pipesched/plan/plan_types.hpp"
#include "pipesched/tools/request.hpp"

// Variable-length batches (docs/model.md §10.1): the sequences of one global batch packed into
// micro-batches, each micro-batch's costs and sizes from its Σ L and Σ L², and the packing and
// the order of the micro-batches chosen by simulating them: `pipesched pack`, pipesched.pack().

namespace pipesched {

/// What `pack` is asked: a model on one pipeline of GPUs, the lengths of one global batch, how
/// to cut it (a token budget per micro-batch or a count) and the schedule.
struct pack_request {
  transformer_spec model;
  cluster_spec cluster;
  std::vector<std::uint64_t> lengths;  ///< tokens of each sequence, in the batch's order
  /// 1-based line of each length in its file, for messages (empty: named by index).
  std::vector<std::size_t> lines;
  std::optional<std::uint64_t> tokens_per_microbatch;  ///< a budget (exactly one of the two)
  std::optional<std::uint32_t> microbatches;           ///< a count m
  std::uint32_t stages = 0;                            ///< p
  std::string schedule = "1f1b";                       ///< a registered generator
  std::optional<std::uint32_t> chunks;                 ///< v >= 1; unset: the schedule's default
  std::uint32_t tp = 1;                                ///< tensor parallelism (one node)
  bool sequence_parallel = false;
  /// What each layer keeps for its backward (selective: the attention core recomputed, as
  /// flash attention does, so no Σ L² term in memory).
  recompute_kind recompute = recompute_kind::selective;
  /// Bytes per GPU a stage may hold, weights and optimizer state included, one value for every
  /// stage (the GPUs are alike); unset: the GPU's usable memory (memory × usable fraction).
  memory_limits memory_limit;
  /// Packings and orders simulated by the local search after the heuristics (deterministic;
  /// default sized from the problem, 0: heuristics only).
  std::size_t search_evaluations = default_evaluations;
  /// A wall-clock cap on the local search in milliseconds (0: none; a capped result depends
  /// on the machine's speed).
  double search_budget_ms = 0.0;
  /// Threads searching the memory rungs (pack_problem::solve); 0: the machine's hardware
  /// threads. The result does not depend on them.
  unsigned threads = 0;
  std::uint32_t vocab_multiple = 128;
  static constexpr std::size_t default_evaluations = std::size_t(-1);
};

/// One micro-batch of a packing: the sequences in it.
struct packed_microbatch {
  std::vector<std::size_t> sequences;  ///< indices into pack_request::lengths, ascending
  std::uint64_t tokens = 0;            ///< Σ L
  double squares = 0.0;                ///< Σ L²

  friend bool operator==(const packed_microbatch&, const packed_microbatch&) = default;
};

/// A packing and an order, simulated and checked.
struct pack_evaluation {
  double step_time_s = std::numeric_limits<double>::infinity();  ///< the schedule's makespan
  std::vector<double> peak_memory_bytes;                         ///< per stage
  bool fits = false;                                             ///< every stage within the limit
  double max_peak() const noexcept {
    double out = 0.0;
    for (double x : peak_memory_bytes) {
      out = std::max(out, x);
    }
    return out;
  }
  /// Better by the planner's order (detail::outcome_order), steps within 1e-12 of each other
  /// equal: rounding is never a gain.
  bool better_than(const pack_evaluation& o) const noexcept {
    return detail::outcome_order({fits, step_time_s, max_peak()},
                                 {o.fits, o.step_time_s, o.max_peak()}, 1e-12) < 0;
  }
};

/// The chosen packing and order and the naive baseline's, with the schedule, costs and sizes
/// that time and check them (schedule micro-batch j is packed micro-batch order[j]).
struct pack_result {
  std::vector<packed_microbatch> microbatches;
  std::vector<std::uint32_t> order;
  pack_evaluation chosen;
  /// The naive baseline: the sequences in their order, equal counts per micro-batch (sizes
  /// differ by one at most), micro-batch j in slot j.
  std::vector<packed_microbatch> baseline_microbatches;
  pack_evaluation baseline;
  double memory_limit_bytes = 0.0;
  schedule sched;       ///< the chosen schedule, R ops included when recomputing
  cost_model costs;     ///< seconds, per-micro-batch factors in schedule order
  memory_model memory;  ///< bytes, likewise
  plan_layout layout;
  std::vector<std::uint32_t> partition;  ///< layers per global chunk
  std::string heuristic;                 ///< where the chosen one came from, before the search
  std::size_t evaluations = 0;           ///< packings and orders simulated in all
  std::size_t search_moves = 0;          ///< local-search moves kept
};

namespace detail {

/// The factors that make `base` cost what each of `per_mb` costs (docs/model.md §3.1): for
/// micro-batch j, stage s, chunk c, per_mb[j]'s value over base's (1 where both are 0). All
/// read for p × v.
inline cost_model microbatch_cost_model(const shaped_cost_model& base,
                                        const std::vector<shaped_cost_model>& per_mb,
                                        std::uint32_t p,
                                        std::uint32_t v) {
  auto ratio = [](double x, double b) {
    if (b == 0.0) {
      PIPESCHED_ASSERT(x == 0.0, "pack: a micro-batch costs time where the mean costs none");
      return 1.0;
    }
    return x / b;
  };
  std::vector<cost_factors> table;
  table.reserve(per_mb.size() * p * v);
  for (const shaped_cost_model& mc : per_mb) {
    for (stage_index s = 0; s < p; ++s) {
      for (chunk_index c = 0; c < v; ++c) {
        const op_costs b = base.at(s, c);
        const op_costs x = mc.at(s, c);
        cost_factors f{ratio(x.forward, b.forward), ratio(x.backward_input, b.backward_input),
                       ratio(x.backward_weight, b.backward_weight)};
        if (b.recompute || x.recompute) {
          f.recompute = ratio(cost_model::duration_of(x, op_kind::recompute),
                              cost_model::duration_of(b, op_kind::recompute));
        }
        table.push_back(f);
      }
    }
  }
  cost_model out = base;
  out.set_microbatch_factors(p, v, std::move(table));
  return out;
}

/// Likewise for sizes; static memory is the largest of the micro-batches' (inline recompute's
/// grows with the largest transient).
inline memory_model microbatch_memory_model(const shaped_memory_model& base,
                                            const std::vector<shaped_memory_model>& per_mb,
                                            std::uint32_t p,
                                            std::uint32_t v) {
  auto ratio = [](double x, double b) { return b == 0.0 ? 1.0 : x / b; };
  std::vector<memory_factors> table;
  table.reserve(per_mb.size() * p * v);
  std::vector<double> statics(p);
  for (stage_index s = 0; s < p; ++s) {
    statics[s] = base.static_memory(s);
  }
  for (const shaped_memory_model& mm : per_mb) {
    for (stage_index s = 0; s < p; ++s) {
      statics[s] = std::max(statics[s], mm.static_memory(s));
      for (chunk_index c = 0; c < v; ++c) {
        const chunk_memory b = base.at(s, c);
        const chunk_memory x = mm.at(s, c);
        table.push_back(memory_factors{ratio(x.activation, b.activation),
                                       ratio(x.weight_grad_input, b.weight_grad_input),
                                       ratio(x.input, b.input), ratio(x.received, b.received)});
      }
    }
  }
  memory_model out = base;
  out.set_static_memory(std::move(statics));
  out.set_microbatch_factors(p, v, std::move(table));
  return out;
}

}  // namespace detail

/// A pack request made ready to evaluate packings and orders: the job, its layout, partition
/// and placement, and each sequence's own work (the packers' weight). `pack()` runs
/// solve(); the benchmark (bench/bench_pack.cpp) also evaluates orders of its own.
class pack_problem {
 public:
  /// Checks the request: throws field_error (field: lengths, tokens_per_microbatch,
  /// microbatches, stages, schedule, chunks, tp, sequence_parallel, memory_limit,
  /// search_budget_ms) naming the
  /// rule and the value, or invalid_argument from the model, cluster or generator.
  explicit pack_problem(pack_request req) : req_(std::move(req)) {
    constexpr const char* who = "pack";
    const pack_request& r = req_;
    if (r.lengths.empty()) {
      detail::fail_field(who, "lengths", "must hold at least one sequence");
    }
    if (r.lengths.size() > max_plan_pipeline_sequences) {
      detail::fail_field(who, "lengths", r.lengths.size(), " sequences, more than ",
                         max_plan_pipeline_sequences,
                         " in one global batch of one pipeline (max_plan_pipeline_sequences)");
    }
    if (!r.lines.empty() && r.lines.size() != r.lengths.size()) {
      detail::fail_field(who, "lines", "must be empty or hold one line per length (",
                         r.lengths.size(), "), not ", r.lines.size());
    }
    for (std::size_t i = 0; i < r.lengths.size(); ++i) {
      if (r.lengths[i] == 0) {
        detail::fail_field(who, "lengths", sequence_name(i),
                           " has 0 tokens: every length must be at least 1");
      }
    }
    if (r.tokens_per_microbatch.has_value() == r.microbatches.has_value()) {
      detail::fail_field(who, "microbatches",
                         "give either tokens_per_microbatch (a token budget per micro-batch) or "
                         "microbatches (a count), not ",
                         r.microbatches ? "both" : "neither");
    }
    if (r.tokens_per_microbatch) {
      const std::uint64_t budget = *r.tokens_per_microbatch;
      if (budget == 0) {
        detail::fail_field(who, "tokens_per_microbatch", "must be at least 1");
      }
      for (std::size_t i = 0; i < r.lengths.size(); ++i) {
        if (r.lengths[i] > budget) {
          detail::fail_field(who, "tokens_per_microbatch", sequence_name(i), " has ", r.lengths[i],
                             " tokens, more than the budget of ", budget,
                             " tokens per micro-batch");
        }
      }
    }
    if (r.microbatches) {
      if (*r.microbatches == 0) {
        detail::fail_field(who, "microbatches", "must be at least 1");
      }
      if (*r.microbatches > r.lengths.size()) {
        detail::fail_field(who, "microbatches", "m=", *r.microbatches, " is more than the ",
                           r.lengths.size(), " sequences (each micro-batch holds at least one)");
      }
    }
    if (r.stages == 0) {
      detail::fail_field(who, "stages", "must be at least 1");
    }
    if (!r.model.tp_splits_heads(r.tp)) {
      detail::fail_field(who, "tp", "tp=", r.tp, " must divide the heads (", r.model.heads,
                         ") and the KV heads (", r.model.kv(), ")");
    }
    if (r.sequence_parallel && r.tp < 2) {
      detail::fail_field(who, "sequence_parallel",
                         "needs tp > 1 (it splits the activations over the tensor-parallel "
                         "group), not tp=",
                         r.tp);
    }
    if (r.sequence_parallel) {
      for (std::size_t i = 0; i < r.lengths.size(); ++i) {
        if (r.lengths[i] % r.tp != 0) {
          detail::fail_field(who, "sequence_parallel", sequence_name(i), " has ", r.lengths[i],
                             " tokens, not a multiple of tp=", r.tp,
                             ": sequence parallelism splits each sequence's tokens over the "
                             "tensor-parallel ranks (pad the lengths)");
        }
      }
    }
    if (r.cluster.gpus_per_node % r.tp != 0) {
      detail::fail_field(who, "tp", "tp=", r.tp, " must divide the GPUs per node (",
                         r.cluster.gpus_per_node, "): tensor parallelism stays inside a node");
    }
    if (r.memory_limit.values().size() > 1) {
      detail::fail_field(who, "memory_limit",
                         "must be one number of bytes for every stage (the "
                         "GPUs are alike), got ",
                         r.memory_limit.values().size(), " values");
    }
    r.memory_limit.check(who, "memory_limit", r.stages, true);
    if (!std::isfinite(r.search_budget_ms) || r.search_budget_ms < 0.0) {
      detail::fail_field(who, "search_budget_ms", "must be finite and >= 0, not ",
                         r.search_budget_ms);
    }
    if (r.search_budget_ms > 0.0 && r.search_evaluations == 0) {
      detail::fail_field(who, "search_budget_ms",
                         "only meaningful with a local search (0 search evaluations run the "
                         "heuristics only)");
    }
    gen_ = &registry_->at(r.schedule);
    if (r.chunks && *r.chunks == 0) {
      detail::fail_field(who, "chunks",
                         "must be at least 1 (leave it unset for the schedule's default)");
    }
    std::string refused;
    const std::optional<placement> pl =
        detail::placement_for(*gen_, r.stages, r.chunks.value_or(0), &refused);
    if (!pl) {
      // The generator's own rule is what the user can change.
      detail::fail_field(who, "chunks", "the schedule \"", r.schedule,
                         "\" does not take p=", r.stages, r.chunks ? " and v=" : "",
                         r.chunks ? std::to_string(*r.chunks) : std::string(), ": ", refused);
    }
    pl_ = *pl;
    if (r.microbatches) {
      check_schedule_ops(*r.microbatches, "microbatches");
    }
    std::uint64_t longest = 0;
    for (std::uint64_t l : r.lengths) {
      longest = std::max(longest, l);
    }
    job_.model = r.model;
    job_.cluster = r.cluster;
    job_.gpus = std::uint64_t{r.tp} * r.stages;
    job_.sequence = longest;
    job_.global_batch = r.lengths.size();
    job_.vocab_multiple = r.vocab_multiple;
    job_.check(who);
    // What the search decides with: the links free, so that the packings and orders it tries
    // are the same for any bandwidth or latency (each result is timed with them: a faster link
    // never gives a slower result).
    decide_job_ = job_;
    decide_job_.cluster.intra_node_bandwidth = std::numeric_limits<double>::max();
    decide_job_.cluster.inter_node_bandwidth = std::numeric_limits<double>::max();
    decide_job_.cluster.intra_node_latency = 0.0;
    decide_job_.cluster.inter_node_latency = 0.0;
    layout_.tp = r.tp;
    layout_.pp = r.stages;
    layout_.dp = 1;
    layout_.chunks = pl_.chunks();
    layout_.micro_batch = 1;
    layout_.sequence_parallel = r.sequence_parallel && r.tp > 1;
    limit_ = r.memory_limit ? r.memory_limit.at(0) : r.cluster.usable_memory();
    if (limit_ > r.cluster.memory_bytes) {
      detail::fail_field(who, "memory_limit", detail::shortest(limit_),
                         " bytes is more than the GPU's memory (memory_bytes ",
                         detail::shortest(r.cluster.memory_bytes),
                         " bytes): a stage holds no more than its GPU");
    }
    // The partition: balanced for the batch's average sequence (every micro-batch's layers
    // weigh alike; the ends' share follows the tokens), by the op times the search decides
    // with (a faster link must not move layers).
    token_counts mean;
    for (std::uint64_t l : r.lengths) {
      mean.tokens += static_cast<double>(l);
      mean.squares += static_cast<double>(l) * static_cast<double>(l);
    }
    mean.tokens /= static_cast<double>(r.lengths.size());
    mean.squares /= static_cast<double>(r.lengths.size());
    const std::uint32_t n = pl_.total_chunks();
    if (r.model.layers < n) {
      detail::fail_field(who, "stages", "the model's ", r.model.layers,
                         " layers cannot fill p·v = ", n, " chunks with one layer each");
    }
    partition_ = balanced_partition(r.model.layers, pl_,
                                    detail::partition_weights_of(
                                        op_times_of(decide_job_, layout_, mean, r.recompute), n))
                     .value_or(even_partition(r.model.layers, n));
    // Each sequence's own work alone, the packers' weight: the pipeline's F + B + W of a
    // micro-batch holding only it (the stages run in turn, so the sum is what it adds).
    weight_.resize(r.lengths.size());
    for (std::size_t i = 0; i < r.lengths.size(); ++i) {
      weight_[i] = work_of(token_counts::of(std::span<const std::uint64_t>(&r.lengths[i], 1)));
    }
  }

  const pack_request& request() const noexcept { return req_; }
  const plan_layout& layout() const noexcept { return layout_; }
  const placement& layout_placement() const noexcept { return pl_; }
  const std::vector<std::uint32_t>& partition() const noexcept { return partition_; }
  double memory_limit() const noexcept { return limit_; }
  /// Sequence i's weight: the pipeline's F + B + W seconds of a micro-batch of it alone.
  double weight(std::size_t i) const { return weight_.at(i); }

  /// The naive baseline (pack_result::baseline_microbatches): m given, or with a token budget
  /// the fewest equal-count micro-batches in file order within it.
  std::vector<packed_microbatch> naive() const {
    const std::size_t n = req_.lengths.size();
    if (req_.microbatches) {
      return in_order(*req_.microbatches);
    }
    // Each count checked on prefix sums, stopping at its first micro-batch over the budget:
    // building every split would take time quadratic in the sequences (minutes at 65536).
    std::vector<std::uint64_t> prefix(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) {
      prefix[i + 1] = prefix[i] + req_.lengths[i];
    }
    const std::uint64_t budget = *req_.tokens_per_microbatch;
    for (std::size_t m = std::max<std::uint64_t>((prefix[n] + budget - 1) / budget, 1); m < n;
         ++m) {
      bool within = true;
      for (std::size_t j = 0, first = 0; j < m && within; ++j) {
        const std::size_t count = n / m + (j < n % m ? 1 : 0);  // in_order's counts
        within = prefix[first + count] - prefix[first] <= budget;
        first += count;
      }
      if (within) {
        return in_order(static_cast<std::uint32_t>(m));
      }
    }
    return in_order(static_cast<std::uint32_t>(n));  // one sequence each fits: checked
  }

  /// Sequences in file order, equal counts (the first n mod m micro-batches one more).
  std::vector<packed_microbatch> in_order(std::uint32_t m) const {
    std::vector<std::size_t> all(req_.lengths.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    return in_order(all, m);
  }
  /// The same rule for the sequences taken in `sequence_order` (a permutation of the indices;
  /// the benchmark's random orders); each micro-batch's indices ascending.
  std::vector<packed_microbatch> in_order(const std::vector<std::size_t>& sequence_order,
                                          std::uint32_t m) const {
    const std::size_t n = sequence_order.size();
    PIPESCHED_ASSERT(n == req_.lengths.size() && m >= 1 && m <= n,
                     "pack: in_order takes every sequence once, in 1..n micro-batches");
    std::vector<packed_microbatch> out(m);
    std::size_t next = 0;
    for (std::uint32_t j = 0; j < m; ++j) {
      const std::size_t count = n / m + (j < n % m ? 1 : 0);
      for (std::size_t k = 0; k < count; ++k) {
        add(out[j], sequence_order[next++]);
      }
      std::sort(out[j].sequences.begin(), out[j].sequences.end());
    }
    return out;
  }

  /// m micro-batches balanced by weight (longest processing time first: each sequence, heaviest
  /// first, to the lightest micro-batch it fits in under the token budget); nullopt when the
  /// budget leaves some sequence nowhere.
  std::optional<std::vector<packed_microbatch>> balanced(std::uint32_t m) const {
    std::vector<std::size_t> all(req_.lengths.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    return balanced(std::move(all), std::vector<double>(m, 1.0));
  }

  /// Light at the ends: balanced as above, but the first and the last micro-batch take a share
  /// `ends` (0 < ends < 1) of the others' load. A pipeline fills with its first micro-batch's
  /// forward and drains with its last one's backward, so lighter ends shorten the step when
  /// memory lets the middle ones grow. nullopt for m < 3 or when the budget leaves a sequence
  /// nowhere.
  std::optional<std::vector<packed_microbatch>> light_ends(std::uint32_t m, double ends) const {
    if (m < 3) {
      return std::nullopt;
    }
    std::vector<std::size_t> all(req_.lengths.size());
    std::iota(all.begin(), all.end(), std::size_t{0});
    std::vector<double> share(m, 1.0);
    share.front() = share.back() = ends;
    return balanced(std::move(all), share);
  }

  /// The fewest micro-batches the token budget allows by first-fit decreasing (the count m
  /// when given).
  std::uint32_t fewest_microbatches() const {
    if (req_.microbatches) {
      return *req_.microbatches;
    }
    return static_cast<std::uint32_t>(first_fit_decreasing().size());
  }

  /// First-fit decreasing under the token budget: each sequence, longest first, to the first
  /// micro-batch it fits in, else a new one (without a budget: one micro-batch).
  std::vector<packed_microbatch> first_fit_decreasing() const {
    std::vector<std::size_t> idx(req_.lengths.size());
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      return req_.lengths[a] > req_.lengths[b];
    });
    std::vector<packed_microbatch> out;
    if (!req_.tokens_per_microbatch) {
      out.emplace_back();
      for (std::size_t i : idx) {
        add(out.front(), i);
      }
    } else {
      // The first micro-batch with room, found in a tree of the most room left below each
      // node (log time): scanning them all is quadratic in the sequences. A slot not opened yet
      // has the whole budget, so the first with room is an open one, or the next to open.
      const std::uint64_t budget = *req_.tokens_per_microbatch;
      std::size_t leaves = 1;
      while (leaves < idx.size()) {
        leaves *= 2;
      }
      std::vector<std::uint64_t> room(2 * leaves, budget);
      for (std::size_t i : idx) {
        const std::uint64_t l = req_.lengths[i];
        std::size_t node = 1;
        while (node < leaves) {
          node = room[2 * node] >= l ? 2 * node : 2 * node + 1;
        }
        const std::size_t slot = node - leaves;
        if (slot == out.size()) {
          out.emplace_back();
        }
        add(out[slot], i);
        room[node] = budget - out[slot].tokens;
        for (node /= 2; node >= 1; node /= 2) {
          room[node] = std::max(room[2 * node], room[2 * node + 1]);
        }
      }
    }
    for (packed_microbatch& mb : out) {
      std::sort(mb.sequences.begin(), mb.sequences.end());
    }
    return out;
  }

  /// A packing's micro-batches made ready to evaluate in any order: each one's costs and sizes.
  /// The costs are what the search decides with: the op times alone (links free:
  /// decide_job_), so which packings and orders it tries never depends on the links; a
  /// result is timed with them (build's `timed`).
  struct prepared {
    std::vector<packed_microbatch> mbs;
    shaped_cost_model base_costs;
    shaped_memory_model base_plain;  ///< what the generators decide with (inline recompute's)
    shaped_memory_model base_real;   ///< what the order is checked with
    shaped_memory_model base_fused;  ///< the same for an order of BW ops (fused_memory)
    std::vector<shaped_cost_model> costs;
    std::vector<shaped_memory_model> plain;
    std::vector<shaped_memory_model> real;
    std::vector<shaped_memory_model> fused;
    std::vector<double> work;  ///< each micro-batch's pipeline F + B + W, seconds
  };

  prepared prepare(std::vector<packed_microbatch> mbs) const {
    prepared pr;
    std::tie(pr.base_costs, pr.base_plain, pr.base_real, pr.base_fused) = models_of(mean_of(mbs));
    pr.mbs = std::move(mbs);
    for (const packed_microbatch& mb : pr.mbs) {
      append(pr, mb);
    }
    return pr;
  }
  /// Micro-batch j of `pr` replaced by `mb` (a packing move).
  void replace(prepared& pr, std::size_t j, packed_microbatch mb) const {
    auto [c, plain, real, fused] = models_of(counts_of(mb));
    pr.work[j] = work_of(counts_of(mb));
    pr.costs[j] = std::move(c);
    pr.plain[j] = std::move(plain);
    pr.real[j] = std::move(real);
    pr.fused[j] = std::move(fused);
    pr.mbs[j] = std::move(mb);
  }

  /// The schedule for `pr` in `order` (slot j runs micro-batch order[j]), with the models in
  /// slot order. `search_evaluations`: the zero-bubble search's own local-search budget
  /// (searching generators; nullopt: theirs).
  struct built {
    schedule sched;
    cost_model costs;
    memory_model memory;
  };
  built build(const prepared& pr,
              const std::vector<std::uint32_t>& order,
              std::optional<std::size_t> search_evaluations) const {
    return build(pr, order, search_evaluations, limit_, true);
  }
  /// The same within `limit` bytes (a searching generator keeps within it), timed with the
  /// links (`timed`) or as the search decides (links free). The order is generated as the
  /// search decides either way.
  built build(const prepared& pr,
              const std::vector<std::uint32_t>& order,
              std::optional<std::size_t> search_evaluations,
              double limit,
              bool timed) const {
    const std::uint32_t p = pl_.stages();
    const std::uint32_t v = pl_.chunks();
    std::vector<shaped_cost_model> c;
    std::vector<shaped_memory_model> plain;
    for (std::uint32_t j : order) {
      c.push_back(pr.costs[j]);
      plain.push_back(pr.plain[j]);
    }
    built out;
    out.costs = detail::microbatch_cost_model(pr.base_costs, c, p, v);
    detail::job_schedule_spec spec;
    spec.stages = p;
    spec.microbatches = static_cast<std::uint32_t>(order.size());
    spec.chunks = v;
    spec.recompute = req_.recompute;
    spec.costs = out.costs;
    spec.memory = detail::microbatch_memory_model(pr.base_plain, plain, p, v);
    spec.memory_limit = limit;
    spec.search_evaluations = search_evaluations;
    out.sched = detail::generate_job_schedule(spec, *registry_, *gen_);
    // Checked with the sizes of its backwards' kind (detail::memory_for).
    const bool separate_w = detail::runs_separate_w(out.sched);
    std::vector<shaped_memory_model> sizes;
    for (std::uint32_t j : order) {
      sizes.push_back(separate_w ? pr.real[j] : pr.fused[j]);
    }
    out.memory =
        detail::microbatch_memory_model(separate_w ? pr.base_real : pr.base_fused, sizes, p, v);
    if (timed) {
      // The links' times, for the few orders timed (the search's own need none).
      std::vector<shaped_cost_model> t;
      for (std::uint32_t j : order) {
        t.push_back(std::get<0>(models_of(counts_of(pr.mbs[j]), job_)));
      }
      out.costs =
          detail::microbatch_cost_model(std::get<0>(models_of(mean_of(pr.mbs), job_)), t, p, v);
    }
    return out;
  }

  /// `pr` in `order`, built, simulated and checked against the limit.
  pack_evaluation evaluate(const prepared& pr,
                           const std::vector<std::uint32_t>& order,
                           std::optional<std::size_t> search_evaluations = 0) const {
    return evaluate(build(pr, order, search_evaluations));
  }
  pack_evaluation evaluate(const built& b) const { return evaluate(b, limit_); }
  /// The same, fitting when every stage is within `limit` bytes.
  pack_evaluation evaluate(const built& b, double limit) const {
    pack_evaluation e;
    const simulation_result sim = simulate(b.sched, b.costs, {false, false, false});
    memory_options mo = memory_options::with_limit(limit);
    mo.record_curve = false;
    const memory_report mem = check_memory(b.sched, b.memory, mo);
    e.step_time_s = sim.makespan;
    e.fits = mem.within_budget();
    for (const stage_memory& st : mem.stages) {
      e.peak_memory_bytes.push_back(st.peak);
    }
    return e;
  }

  /// The orders the heuristics try for `pr`, by name: as packed; lightest first; heaviest
  /// first; light at both ends and heavy in the middle (the warm-up and the drain, where a
  /// heavy micro-batch delays every stage, get the light ones); heavy and light alternating
  /// (fewer heavy ones in flight at once: a lower peak).
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> heuristic_orders(
      const prepared& pr) const {
    const auto m = static_cast<std::uint32_t>(pr.mbs.size());
    std::vector<std::uint32_t> as_packed(m);
    std::iota(as_packed.begin(), as_packed.end(), 0u);
    std::vector<std::uint32_t> light = as_packed;
    std::stable_sort(light.begin(), light.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return pr.work[a] < pr.work[b]; });
    std::vector<std::uint32_t> heavy(light.rbegin(), light.rend());
    std::vector<std::uint32_t> middle(m);
    std::uint32_t lo = 0;
    std::uint32_t hi = m;
    for (std::uint32_t k = 0; k < m; ++k) {  // lightest to the ends, inwards
      (k % 2 == 0 ? middle[lo++] : middle[--hi]) = light[k];
    }
    std::vector<std::uint32_t> alternate;
    for (std::uint32_t a = 0, b = m; a < b;) {
      alternate.push_back(heavy[a++]);
      if (a < b) {
        alternate.push_back(heavy[--b]);
      }
    }
    return {{"as-packed", as_packed},
            {"light-first", light},
            {"heavy-first", heavy},
            {"heavy-middle", middle},
            {"alternate", alternate}};
  }

  /// The search (docs/model.md §10.1), run within memory rungs only: the lowest multiple of 5 %
  /// of the GPU's memory at or above the limit, then each one below it down to the first where
  /// nothing fits (search_within each); of their results the best that fits the limit is kept
  /// (none fits: the one with the smallest peak, fits false), and likewise the naive
  /// baseline's. The search's heuristics and local search are not monotone in the limit: the
  /// rungs searched under a limit are all searched under any larger one, and what fits the
  /// smaller fits the larger, so more memory never gives a slower result. Deterministic.
  pack_result solve() const {
    const double unit = req_.cluster.memory_bytes / detail::memory_rungs;
    auto top = static_cast<std::uint32_t>(std::ceil(limit_ / unit * (1.0 - 1e-12)));
    top = std::clamp<std::uint32_t>(top, 1, detail::memory_rungs);
    std::optional<pack_result> best;
    std::optional<pack_evaluation> base;
    std::size_t evaluations = 0;
    // Rungs in batches over the threads, highest first; a batch is taken in rung order, so the
    // result never depends on the threads' timing (nor which rung's error is thrown).
    unsigned threads = req_.threads != 0 ? req_.threads : std::thread::hardware_concurrency();
    threads = std::max(1u, threads);
    bool done = false;
    for (std::uint32_t k = top; k >= 1 && !done;) {
      const std::uint32_t n = std::min(k, threads);
      std::vector<std::optional<pack_result>> out(n);
      std::vector<std::exception_ptr> errors(n);
      std::atomic<std::uint32_t> next{0};
      detail::run_parallel(
          n,
          [&] {
            for (std::uint32_t i = next++; i < n; i = next++) {
              try {
                out[i] = search_within(unit * (k - i));
              } catch (...) {
                errors[i] = std::current_exception();
              }
            }
          },
          [] {});
      for (std::uint32_t i = 0; i < n && !done; ++i) {
        if (errors[i]) {
          std::rethrow_exception(errors[i]);
        }
        pack_result& r = *out[i];
        evaluations += r.evaluations;
        const bool fits_rung = r.chosen.fits;
        for (pack_evaluation* e : {&r.chosen, &r.baseline}) {
          e->fits = e->max_peak() <= limit_;  // judged against the limit asked for
        }
        if (!base || r.baseline.better_than(*base)) {
          base = r.baseline;
        }
        if (!best || r.chosen.better_than(best->chosen)) {
          best = std::move(r);
        }
        done = !fits_rung;  // nothing fits this rung, nor a lower one
      }
      k -= n;
    }
    pack_result res = std::move(*best);
    res.baseline = *base;
    res.memory_limit_bytes = limit_;
    res.evaluations = evaluations;
    return res;
  }

  /// The search within `limit` bytes: the naive baseline; for each count (m, or with a token
  /// budget the fewest first-fit decreasing reaches and the baseline's) the balanced packing
  /// (and the baseline's own packing) in each heuristic order; then a local search from the
  /// best over orders (swap two, move one) and packings (move a sequence, swap two) within the
  /// budget, each candidate generated, simulated and checked; the best that fits is kept (none
  /// fits: the one with the smallest peak is returned, fits false).
  pack_result search_within(double limit) const {
    pack_result res;
    res.layout = layout_;
    res.partition = partition_;
    res.memory_limit_bytes = limit;
    // Candidates while searching are built with the zero-bubble search's greedy and seeds
    // only; the final schedule (and the baseline's) gets its default local search too.
    constexpr std::size_t quick = 0;
    std::vector<packed_microbatch> base_mbs = naive();
    const prepared base = prepare(base_mbs);
    std::vector<std::uint32_t> identity(base.mbs.size());
    std::iota(identity.begin(), identity.end(), 0u);

    struct candidate {
      prepared pr;
      std::vector<std::uint32_t> order;
      pack_evaluation eval;
      std::string name;
    };
    std::optional<candidate> best;
    auto consider = [&](const prepared& pr, const std::vector<std::uint32_t>& order,
                        const std::string& name) {
      const pack_evaluation e = evaluate(build(pr, order, quick, limit, false), limit);
      ++res.evaluations;
      if (!best || e.better_than(best->eval)) {
        best = candidate{pr, order, e, name};
      }
    };
    std::vector<std::uint32_t> counts = {fewest_microbatches()};
    if (counts.front() != base.mbs.size()) {
      counts.push_back(static_cast<std::uint32_t>(base.mbs.size()));
    }
    for (std::uint32_t m : counts) {
      check_schedule_ops(m, req_.microbatches ? "microbatches" : "tokens_per_microbatch");
    }
    for (std::uint32_t m : counts) {
      std::vector<std::pair<std::string, prepared>> packings;
      if (auto b = balanced(m)) {
        packings.emplace_back("balanced", prepare(std::move(*b)));
      }
      for (const double ends : {0.5, 0.75}) {
        if (auto b = light_ends(m, ends)) {
          packings.emplace_back(detail::concat("light-ends ", ends), prepare(std::move(*b)));
        }
      }
      if (req_.tokens_per_microbatch && m == counts.front()) {
        packings.emplace_back("first-fit", prepare(first_fit_decreasing()));
      }
      if (m == base.mbs.size()) {
        packings.emplace_back("file-order", base);
      }
      for (const auto& [pname, pr] : packings) {
        for (const auto& [oname, order] : heuristic_orders(pr)) {
          consider(pr, order, pname + ", " + oname);
        }
      }
    }
    PIPESCHED_ASSERT(best.has_value(), "pack: no candidate (the baseline is one)");
    res.heuristic = best->name;

    // The local search.
    const std::size_t ops = std::size_t{3} * pl_.stages() * pl_.chunks() * best->order.size();
    std::size_t budget = req_.search_evaluations;
    if (budget == pack_request::default_evaluations) {
      // About 5e7 op visits in all (a few seconds): a searching generator's greedy visits each
      // op about 16 times.
      const double cost = static_cast<double>(ops) * (gen_->searches ? 16.0 : 1.0);
      budget = static_cast<std::size_t>(std::clamp(5e7 / cost, 32.0, 1000.0));
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto out_of_time = [&] {
      if (req_.search_budget_ms <= 0.0) {
        return false;
      }
      const std::chrono::duration<double, std::milli> d = std::chrono::steady_clock::now() - t0;
      return d.count() > req_.search_budget_ms;
    };
    std::uint64_t rng = 0x7061636b5f736565ull;  // fixed: the same input, the same result
    candidate cur = *best;
    const auto m = static_cast<std::uint32_t>(cur.order.size());
    for (std::size_t k = 0; k < budget && !out_of_time() && m > 1; ++k) {
      candidate trial = cur;
      const std::uint64_t r = detail::splitmix64(rng);
      const auto a = static_cast<std::uint32_t>(detail::splitmix64(rng) % m);
      auto b = static_cast<std::uint32_t>(detail::splitmix64(rng) % (m - 1));
      b = b >= a ? b + 1 : b;
      bool moved = false;
      switch (r % 4) {
        case 0:  // swap two slots
          std::swap(trial.order[a], trial.order[b]);
          moved = true;
          break;
        case 1: {  // move one slot
          const std::uint32_t x = trial.order[a];
          trial.order.erase(trial.order.begin() + a);
          trial.order.insert(trial.order.begin() + b, x);
          moved = true;
          break;
        }
        default:  // a sequence from micro-batch a to b, or swap one of each
          moved = move_sequence(trial.pr, trial.order[a], trial.order[b], r % 4 == 3, rng);
          break;
      }
      if (!moved) {
        continue;
      }
      trial.eval = evaluate(build(trial.pr, trial.order, quick, limit, false), limit);
      ++res.evaluations;
      if (trial.eval.better_than(cur.eval)) {
        cur = std::move(trial);
        ++res.search_moves;
      }
    }

    // The final schedules, with the searching generators' own local search.
    built chosen = build(cur.pr, cur.order, std::nullopt, limit, true);
    res.chosen = evaluate(chosen, limit);
    const built naive_built = build(base, identity, std::nullopt, limit, true);
    res.baseline = evaluate(naive_built, limit);
    res.evaluations += 2;
    res.microbatches = cur.pr.mbs;
    res.order = cur.order;
    res.baseline_microbatches = base.mbs;
    // The baseline is a candidate too: never return worse (the polish could, in principle,
    // change the ranking of two candidates that tied while searching).
    if (res.baseline.better_than(res.chosen)) {
      res.microbatches = base.mbs;
      res.order = identity;
      res.chosen = res.baseline;
      chosen = naive_built;
      res.heuristic = "file-order, as-packed";
    }
    res.sched = std::move(chosen.sched);
    res.costs = std::move(chosen.costs);
    res.memory = std::move(chosen.memory);
    return res;
  }

 private:
  // Every schedule pack simulates has p·v·m·3 ops: at most max_plan_schedule_ops, as the
  // planner's candidates (a count typed for a length, or a tiny budget, would otherwise run
  // for hours).
  void check_schedule_ops(std::uint64_t m, const char* field) const {
    const std::uint64_t ops = std::uint64_t{3} * pl_.stages() * pl_.chunks() * m;
    if (ops > max_plan_schedule_ops) {
      detail::fail_field("pack", field, m, " micro-batches on p=", pl_.stages(),
                         ", v=", pl_.chunks(), " make PP·v·m·3 = ", ops,
                         " ops in one schedule, more than ", max_plan_schedule_ops,
                         " (max_plan_schedule_ops)");
    }
  }
  std::string sequence_name(std::size_t i) const {
    return req_.lines.empty() ? detail::concat("sequence ", i)
                              : detail::concat("sequence ", i, " (line ", req_.lines[i], ")");
  }
  // Longest processing time first over `seqs` into one micro-batch per entry of `share`: each
  // sequence, heaviest first, to the micro-batch with the least load for its share that it fits
  // in under the token budget.
  std::optional<std::vector<packed_microbatch>> balanced(std::vector<std::size_t> seqs,
                                                         const std::vector<double>& share) const {
    std::stable_sort(seqs.begin(), seqs.end(),
                     [&](std::size_t a, std::size_t b) { return weight_[a] > weight_[b]; });
    const std::size_t m = share.size();
    std::vector<packed_microbatch> out(m);
    std::vector<double> load(m, 0.0);
    // The micro-batches by load for their share, lowest first (then by index): a heap, since
    // scanning all m for each sequence is quadratic (minutes at 65536 micro-batches). Those
    // without room for the sequence are set aside and put back after it.
    using entry = std::pair<double, std::size_t>;
    std::priority_queue<entry, std::vector<entry>, std::greater<>> lightest;
    for (std::size_t j = 0; j < m; ++j) {
      lightest.emplace(0.0, j);
    }
    std::vector<entry> no_room;
    for (std::size_t i : seqs) {
      while (!lightest.empty() && !fits_budget(out[lightest.top().second], req_.lengths[i])) {
        no_room.push_back(lightest.top());
        lightest.pop();
      }
      if (lightest.empty()) {
        return std::nullopt;
      }
      const std::size_t best = lightest.top().second;
      lightest.pop();
      add(out[best], i);
      load[best] += weight_[i];
      lightest.emplace(load[best] / share[best], best);
      for (const entry& e : no_room) {
        lightest.push(e);
      }
      no_room.clear();
    }
    for (packed_microbatch& mb : out) {
      std::sort(mb.sequences.begin(), mb.sequences.end());
      if (mb.sequences.empty()) {
        return std::nullopt;
      }
    }
    return out;
  }
  void add(packed_microbatch& mb, std::size_t i) const {
    const std::uint64_t l = req_.lengths[i];
    mb.sequences.push_back(i);
    mb.tokens += l;
    mb.squares += static_cast<double>(l) * static_cast<double>(l);
  }
  bool fits_budget(const packed_microbatch& mb, std::uint64_t more) const {
    return !req_.tokens_per_microbatch || mb.tokens + more <= *req_.tokens_per_microbatch;
  }
  // The mean micro-batch of a packing: the base its per-micro-batch factors scale.
  static token_counts mean_of(const std::vector<packed_microbatch>& mbs) {
    token_counts mean;
    for (const packed_microbatch& mb : mbs) {
      mean.tokens += static_cast<double>(mb.tokens);
      mean.squares += mb.squares;
    }
    mean.tokens /= static_cast<double>(mbs.size());
    mean.squares /= static_cast<double>(mbs.size());
    return mean;
  }
  static token_counts counts_of(const packed_microbatch& mb) {
    return token_counts{static_cast<double>(mb.tokens), mb.squares};
  }

  // The timing model (costs, inline recompute's when recomputing), the sizes the generators
  // decide with and the real sizes (a W order's, a BW order's), of one micro-batch of `n`
  // tokens, read for the shape.
  using models =
      std::tuple<shaped_cost_model, shaped_memory_model, shaped_memory_model, shaped_memory_model>;
  models models_of(const token_counts& n) const { return models_of(n, decide_job_); }
  // The same for `job` (job_: the links timed).
  models models_of(const token_counts& n, const training_job& job) const {
    const std::uint32_t p = pl_.stages();
    const std::uint32_t v = pl_.chunks();
    const job_costs jc = make_job_costs(job, layout_, n, req_.recompute, partition_, pl_);
    shaped_cost_model c = jc.costs.for_shape(p, v, "pack");
    shaped_memory_model plain = jc.memory.for_shape(p, v, "pack");
    if (req_.recompute != recompute_kind::none) {
      auto [ic, im] = inline_recompute(jc.costs, jc.memory, p, v);
      c = ic.for_shape(p, v, "pack");
      plain = im.for_shape(p, v, "pack");
    }
    return {std::move(c), std::move(plain), jc.memory.for_shape(p, v, "pack"),
            jc.fused_memory.for_shape(p, v, "pack")};
  }
  // The pipeline's F + B + W seconds of a micro-batch of `n` tokens: its weight.
  double work_of(const token_counts& n) const {
    const shaped_cost_model c = std::get<0>(models_of(n));
    double w = 0.0;
    for (stage_index s = 0; s < pl_.stages(); ++s) {
      for (chunk_index k = 0; k < pl_.chunks(); ++k) {
        const op_costs t = c.at(s, k);
        w += t.forward + t.backward_input + t.backward_weight;
      }
    }
    return w;
  }
  void append(prepared& pr, const packed_microbatch& mb) const {
    auto [c, plain, real, fused] = models_of(counts_of(mb));
    pr.costs.push_back(std::move(c));
    pr.plain.push_back(std::move(plain));
    pr.real.push_back(std::move(real));
    pr.fused.push_back(std::move(fused));
    pr.work.push_back(work_of(counts_of(mb)));
  }

  // Moves a random sequence of micro-batch a to b (or, `swap`, exchanges one of each) within
  // the token budget, a keeping at least one; false when nothing moves.
  bool move_sequence(
      prepared& pr, std::uint32_t a, std::uint32_t b, bool swap, std::uint64_t& rng) const {
    packed_microbatch x = pr.mbs[a];
    packed_microbatch y = pr.mbs[b];
    if (!swap && x.sequences.size() < 2) {
      return false;
    }
    const std::size_t i = x.sequences[detail::splitmix64(rng) % x.sequences.size()];
    std::optional<std::size_t> k;
    if (swap) {
      k = y.sequences[detail::splitmix64(rng) % y.sequences.size()];
      if (req_.lengths[*k] == req_.lengths[i]) {
        return false;  // the same micro-batches
      }
    }
    auto take = [&](packed_microbatch& mb, std::size_t s) {
      mb.sequences.erase(std::find(mb.sequences.begin(), mb.sequences.end(), s));
      mb.tokens -= req_.lengths[s];
      mb.squares -= static_cast<double>(req_.lengths[s]) * static_cast<double>(req_.lengths[s]);
    };
    auto put = [&](packed_microbatch& mb, std::size_t s) {
      add(mb, s);
      std::sort(mb.sequences.begin(), mb.sequences.end());
    };
    take(x, i);
    if (k) {
      take(y, *k);
      put(x, *k);
    }
    put(y, i);
    if (!fits_budget(x, 0) || !fits_budget(y, 0)) {
      return false;
    }
    // Sums recomputed, not updated: the same packing reached two ways has the same numbers.
    recount(x);
    recount(y);
    replace(pr, a, std::move(x));
    replace(pr, b, std::move(y));
    return true;
  }
  void recount(packed_microbatch& mb) const {
    mb.tokens = 0;
    mb.squares = 0.0;
    for (std::size_t s : mb.sequences) {
      mb.tokens += req_.lengths[s];
      mb.squares += static_cast<double>(req_.lengths[s]) * static_cast<double>(req_.lengths[s]);
    }
  }

  pack_request req_;
  const generator_registry* registry_ = &default_registry();
  const generator_entry* gen_ = nullptr;
  placement pl_ = placement::sequential(1);
  training_job job_;
  training_job decide_job_;
  plan_layout layout_;
  double limit_ = 0.0;
  std::vector<std::uint32_t> partition_;
  std::vector<double> weight_;
};

/// A number of bytes with an optional unit, as `pack --memory-limit` and pipesched.pack() take
/// it: B, kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), spaces allowed
/// before the unit; no unit is bytes ("72GiB", "7.5e10", "80 GB"). nullopt unless the number is
/// finite and > 0 (and its product with the unit too).
inline std::optional<double> parse_bytes(std::string_view text) {
  static constexpr std::pair<std::string_view, double> units[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"kB", 1e3},     {"KB", 1e3},        {"MB", 1e6},           {"GB", 1e9},
      {"TB", 1e12},    {"B", 1.0}};
  double scale = 1.0;
  for (const auto& [unit, factor] : units) {
    if (text.size() > unit.size() && text.substr(text.size() - unit.size()) == unit) {
      text.remove_suffix(unit.size());
      scale = factor;
      break;
    }
  }
  while (!text.empty() && text.back() == ' ') {
    text.remove_suffix(1);
  }
  // A plain decimal number: digits, one point, an exponent; nothing else (no sign, no "inf").
  const std::string number(text);
  if (number.empty() || number.find_first_not_of("0123456789.eE+-") != std::string::npos ||
      !(std::isdigit(static_cast<unsigned char>(number.front())) || number.front() == '.')) {
    return std::nullopt;
  }
  std::size_t used = 0;
  double v = 0.0;
  try {
    v = std::stod(number, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != number.size() || !std::isfinite(v * scale) || !(v > 0.0)) {
    return std::nullopt;
  }
  return v * scale;
}

/// The packing and order of `req`'s sequences that minimise the simulated step time within the
/// memory limit, against the naive baseline (pack_problem::solve).
PIPESCHED_INLINE pack_result pack(const pack_request& req);

#if defined(PIPESCHED_HEADER_ONLY) || defined(PIPESCHED_DEFINE_PACK)
PIPESCHED_INLINE pack_result pack(const pack_request& req) {
  return pack_problem(req).solve();
}
#endif

}  // namespace pipesched
