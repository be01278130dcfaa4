#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "pipesched/gen/registry.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/plan/planner.hpp"

// What a front end asks the planner, as the user gave it (`pipesched plan`, pipesched.plan()):
// the job with its optional parts, and the choices fixed or left to the search. One place
// turns it into a training_job and plan_options, with the rules and the messages, so the CLI
// and Python say the same thing.

namespace pipesched {

struct plan_request {
  transformer_spec model;
  cluster_spec cluster;
  std::optional<std::uint64_t> gpus;  ///< default: tp·pp·dp when all three are fixed
  std::uint64_t sequence = 0;
  std::optional<std::uint64_t> global_batch;         ///< sequences per step
  std::optional<std::uint64_t> global_batch_tokens;  ///< tokens per step, a multiple of sequence
  optimizer_sharding sharding = optimizer_sharding::optimizer;
  std::optional<std::uint32_t> vocab_multiple;
  std::optional<double> achieved_fraction;  ///< overrides the cluster's
  std::optional<double> usable_fraction;    ///< overrides the cluster's
  std::optional<attention_kind> attention;  ///< overrides the model's
  bool memory_efficient_norm = false;       ///< true: sets the model's (false leaves it)
  activation_model activations = activation_model::tensors;
  bool overlap_grad_reduce = true;                ///< training_job::overlap_grad_reduce
  bool blocking_p2p = false;                      ///< training_job::blocking_p2p
  std::uint32_t gradient_reduce_bytes = 4;        ///< training_job::gradient_reduce_bytes
  tp_overlap tp_comm_overlap = tp_overlap::none;  ///< training_job::tp_comm_overlap
  bool gradient_accumulation_fusion = true;       ///< training_job::gradient_accumulation_fusion
  double moe_imbalance = 1.0;                     ///< training_job::moe_imbalance
  plan_options options;
};

/// Sets one choice of `f` by name, from text (the CLI's --baseline items, the keys of
/// Python's baseline dict): tp, cp, pp, ep, dp, v, micro-batch, microbatches, schedule,
/// recompute, sp (on / off), partition. Throws invalid_argument naming `who`, the key and the rule,
/// also for a choice `f` holds already (a key given twice).
inline void set_plan_choice(plan_fixed& f,
                            std::string_view key,
                            std::string_view value,
                            std::string_view who) {
  auto once = [&](const auto& slot) {
    if (slot) {
      detail::fail(who, ": ", key, " is given twice (", key, "=", *slot, " and ", key, "=", value,
                   ")");
    }
  };
  auto once_recompute = [&] {
    if (f.recompute) {
      detail::fail(who, ": recompute is given twice (recompute=", to_string(*f.recompute),
                   " and recompute=", value, ")");
    }
  };
  auto once_sp = [&] {
    if (f.sequence_parallel) {
      detail::fail(who, ": sp is given twice (sp=", *f.sequence_parallel ? "on" : "off",
                   " and sp=", value, ")");
    }
  };
  auto count = [&]() -> std::uint64_t {
    if (value.empty() || value.size() > 15 ||
        value.find_first_not_of("0123456789") != std::string_view::npos) {
      detail::fail(who, ": ", key, " must be a whole number, not \"", value, "\"");
    }
    std::uint64_t n = 0;
    for (char c : value) {
      n = n * 10 + static_cast<std::uint64_t>(c - '0');
    }
    if (n == 0 || n > 0xffffffffu) {
      detail::fail(who, ": ", key, " must be between 1 and 4294967295, not ", n);
    }
    return n;
  };
  if (key == "tp") {
    once(f.tp);
    f.tp = static_cast<std::uint32_t>(count());
  } else if (key == "pp") {
    once(f.pp);
    f.pp = static_cast<std::uint32_t>(count());
  } else if (key == "cp") {
    once(f.cp);
    f.cp = static_cast<std::uint32_t>(count());
  } else if (key == "ep") {
    once(f.ep);
    f.ep = static_cast<std::uint32_t>(count());
  } else if (key == "dp") {
    once(f.dp);
    f.dp = count();
  } else if (key == "v") {
    once(f.chunks);
    f.chunks = static_cast<std::uint32_t>(count());
  } else if (key == "micro-batch" || key == "micro_batch") {
    once(f.micro_batch);
    f.micro_batch = static_cast<std::uint32_t>(count());
  } else if (key == "microbatches") {
    once(f.microbatches);
    f.microbatches = static_cast<std::uint32_t>(count());
  } else if (key == "schedule") {
    once(f.schedule);
    f.schedule = std::string(value);
  } else if (key == "recompute") {
    once_recompute();
    f.recompute = recompute_kind_named(value, detail::concat(who, ": recompute"));
  } else if (key == "sp") {
    once_sp();
    if (value != "on" && value != "off") {
      detail::fail(who, ": sp must be on or off, not \"", value, "\"");
    }
    f.sequence_parallel = value == "on";
  } else if (key == "partition") {
    const auto p = parse_partition(value);
    if (!p) {
      detail::fail(who, ": partition must be even, balanced or layers per chunk L1,L2,..., not \"",
                   value, "\"");
    }
    f.partition = *p;
  } else {
    detail::fail(
        who, ": unknown key \"", key,
        "\" (known: tp, cp, pp, ep, dp, v, micro-batch, microbatches, schedule, recompute, "
        "sp, partition)");
  }
}

/// The choices of a "tp=8,pp=16,schedule=interleaved-1f1b[,...,partition=L1,L2,...]" text (the
/// CLI's --baseline, Python's baseline= as text), each item set by set_plan_choice; a
/// partition list is the last item (its commas are its own). Throws invalid_argument naming
/// `who` for an empty text, an item without "=" and a key given twice.
inline plan_fixed parse_plan_choices(std::string_view text, std::string_view who) {
  if (text.empty()) {
    detail::fail(who,
                 ": give key=value choices (e.g. tp=8,pp=16,schedule=1f1b), not an empty "
                 "text");
  }
  plan_fixed f;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t end = text.compare(pos, 10, "partition=") == 0 ? text.size() : text.find(',', pos);
    end = end == std::string_view::npos ? text.size() : end;
    const std::string_view item = text.substr(pos, end - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      detail::fail(who, ": expected key=value items separated by commas, got \"", item, "\"");
    }
    set_plan_choice(f, item.substr(0, eq), item.substr(eq + 1), who);
    pos = end + 1;
  }
  return f;
}

