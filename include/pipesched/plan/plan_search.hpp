#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "pipesched/gen/registry.hpp"
#include "pipesched/ir/detail/parallel.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/plan/job.hpp"
#include "pipesched/plan/job_costs.hpp"
#include "pipesched/plan/job_model.hpp"
#include "pipesched/plan/job_schedule.hpp"
#include "pipesched/plan/partition.hpp"
#include "pipesched/plan/plan_ranking.hpp"
#include "pipesched/plan/plan_types.hpp"

// The planner's space and search (docs/model.md §10): the fixed choices checked, every layout,
// schedule, recomputation and partition enumerated with its bounds, the candidates evaluated in
// bound order on threads, the best kept.

namespace pipesched {

namespace detail {

/// Divisors of n in increasing order.
inline std::vector<std::uint64_t> divisors_of(std::uint64_t n) {
  std::vector<std::uint64_t> lo, hi;
  for (std::uint64_t d = 1; d * d <= n; ++d) {
    if (n % d == 0) {
      lo.push_back(d);
      if (d != n / d) {
        hi.push_back(n / d);
      }
    }
  }
  lo.insert(lo.end(), hi.rbegin(), hi.rend());
  return lo;
}

/// How a message names a fixed choice: as the plan's own option (`--tp 8`, who "plan") or as a
/// key of the baseline (`tp=8`, who "plan: baseline"), so that it names what the user typed.
struct choice_names {
  bool baseline = false;

  std::string who() const { return baseline ? "plan: baseline" : "plan"; }
  /// "--tp" or "tp"; `key` is set_plan_choice's (tp, pp, dp, v, micro-batch, ...).
  std::string option(std::string_view key) const {
    if (baseline) {
      return std::string(key);
    }
    return key == "v" ? "-v" : key == "sp" ? "--sequence-parallel" : "--" + std::string(key);
  }
  /// "--tp 8" or "tp=8".
  template <class T>
  std::string value(std::string_view key, const T& v) const {
    return concat(option(key), baseline ? "=" : " ", v);
  }
};

/// "TP·PP (8·16 = 128)", or "TP·CP·PP (8·2·16 = 256)" with context parallelism.
inline std::string model_parallel_text(std::uint32_t tp, std::uint32_t cp, std::uint32_t pp) {
  const std::uint64_t per = std::uint64_t{tp} * cp * pp;
  return cp > 1 ? concat("TP·CP·PP (", tp, "·", cp, "·", pp, " = ", per, ")")
                : concat("TP·PP (", tp, "·", pp, " = ", per, ")");
}

/// The data-parallel degree a layout gets, checking a fixed one; throws with the values.
inline std::uint64_t data_parallel_of(const training_job& job,
                                      std::uint32_t tp,
                                      std::uint32_t pp,
                                      const std::optional<std::uint64_t>& fixed,
                                      const choice_names& names = {},
                                      std::uint32_t cp = 1) {
  const std::uint64_t per = std::uint64_t{tp} * cp * pp;
  if (job.gpus % per != 0) {
    fail(names.who(), ": ", model_parallel_text(tp, cp, pp), " must divide the GPUs (", job.gpus,
         ")");
  }
  const std::uint64_t dp = job.gpus / per;
  if (fixed && *fixed != dp) {
    fail(names.who(), ": ", names.value("dp", *fixed), " with ", names.value("tp", tp), " ",
         cp > 1 ? names.value("cp", cp) + " " : "", names.value("pp", pp), " needs ", per * *fixed,
         " GPUs, not ", job.gpus, cp > 1 ? " (TP·CP·PP·DP = GPUs)" : " (TP·PP·DP = GPUs)");
  }
  return dp;
}

/// Whether PP·v chunks of `pp` stages hold the model's layers: each at least one, but at
/// PP > 1 the first may hold only the embedding and the last only the head (max_chunks_for).
inline bool chunks_hold_layers(const training_job& job, std::uint64_t pp, std::uint64_t v) {
  const std::uint64_t n = pp * v;
  return n <= job.model.layers || (pp > 1 && n <= max_chunks_for(job.model.layers));
}

/// Why they do not: "each chunk needs at least one layer ...".
inline constexpr std::string_view chunk_layers_rule =
    "each chunk needs at least one layer, but at PP > 1 the first and the last, which may hold "
    "only the embedding and only the head (PP·v at most the layers + 2)";

/// The rule of a context-parallel degree: each sequence is cut into 2·CP pieces (two per rank,
/// for the causal mask's balance, as Megatron-LM and torchtitan do), so 2·CP must divide it,
/// and with sequence parallelism each piece splits over TP again. Empty when `cp` applies.
inline std::string context_parallel_refusal(const training_job& job,
                                            std::uint32_t cp,
                                            std::uint32_t tp,
                                            bool sp) {
  if (cp <= 1) {
    return {};
  }
  const std::uint64_t pieces = 2 * std::uint64_t{cp} * (sp ? tp : 1);
  if (job.sequence % pieces != 0) {
    return concat("CP ", cp, sp ? concat(" with SP over TP ", tp) : std::string(),
                  " cuts each sequence into ", pieces, " pieces (2·CP", sp ? "·TP" : "",
                  "), which must divide the sequence (", job.sequence, " tokens)");
  }
  return {};
}

/// The rule of an expert-parallel degree for a layout of `dp_cp` = DP·CP ranks per stage: EP > 1
/// needs experts, divides the routed experts (each rank an equal share) and the DP·CP ranks it is
/// carved out of. Empty when `ep` applies; `dp_cp` 0: not known yet (not checked).
inline std::string expert_parallel_refusal(const training_job& job,
                                           std::uint32_t ep,
                                           std::uint64_t dp_cp) {
  if (ep <= 1) {
    return {};
  }
  if (!job.model.is_moe()) {
    return concat("EP ", ep, " needs a model with experts: \"", job.model.name, "\" is dense");
  }
  if (job.model.experts % ep != 0) {
    return concat("EP ", ep, " must divide the routed experts (", job.model.experts,
                  "): each rank holds an equal share");
  }
  if (dp_cp != 0 && dp_cp % ep != 0) {
    return concat("EP ", ep, " must divide the data-parallel ranks DP·CP (", dp_cp,
                  "): expert parallelism is carved out of them");
  }
  return {};
}

/// The expert-parallel degrees searched for a stage of `dp_cp` DP·CP ranks: 1 for a dense model;
/// for an MoE model every degree dividing both the routed experts and DP·CP (at most one of each
/// power of two below 2^32: a few per layout).
inline std::vector<std::uint32_t> expert_parallel_degrees(const training_job& job,
                                                          std::uint64_t dp_cp) {
  std::vector<std::uint32_t> out;
  if (!job.model.is_moe()) {
    return {1};
  }
  for (std::uint64_t e : divisors_of(job.model.experts)) {
    if (dp_cp % e == 0) {
      out.push_back(static_cast<std::uint32_t>(e));
    }
  }
  return out;
}

/// Checks the fixed choices against the model, the cluster and the batch (exit 2 in the CLI),
/// each rule once for the search and for a fixed layout: TP dividing the heads, the KV heads
/// and a node's GPUs; PP not above the layers; TP, PP and DP (each, and together) dividing the
/// GPUs; PP·v chunks of at least one layer; the global batch a multiple of DP·b.
inline void check_fixed(const training_job& job,
                        const plan_fixed& f,
                        const choice_names& names = {}) {
  const std::string who = names.who();
  if (f.tp) {
    const std::uint32_t t = *f.tp;
    if (!job.model.tp_splits_heads(t)) {
      fail(who, ": ", names.value("tp", t), " must divide the heads (", job.model.heads,
           ") and the KV heads (", job.model.kv(), ")");
    }
    if (job.cluster.gpus_per_node % t != 0) {
      fail(who, ": ", names.value("tp", t), " must divide the GPUs per node (",
           job.cluster.gpus_per_node, "): tensor parallelism stays inside a node");
    }
  }
  if (f.pp && (*f.pp == 0 || *f.pp > job.model.layers)) {
    fail(who, ": ", names.value("pp", *f.pp), " must be between 1 and the layers (",
         job.model.layers, ")");
  }
  if (f.dp && *f.dp == 0) {
    fail(who, ": ", names.option("dp"), " must be at least 1");
  }
  if (f.cp) {
    if (*f.cp == 0) {
      fail(who, ": ", names.option("cp"), " must be at least 1");
    }
    // SP's own rule (TP dividing the sequence) is checked below.
    if (const std::string why = context_parallel_refusal(job, *f.cp, 1, false); !why.empty()) {
      fail(who, ": ", names.value("cp", *f.cp), ": ", why);
    }
  }
  if (f.chunks && *f.chunks == 0) {
    fail(who, ": ", names.option("v"), " must be at least 1");
  }
  if (f.ep) {
    if (*f.ep == 0) {
      fail(who, ": ", names.option("ep"), " must be at least 1");
    }
    // DP·CP when the layout fixes it (the rest of the layout's rule is checked below).
    std::uint64_t dp_cp = 0;
    if (f.tp && f.pp) {
      const std::uint64_t per = std::uint64_t{*f.tp} * f.cp.value_or(1) * *f.pp;
      if (job.gpus % per == 0) {
        dp_cp = job.gpus / per * f.cp.value_or(1);
      }
    }
    if (const std::string why = expert_parallel_refusal(job, *f.ep, dp_cp); !why.empty()) {
      fail(who, ": ", names.value("ep", *f.ep), ": ", why);
    }
    if (job.gpus % *f.ep != 0) {
      fail(who, ": ", names.value("ep", *f.ep), ": EP ", *f.ep, " must divide the GPUs (", job.gpus,
           "): expert parallelism is carved out of the data-parallel ranks");
    }
  }
  if (f.micro_batch && *f.micro_batch == 0) {
    fail(who, ": ", names.option("micro-batch"), " must be at least 1");
  }
  if (f.microbatches && *f.microbatches == 0) {
    fail(who, ": ", names.option("microbatches"), " must be at least 1");
  }
  // Each fixed degree, and each fixed product, must divide the GPUs: the search would find no
  // layout (TP·PP·DP = GPUs).
  std::string fixed_names;
  std::uint64_t product = 1;
  int count = 0;
  auto divides = [&](std::string_view key, const auto& degree) {
    if (!degree) {
      return;
    }
    fixed_names += (count++ == 0 ? "" : " · ") + names.value(key, *degree);
    product *= *degree;
    if (job.gpus % product != 0) {
      fail(who, ": ", fixed_names, count == 1 ? "" : concat(" = ", product),
           " does not divide the ", job.gpus,
           f.cp ? " GPUs (TP·CP·PP·DP = GPUs)" : " GPUs (TP·PP·DP = GPUs)");
    }
  };
  if (f.tp && f.pp) {
    data_parallel_of(job, *f.tp, *f.pp, f.dp, names, f.cp.value_or(1));
  } else {
    divides("dp", f.dp);
    divides("tp", f.tp);
    divides("cp", f.cp);
    divides("pp", f.pp);
  }
  if (f.chunks) {
    const std::uint64_t p = f.pp.value_or(1);
    const std::uint64_t n = p * *f.chunks;
    if (f.pp && !chunks_hold_layers(job, p, *f.chunks)) {
      fail(who, ": ", names.value("pp", p), " and ", names.value("v", *f.chunks),
           " make PP·v = ", n, " chunks for ", job.model.layers, " layers: ", chunk_layers_rule);
    }
    if (!f.pp && n > job.model.layers) {
      fail(who, ": ", names.value("v", *f.chunks), " makes PP·v = ", n, " chunks for ",
           job.model.layers, " layers even at PP 1: each chunk needs at least one layer");
    }
  }
  if (f.sequence_parallel && *f.sequence_parallel && f.tp && *f.tp == 1) {
    fail(who, ": ", names.baseline ? "sp=on" : "--sequence-parallel", " needs ", names.option("tp"),
         " > 1");
  }
  if (f.sequence_parallel && *f.sequence_parallel && f.tp && job.sequence % *f.tp != 0) {
    fail(who, ": ", names.baseline ? "sp=on" : "--sequence-parallel", " with ",
         names.value("tp", *f.tp), " needs a sequence length that is a multiple of TP, not ",
         job.sequence, " tokens: sequence parallelism splits each sequence over the TP ranks");
  }
  if (f.cp && f.tp && f.sequence_parallel && *f.sequence_parallel) {
    if (const std::string why = context_parallel_refusal(job, *f.cp, *f.tp, true); !why.empty()) {
      fail(who, ": ", names.value("cp", *f.cp), ": ", why);
    }
  }
  if (job.global_batch) {
    // DP·m·b = the global batch: what is fixed of the three must divide it.
    std::uint64_t batch_part = 1;
    std::string parts;
    int n_parts = 0;
    auto part = [&](std::string_view key, const auto& degree) {
      if (!degree) {
        return;
      }
      parts += (n_parts++ == 0 ? "" : " · ") + names.value(key, *degree);
      const bool within = *degree <= job.global_batch / batch_part;  // no overflow
      if (within) {
        batch_part *= *degree;
      }
      if (!within || job.global_batch % batch_part != 0) {
        fail(who, ": ", parts, n_parts > 1 && within ? concat(" = ", batch_part) : "",
             " does not divide the global batch (", job.global_batch,
             " sequences): DP · microbatches · micro-batch = the global batch");
      }
    };
    part("dp", f.dp);
    part("micro-batch", f.micro_batch);
    part("microbatches", f.microbatches);
  }
  if (!job.global_batch && !f.microbatches) {
    fail(who, ": give the batch: --global-batch, --global-batch-tokens or --microbatches");
  }
  if (!job.global_batch && f.microbatches && !(f.tp && f.pp && f.micro_batch)) {
    fail(who, ": ", names.option("microbatches"), " alone fixes the batch only for a given ",
         names.option("tp"), ", ", names.option("pp"), " and ", names.option("micro-batch"),
         "; to search layouts give --global-batch or --global-batch-tokens");
  }
}

/// A group of candidates sharing their job costs: one layout, recomputation and placement.
struct plan_group {
  plan_layout layout;
  recompute_kind recompute = recompute_kind::none;
  placement pl;
  std::vector<std::uint32_t> partition;
  std::shared_ptr<const job_costs> costs;
  double time_bound = 0.0;    ///< no schedule of the group takes less (seconds)
  double memory_bound = 0.0;  ///< no schedule of the group needs less on its fullest stage
};

/// The group's partition: given, even, or balanced by the op times of the layout.
inline std::optional<std::vector<std::uint32_t>> partition_for(
    const training_job& job,
    const plan_layout& lay,
    recompute_kind recompute,
    const placement& pl,
    const partition_spec& spec,
    const std::vector<std::uint32_t>& caps = {}) {
  // Several routes (DualPipe) each hold the whole model: one route's partition, balanced as a
  // sequential pipeline's, given to every route.
  if (pl.routes() > 1) {
    const std::uint32_t route = pl.route_length();
    std::optional<std::vector<std::uint32_t>> one;
    if (spec.kind == partition_kind::given) {
      check_given_partition(spec.layers, job.model.layers, route);
      one = spec.layers;
    } else if (route > max_chunks_for(job.model.layers) ||
               (route > job.model.layers && lay.pp == 1)) {
      return std::nullopt;
    } else if (spec.kind == partition_kind::even) {
      one = even_partition(job.model.layers, route);
    } else {
      one = balanced_partition(job.model.layers, placement::sequential(route),
                               partition_weights_of(op_times_of(job, lay, recompute), route));
    }
    if (!one) {
      return std::nullopt;
    }
    std::vector<std::uint32_t> all;
    for (std::uint32_t r = 0; r < pl.routes(); ++r) {
      all.insert(all.end(), one->begin(), one->end());
    }
    return all;
  }
  const std::uint32_t n = lay.pp * lay.chunks;
  if (spec.kind == partition_kind::given) {
    check_given_partition(spec.layers, job.model.layers, n);
    return spec.layers;
  }
  if (!chunks_hold_layers(job, lay.pp, lay.chunks)) {
    return std::nullopt;
  }
  if (spec.kind == partition_kind::even) {
    return even_partition(job.model.layers, n);
  }
  return balanced_partition(job.model.layers, pl,
                            partition_weights_of(op_times_of(job, lay, recompute), n, caps));
}

/// Fills a group's costs and bounds from its partition.
inline void finish_group(const training_job& job, plan_group& g) {
  g.costs = std::make_shared<const job_costs>(
      make_job_costs(job, g.layout, g.recompute, g.partition, g.pl));
  const schedule_bounds b = schedule_bounds_of(*g.costs, g.layout, g.recompute, g.pl);
  g.time_bound = b.time_s;
  g.memory_bound = b.memory_bytes;
}

/// Per-stage layer caps after a balanced partition did not fit: each stage over the limit
/// gives up the layers its excess is worth at its bytes per layer.
inline std::vector<std::uint32_t> memory_caps(const plan_entry& e, double usable) {
  std::vector<std::uint32_t> caps;
  for (const plan_stage& st : e.stages) {
    std::uint32_t cap = st.layers;
    if (st.total > usable && st.layers > 0) {
      const double per_layer = st.total / st.layers;
      const auto over = static_cast<std::uint32_t>(std::ceil((st.total - usable) / per_layer));
      cap = over >= st.layers ? 0 : st.layers - over;
    }
    caps.push_back(cap);
  }
  return caps;
}

/// Why a space holds no candidate: the refusal that got furthest through the checks (a
/// schedule refusing v says more than a TP·PP not dividing the GPUs), in the user's terms.
struct plan_refusal {
  int depth = -1;
  std::string why;