/// The job `r` describes. Throws invalid_argument naming the field: gpus missing (and not
/// tp·pp·dp), zero sizes, both batch forms or a token count that is not whole sequences, a
/// fraction outside (0, 1].
inline training_job job_of(const plan_request& r) {
  training_job job;
  job.model = r.model;
  job.cluster = r.cluster;
  auto fraction = [](std::optional<double> v, const char* field, double& out) {
    if (!v) {
      return;
    }
    if (!(*v > 0.0 && *v <= 1.0)) {
      detail::fail("plan: ", field, " must be in (0, 1], got ", detail::shortest(*v));
    }
    out = *v;
  };
  fraction(r.achieved_fraction, "achieved_fraction", job.cluster.achieved_fraction);
  fraction(r.usable_fraction, "usable_fraction", job.cluster.usable_fraction);
  const plan_fixed& f = r.options.fixed;
  if (r.gpus) {
    job.gpus = *r.gpus;
  } else if (f.tp && f.pp && f.dp) {
    job.gpus = std::uint64_t{*f.tp} * f.cp.value_or(1) * *f.pp * *f.dp;
  } else {
    detail::fail("plan: gpus must be given unless tp, pp and dp all are");
  }
  if (job.gpus == 0) {
    detail::fail("plan: gpus must be at least 1");
  }
  if (r.sequence == 0) {
    detail::fail("plan: seq (tokens per sequence) must be at least 1");
  }
  job.sequence = r.sequence;
  if (r.global_batch && r.global_batch_tokens) {
    detail::fail("plan: give global_batch or global_batch_tokens, not both");
  }
  if (r.global_batch) {
    if (*r.global_batch == 0) {
      detail::fail("plan: global_batch must be at least 1");
    }
    job.global_batch = *r.global_batch;
  }
  if (r.global_batch_tokens) {
    const std::uint64_t k = *r.global_batch_tokens;
    if (k == 0 || k % r.sequence != 0) {
      detail::fail("plan: global_batch_tokens (", k, ") must be a positive multiple of seq (",
                   r.sequence, ")");
    }
    job.global_batch = k / r.sequence;
  }
  job.sharding = r.sharding;
  if (r.attention) {
    job.model.attention = *r.attention;
  }
  job.model.memory_efficient_norm = job.model.memory_efficient_norm || r.memory_efficient_norm;
  job.activations = r.activations;
  job.overlap_grad_reduce = r.overlap_grad_reduce;
  job.blocking_p2p = r.blocking_p2p;
  job.gradient_reduce_bytes = r.gradient_reduce_bytes;
  job.tp_comm_overlap = r.tp_comm_overlap;
  job.gradient_accumulation_fusion = r.gradient_accumulation_fusion;
  job.moe_imbalance = r.moe_imbalance;
  if (r.vocab_multiple) {
    if (*r.vocab_multiple == 0) {
      detail::fail("plan: vocab_multiple must be at least 1");
    }
    job.vocab_multiple = *r.vocab_multiple;
  }
  if (r.options.top == 0) {
    detail::fail("plan: top must be at least 1");
  }
  job.check("plan");
  return job;
}

/// A local-search budget given (plan_options::search_evaluations) must reach a schedule that
/// searches: throws invalid_argument when the plan's schedule, and the baseline's, are fixed to
/// ones that do not (1f1b searches no order: the budget would change nothing).
inline void check_search_evaluations_apply(const plan_options& o,
                                           const generator_registry& registry) {
  auto searches = [&](const plan_fixed& f) {
    return !f.schedule || registry.at(*f.schedule).searches;
  };
  if (searches(o.fixed) || (o.baseline && searches(*o.baseline))) {
    return;
  }
  std::string names;
  for (const generator_entry& e : registry.entries()) {
    if (e.searches) {
      names += (names.empty() ? "" : ", ") + e.name;
    }
  }
  detail::fail("plan: search_evaluations is only meaningful for a schedule that searches (", names,
               "); ", *o.fixed.schedule,
               o.baseline ? detail::concat(" and the baseline's ", *o.baseline->schedule) : "",
               o.baseline && *o.baseline->schedule != *o.fixed.schedule ? " do not" : " does not");
}

/// plan(job_of(r), r.options).
inline plan_result plan(const plan_request& r) {
  return plan(job_of(r), r.options);
}

}  // namespace pipesched