  /// Keeps text() when it got further than the refusal kept; builds it only then.
  template <class Text>
  void note(int at_depth, const Text& text) {
    if (at_depth > depth) {
      depth = at_depth;
      why = text();
    }
  }
};

/// The space of `f` for `job`: every group and generator, best bound first.
struct plan_space {
  std::vector<plan_group> groups;
  std::vector<std::pair<std::size_t, const generator_entry*>> candidates;  // (group, generator)
  std::size_t layouts_refused = 0;
  plan_refusal refusal;  ///< why no candidate, when there is none
};

inline plan_space enumerate_space(const training_job& job,
                                  const plan_fixed& f,
                                  const generator_registry& registry,
                                  const choice_names& names = {}) {
  plan_space space;
  const std::string who = names.who();
  std::vector<std::uint32_t> tps;
  if (f.tp) {
    tps.push_back(*f.tp);
  } else {
    for (std::uint64_t t : divisors_of(job.cluster.gpus_per_node)) {
      if (job.model.tp_splits_heads(t) && job.gpus % t == 0) {
        tps.push_back(static_cast<std::uint32_t>(t));
      }
    }
  }
  std::vector<const generator_entry*> gens;
  if (f.schedule) {
    gens.push_back(&registry.at(*f.schedule));
  } else {
    for (const generator_entry& e : registry.entries()) {
      gens.push_back(&e);
    }
  }
  struct placed {
    std::optional<placement> pl;
    std::string why;  ///< the generator's refusal
  };
  std::map<std::tuple<std::string, std::uint32_t, std::uint32_t>, placed> places;
  auto place = [&](const generator_entry& g, std::uint32_t p, std::uint32_t v) -> const placed& {
    const auto key = std::make_tuple(g.name, p, v);
    auto it = places.find(key);
    if (it == places.end()) {
      placed pd;
      pd.pl = placement_for(g, p, v, &pd.why);
      it = places.emplace(key, std::move(pd)).first;
    }
    return it->second;
  };
  const bool layout_fixed = f.tp && f.pp;
  for (std::uint32_t tp : tps) {
    std::vector<std::uint32_t> cps;
    if (f.cp) {
      cps.push_back(*f.cp);
    } else {
      cps.push_back(1);
      if (job.sequence >= cp_search_min_sequence) {
        for (std::uint32_t c = 2; c <= 32; c *= 2) {
          if ((job.gpus / tp) % c == 0 && context_parallel_refusal(job, c, tp, false).empty()) {
            cps.push_back(c);
          }
        }
      }
    }
    for (std::uint32_t cp : cps) {
      std::vector<std::uint32_t> pps;
      if (f.pp) {
        pps.push_back(*f.pp);
      } else {
        // At most the layers, so never more than that many divisions of the GPUs are tried.
        for (std::uint32_t p = 1; p <= job.model.layers; ++p) {
          if ((job.gpus / tp) % (std::uint64_t{cp} * p) == 0) {
            pps.push_back(p);
          }
        }
      }
      for (std::uint32_t pp : pps) {
        const std::string at =
            cp > 1 ? concat("TP", tp, " CP", cp, " PP", pp) : concat("TP", tp, " PP", pp);
        const std::uint64_t per_replica = std::uint64_t{tp} * cp * pp;
        if (job.gpus % per_replica != 0) {
          if (layout_fixed) {
            data_parallel_of(job, tp, pp, f.dp, names, cp);  // throws, naming the values
          }
          space.refusal.note(0, [&] {
            return concat(at, ": ", model_parallel_text(tp, cp, pp), " does not divide the ",
                          job.gpus, " GPUs");
          });
          continue;
        }
        const std::uint64_t dp = job.gpus / per_replica;
        const std::size_t first_group = space.groups.size();
        if (f.dp && *f.dp != dp) {
          if (layout_fixed) {
            data_parallel_of(job, tp, pp, f.dp, names, cp);
          }
          space.refusal.note(
              1, [&] { return concat(at, " gives DP ", dp, ", not ", names.value("dp", *f.dp)); });
          continue;
        }
        // Micro-batch sizes and counts.
        std::vector<std::pair<std::uint32_t, std::uint32_t>> batches;  // (b, m)
        if (job.global_batch) {
          if (job.global_batch % dp != 0) {
            const std::string rule = concat("the global batch (", job.global_batch,
                                            " sequences) must be a multiple of DP (", dp, ")");
            if (layout_fixed) {
              fail(who, ": ", rule);
            }
            ++space.layouts_refused;
            space.refusal.note(2, [&] { return concat(at, ": ", rule); });
            continue;
          }
          const std::uint64_t per = job.global_batch / dp;
          const std::string per_text =
              concat("the global batch (", job.global_batch, " sequences) over DP (", dp, ") is ",
                     per, " sequences per pipeline");
          if (per > max_plan_pipeline_sequences) {
            const std::string rule = concat(per_text, ", more than ", max_plan_pipeline_sequences,
                                            " (max_plan_pipeline_sequences)");
            if (layout_fixed) {
              fail(who, ": ", rule);
            }
            space.refusal.note(3, [&] { return concat(at, ": ", rule); });
            continue;
          }
          for (std::uint64_t b : divisors_of(per)) {
            if ((f.micro_batch && b != *f.micro_batch) || (!f.micro_batch && b > 16)) {
              continue;
            }
            const std::uint64_t m = per / b;
            if (f.microbatches && m != *f.microbatches) {
              continue;
            }
            batches.emplace_back(static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(m));
          }
          if (batches.empty()) {
            // Only fixed choices leave no micro-batch size (b = 1 always divides).
            std::string rule = per_text + ": not ";
            if (f.micro_batch && f.microbatches) {
              rule += concat(names.value("micro-batch", *f.micro_batch), " times ",
                             names.value("microbatches", *f.microbatches));
            } else if (f.micro_batch) {
              rule += concat("a multiple of ", names.value("micro-batch", *f.micro_batch));
            } else {
              rule += concat(names.value("microbatches", *f.microbatches),
                             " micro-batches of 1 to 16 sequences (the sizes searched)");
            }
            if (layout_fixed) {
              fail(who, ": ", rule);
            }
            space.refusal.note(4, [&] { return concat(at, ": ", rule); });
            continue;
          }
        } else {
          batches.emplace_back(*f.micro_batch, *f.microbatches);
        }
        std::vector<bool> sps;
        if (f.sequence_parallel) {
          // Asked for, SP rules TP 1 out: quietly planning it off would answer another question.
          if (*f.sequence_parallel && tp == 1) {
            space.refusal.note(1, [&] {
              return concat(at, ": ", names.baseline ? "sp=on" : "--sequence-parallel",
                            " needs TP > 1");
            });
            continue;
          }
          if (*f.sequence_parallel && job.sequence % tp != 0) {
            space.refusal.note(2, [&] {
              return concat(at, ": ", names.baseline ? "sp=on" : "--sequence-parallel",
                            " needs a sequence length that is a multiple of TP, not ", job.sequence,
                            " tokens");
            });
            continue;
          }
          if (const std::string why = context_parallel_refusal(job, cp, tp, *f.sequence_parallel);
              !why.empty()) {
            if (layout_fixed && f.cp) {
              fail(who, ": ", why);
            }
            space.refusal.note(2, [&] { return concat(at, ": ", why); });
            continue;
          }
          sps.push_back(*f.sequence_parallel);
        } else {
          // Sequence parallelism splits each sequence over the TP ranks: only where it divides
          // (with CP, each of the sequence's 2·CP pieces).
          sps.push_back(false);
          if (tp > 1 && context_parallel_refusal(job, cp, tp, true).empty() &&
              job.sequence % tp == 0) {
            sps.push_back(true);
          }
        }
        std::vector<recompute_kind> rcs;
        if (f.recompute) {
          rcs.push_back(*f.recompute);
        } else {
          rcs = {recompute_kind::none, recompute_kind::selective, recompute_kind::full};
        }
        // Expert parallelism, out of the stage's DP·CP ranks.
        std::vector<std::uint32_t> eps;
        if (f.ep) {
          if (const std::string why = expert_parallel_refusal(job, *f.ep, dp * cp); !why.empty()) {
            if (layout_fixed) {
              fail(who, ": ", names.value("ep", *f.ep), ": ", why);
            }
            space.refusal.note(2, [&] { return concat(at, ": ", why); });
            continue;
          }
          eps.push_back(*f.ep);
        } else {
          eps = expert_parallel_degrees(job, dp * cp);
        }
        std::vector<std::pair<recompute_kind, std::uint32_t>> rc_eps;
        for (recompute_kind rc : rcs) {
          for (std::uint32_t ep : eps) {
            rc_eps.emplace_back(rc, ep);
          }
        }
        for (const generator_entry* gen : gens) {
          std::vector<std::uint32_t> vs;
          if (f.chunks) {
            vs.push_back(*f.chunks);
          } else if (gen->default_chunks == 1) {
            vs.push_back(1);
          } else {
            // One stage gains nothing from several chunks: only the default is tried there.
            for (std::uint32_t v : {2u, 3u, 4u, 6u, 8u}) {
              if (chunks_hold_layers(job, pp, v) && (pp > 1 || v == gen->default_chunks)) {
                vs.push_back(v);
              }
            }
          }
          for (std::uint32_t v : vs) {
            if (!chunks_hold_layers(job, pp, v)) {
              space.refusal.note(5, [&] {
                return concat(at, ": PP·v = ", std::uint64_t{pp} * v, " chunks for ",
                              job.model.layers, " layers: ", chunk_layers_rule);
              });
              continue;
            }
            const placed& pd = place(*gen, pp, v);
            // A partition fixes PP·v (one route's chunks with several routes): the layouts of
            // another count are not the one asked for.
            const std::uint64_t listed = pd.pl ? pd.pl->route_length() : std::uint64_t{pp} * v;
            if (f.partition.kind == partition_kind::given && listed != f.partition.layers.size()) {
              space.refusal.note(5, [&] {
                return concat(
                    at, " v", v, ": ", names.option("partition"), " lists ",
                    f.partition.layers.size(), " chunks, not ",
                    pd.pl && pd.pl->routes() > 1 ? "one route's PP = " : "PP·v = ", listed);
              });
              continue;
            }
            if (!pd.pl) {
              space.refusal.note(6, [&] {
                return concat(names.value("schedule", gen->name), " does not take ",
                              names.value("v", v), " at PP ", pp, ": ", pd.why);
              });
              continue;
            }
            const placement& pl = *pd.pl;
            for (const auto& [b, m] : batches) {
              const std::uint64_t ops = std::uint64_t{3} * pp * pl.chunks() * m;
              if (ops > max_plan_schedule_ops) {
                // Structured bindings are not captured by lambdas in clang 14: copies.
                space.refusal.note(7, [&, mb_size = b, mb_count = m] {
                  return concat(at, " v", pl.chunks(), " b", mb_size, ": PP·v·m·3 = ", pp, "·",
                                pl.chunks(), "·", mb_count, "·3 = ", ops,
                                " ops in one schedule, more than ", max_plan_schedule_ops,
                                " (max_plan_schedule_ops)");
                });
                continue;
              }
              for (bool sp : sps) {
                for (const auto& [rc, ep] : rc_eps) {
                  plan_layout lay{tp, pp, dp, v, b, m, sp, cp, ep};
                  // Groups share costs: same layout, recompute and placement.
                  std::size_t gi = space.groups.size();
                  for (std::size_t i = first_group; i < space.groups.size(); ++i) {
                    const plan_group& g = space.groups[i];
                    if (g.layout == lay && g.recompute == rc && g.pl == pl) {
                      gi = i;
                      break;
                    }
                  }
                  if (gi == space.groups.size()) {
                    plan_group g;
                    g.layout = lay;
                    g.recompute = rc;
                    g.pl = pl;
                    const auto part = partition_for(job, lay, rc, pl, f.partition);
                    if (!part) {
                      continue;
                    }
                    g.partition = *part;
                    finish_group(job, g);
                    space.groups.push_back(std::move(g));
                  }
                  space.candidates.emplace_back(gi, gen);
                }
              }
            }
          }
        }
      }
    }
  }
  // Best bound first; ties in a fixed order (group, then registry order).
  std::stable_sort(space.candidates.begin(), space.candidates.end(),
                   [&](const auto& a, const auto& b) {
                     return space.groups[a.first].time_bound < space.groups[b.first].time_bound;
                   });
  return space;
}

/// Per stage, the most forwards a generator's order for (p, v, m) holds before their backward
/// (chunk activations alive at once), from one unit-cost generation; empty when the order
/// depends on the costs or the memory limit (a searching generator; interleaved 1F1B without a
/// fixed group size, which the search lowers when it does not fit) or the shape is refused.
inline std::vector<std::uint32_t> forwards_in_flight(const generator_entry& g,
                                                     std::uint32_t p,
                                                     std::uint32_t v,
                                                     std::uint32_t m,
                                                     std::uint32_t group_size) {
  if (g.searches || (g.name == "interleaved-1f1b" && group_size == 0)) {
    return {};
  }
  generator_params gp;
  gp.stages = p;
  gp.microbatches = m;
  gp.chunks = v;
  gp.group_size = group_size;
  schedule s;
  try {
    s = g.generate_result(gp).sched;
  } catch (const invalid_argument&) {
    return {};
  }
  std::vector<std::uint32_t> out(p, 0);
  for (stage_index st = 0; st < p; ++st) {
    std::uint32_t alive = 0;
    for (const op& o : s.ops(st)) {
      if (o.kind == op_kind::forward) {
        out[st] = std::max(out[st], ++alive);
      } else if ((o.kind == op_kind::backward_input || o.kind == op_kind::backward_full) &&
                 alive > 0) {
        --alive;
      }
    }
  }
  return out;
}

/// A candidate's memory bound (docs/model.md §10): the group's, and with `in_flight`
/// (forwards_in_flight) on each stage its static memory and that many of the smallest
/// activation its chunks' forwards keep (the input alone when recomputing).
inline double candidate_memory_bound(const plan_group& g,
                                     const std::vector<std::uint32_t>& in_flight) {
  double bound = g.memory_bound;
  if (in_flight.empty()) {
    return bound;
  }
  const std::uint32_t p = g.layout.pp;
  const std::uint32_t v = g.layout.chunks;
  const shaped_memory_model m = g.costs->memory.for_shape(p, v, "plan");
  for (stage_index s = 0; s < p && s < in_flight.size(); ++s) {
    double least = std::numeric_limits<double>::infinity();
    for (chunk_index c = 0; c < v; ++c) {
      const chunk_memory cm = m.at(s, c);
      least = std::min(least, g.recompute != recompute_kind::none && cm.input > 0.0
                                  ? std::min(cm.input, cm.activation)
                                  : cm.activation);
    }
    bound = std::max(bound, m.static_memory(s) + in_flight[s] * least);
  }
  return bound;
}

/// Evaluates one candidate of `space`, re-partitioning a balanced partition that did not fit
/// within the caps its memory gives (twice at most), searching generators at the memory rungs
/// too with `rungs` (evaluate_choice). nullopt when the generator refuses, its reason in `why`
/// when given.
inline std::optional<plan_entry> evaluate_candidate(const training_job& job,
                                                    const plan_space& space,
                                                    std::size_t index,
                                                    const plan_fixed& f,
                                                    const generator_registry& registry,
                                                    std::size_t evaluations,
                                                    bool rungs,
                                                    std::string* why = nullptr) {
  const auto [gi, gen] = space.candidates[index];
  const plan_group& g = space.groups[gi];
  plan_choice choice{g.layout, gen->name, g.recompute, g.partition, f.group_size.value_or(0)};
  std::optional<plan_entry> best;
  try {
    best = evaluate_choice(job, choice, *g.costs, registry, *gen, evaluations, rungs);
  } catch (const invalid_argument& e) {
    if (why != nullptr) {
      *why = e.what();
    }
    return std::nullopt;
  }
  for (int round = 0; round < 2 && !best->fits && f.partition.kind == partition_kind::balanced;
       ++round) {
    const auto part = partition_for(job, g.layout, g.recompute, g.pl, f.partition,
                                    memory_caps(*best, g.costs->usable_memory));
    if (!part || *part == best->choice.partition) {
      break;
    }
    choice.partition = *part;
    const job_costs jc = make_job_costs(job, g.layout, g.recompute, *part, g.pl);
    try {
      plan_entry e = evaluate_choice(job, choice, jc, registry, *gen, evaluations, rungs);
      if (e.fits || e.peak_memory_bytes < best->peak_memory_bytes) {
        best = std::move(e);
      }
    } catch (const invalid_argument&) {
      break;
    }
  }
  // Interleaved 1F1B whose default group (N = PP micro-batches per round) does not fit: fewer
  // per round, N = PP/2, PP/4, ..., 1, keep fewer micro-batches in flight for some dependency
  // bubble, as Llama 3 ran it (arXiv 2407.21783 §3.3.2). The largest N that fits is kept (a
  // smaller one only adds bubble); none fitting, the one nearest to fitting.
  if (!best->fits && !f.group_size && gen->name == "interleaved-1f1b" && g.layout.chunks > 1) {
    const plan_choice base = best->choice;
    const job_costs jc = base.partition == g.partition
                             ? *g.costs
                             : make_job_costs(job, g.layout, g.recompute, base.partition, g.pl);
    for (std::uint32_t n = g.layout.pp / 2; n >= 1; n /= 2) {
      plan_choice c = base;
      c.group_size = n;
      try {
        plan_entry e = evaluate_choice(job, c, jc, registry, *gen, evaluations, rungs);
        const bool fits = e.fits;
        if (fits || e.peak_memory_bytes < best->peak_memory_bytes) {
          best = std::move(e);
        }
        if (fits) {
          break;
        }
      } catch (const invalid_argument&) {
        break;
      }
    }
  }
  return best;
}

/// The plans of `f`: search (or, evaluates_one(), the one layout at its best). With
/// `keep_misfit`, nothing is skipped for memory and the plan nearest to fitting is kept when
/// none fits. Throws invalid_argument, in `names`' words, when no layout of `f` can run.
inline plan_result run_plan(const training_job& job,
                            const plan_fixed& f,
                            const plan_options& opts,
                            const generator_registry& registry,
                            const choice_names& names = {},
                            bool keep_misfit = false) {
  const auto t0 = std::chrono::steady_clock::now();
  check_fixed(job, f, names);
  plan_space space = enumerate_space(job, f, registry, names);
  if (space.candidates.empty()) {
    fail(names.who(), ": no layout can run this job: ",
         space.refusal.why.empty() ? "no candidate" : space.refusal.why);
  }
  plan_result res;
  res.stats.candidates = space.candidates.size();
  const bool one = f.evaluates_one();
  keep_misfit = keep_misfit || one;
  const std::size_t keep = one ? 1 : std::max<std::size_t>(1, opts.top);
  const double usable = job.cluster.usable_memory();
  std::vector<plan_entry> evaluated;
  double smallest_need = std::numeric_limits<double>::infinity();
  // The K-th best fitting step time so far: a candidate whose bound is above it cannot enter.
  auto threshold = [&] {
    // Distinct plans only: the same order under two names (zb-1p, zb-auto) is one plan, and
    // counting it twice would cut candidates the final list needs. Plans of one layout and
    // step time count once (never more candidates cut than that).
    std::vector<double> times;
    std::vector<std::tuple<plan_layout, recompute_kind, double>> seen;
    for (const plan_entry& e : evaluated) {
      const auto key = std::make_tuple(e.choice.layout, e.choice.recompute, e.step_time_s);
      if (e.fits && std::find(seen.begin(), seen.end(), key) == seen.end()) {
        seen.push_back(key);
        times.push_back(e.step_time_s);
      }
    }
    if (times.size() < keep) {
      return std::numeric_limits<double>::infinity();
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(keep - 1),
                     times.end());
    return times[keep - 1];
  };
  unsigned threads = opts.threads != 0 ? opts.threads : std::thread::hardware_concurrency();
  threads = std::max(1u, threads);
  // Batches of candidates, in bound order; the threshold moves between batches only, so which
  // candidates run never depends on the threads' timing.
  std::size_t next = 0;
  const std::size_t n = space.candidates.size();
  std::string first_refusal;
  // Forwards in flight per (generator, p, v, m): a hand-crafted order's count fixes its
  // activations whatever the costs, so a candidate whose count cannot fit is never generated.
  std::map<std::tuple<std::string, std::uint32_t, std::uint32_t, std::uint32_t>,
           std::vector<std::uint32_t>>
      in_flight;
  auto memory_bound_of = [&](std::size_t i) {
    const auto& [gi, gen] = space.candidates[i];
    const plan_group& g = space.groups[gi];
    if (g.memory_bound > usable * (1.0 + 1e-9)) {
      return g.memory_bound;
    }
    const auto key =
        std::make_tuple(gen->name, g.layout.pp, g.layout.chunks, g.layout.microbatches);
    auto it = in_flight.find(key);
    if (it == in_flight.end()) {
      it = in_flight
               .emplace(key, forwards_in_flight(*gen, g.layout.pp, g.layout.chunks,
                                                g.layout.microbatches, f.group_size.value_or(0)))
               .first;
    }
    return candidate_memory_bound(g, it->second);
  };
  while (next < n) {
    const double limit = threshold();
    std::vector<std::size_t> batch;
    while (next < n && batch.size() < std::max<std::size_t>(threads, 2)) {
      const plan_group& g = space.groups[space.candidates[next].first];
      const double memory_bound =
          opts.prune && !keep_misfit ? memory_bound_of(next) : g.memory_bound;
      if (opts.prune && !keep_misfit && memory_bound > usable * (1.0 + 1e-9)) {
        ++res.stats.pruned_memory;
        smallest_need = std::min(smallest_need, memory_bound);
      } else if (opts.prune && !one && g.time_bound > limit * (1.0 + 1e-12)) {
        ++res.stats.pruned_time;
      } else {
        batch.push_back(next);
      }
      ++next;
    }
    std::vector<std::optional<plan_entry>> out(batch.size());
    std::vector<std::string> why(batch.size());
    std::atomic<std::size_t> cursor{0};
    auto work = [&] {
      for (std::size_t i = cursor++; i < batch.size(); i = cursor++) {
        // Every candidate is evaluated the same way, searched or asked for alone (the memory
        // rungs included): the best of a search is then never slower than a layout it covers,
        // and which candidates the bounds skip can never change the best (docs/model.md §10).
        out[i] = evaluate_candidate(job, space, batch[i], f, registry, opts.search_evaluations,
                                    true, &why[i]);
      }
    };
    // The first exception is rethrown; the others stop taking candidates.
    run_parallel(static_cast<unsigned>(std::min<std::size_t>(threads, batch.size())), work,
                 [&] { cursor = batch.size(); });
    for (std::size_t i = 0; i < out.size(); ++i) {
      std::optional<plan_entry>& e = out[i];
      if (!e) {
        ++res.stats.failed;
        if (first_refusal.empty()) {
          first_refusal = why[i];  // in candidate order, whatever the threads did
        }
        continue;
      }
      ++res.stats.evaluated;
      if (!e->fits) {
        smallest_need = std::min(smallest_need, e->peak_memory_bytes);
      }
      evaluated.push_back(std::move(*e));
    }
  }
  std::sort(evaluated.begin(), evaluated.end(),
            [&](const plan_entry& a, const plan_entry& b) { return better_plan(a, b, registry); });
  // The same order under two names (zb-1p and zb-auto when their limits agree) is one plan.
  std::vector<plan_entry> distinct;
  for (plan_entry& e : evaluated) {
    const bool seen = std::any_of(distinct.begin(), distinct.end(), [&](const plan_entry& d) {
      return d.choice.layout == e.choice.layout && d.choice.recompute == e.choice.recompute &&
             d.choice.partition == e.choice.partition && d.sched == e.sched;
    });
    if (!seen) {
      distinct.push_back(std::move(e));
    }
  }
  evaluated = std::move(distinct);
  // The frontier: no evaluated plan is both faster and smaller.
  res.frontier = plan_frontier(evaluated);
  for (plan_entry& e : evaluated) {
    if (res.plans.size() == keep || (!e.fits && !keep_misfit)) {
      break;
    }
    res.plans.push_back(std::move(e));
  }
  if (res.plans.empty() || !res.plans.front().fits) {
    res.smallest_need_bytes = std::isfinite(smallest_need) ? smallest_need : 0.0;
  }
  if (res.stats.evaluated == 0 && res.stats.pruned_memory == 0) {
    // The generator's own rule (dualpipev's m >= 2p, ...) is what the user can change.
    if (res.stats.candidates == 1) {
      fail(names.who(), ": the layout's schedule cannot be generated: ", first_refusal);
    }
    fail(names.who(), ": every one of the ", res.stats.candidates,
         " candidates was refused by its generator (the first: ", first_refusal, ")");
  }
  const plan_group& g0 = space.groups[space.candidates.front().first];
  res.global_batch = g0.layout.dp * g0.layout.microbatches * g0.layout.micro_batch;
  res.stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace detail

}  // namespace pipesched
