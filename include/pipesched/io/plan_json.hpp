#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/io/job_spec_json.hpp"
#include "pipesched/io/json.hpp"
#include "pipesched/plan/plan_types.hpp"

// The planner's files (docs/formats.md, "Plans"): the plan JSON it writes and the map of
// pipeline stages to ranks and layers a launcher reads; the model and cluster JSON it reads are
// in io/job_spec_json.hpp.

namespace pipesched {

inline constexpr int plan_json_version = 1;

/// One plan as JSON: its layout, schedule, recompute, whether it fits, its time and rates (SI
/// units in the key: seconds, bytes) and per stage its layers and memory parts.
/// `{"gemm": s, "attention": s, "memory_bound": s, "communication": s}`.
inline nlohmann::json kind_seconds_to_json(const kind_seconds& k) {
  nlohmann::json j = nlohmann::json::object();
  for (time_kind t :
       {time_kind::gemm, time_kind::attention, time_kind::memory_bound, time_kind::communication}) {
    j[std::string(to_string(t))] = k[t];
  }
  return j;
}

/// One layer's op times for a layout (`plan --layer-times`, docs/formats.md): each op's
/// seconds, by kind, and its kernels with their FLOPs, bytes and seconds.
inline nlohmann::json layer_times_to_json(const training_job& job,
                                          const plan_layout& lay,
                                          recompute_kind recompute) {
  const job_op_times ot = op_times_of(job, lay, recompute);
  const layer_kernel_times kt = layer_kernel_times_of(job, lay, recompute);
  auto kernels = [](const std::vector<timed_kernel>& v) {
    nlohmann::json a = nlohmann::json::array();
    for (const timed_kernel& t : v) {
      const char* kind = t.k.kind == kernel_kind::gemm           ? "gemm"
                         : t.k.kind == kernel_kind::attention    ? "attention"
                         : t.k.kind == kernel_kind::memory_bound ? "memory_bound"
                                                                 : "communication";
      a.push_back({{"name", std::string(t.k.name)},
                   {"kind", kind},
                   {"flops", t.k.flops},
                   {"bytes", t.k.bytes},
                   {"seconds", t.seconds}});
    }
    return a;
  };
  return {{"model", job.model.name},
          {"gpu", job.cluster.name},
          {"layout",
           {{"tp", lay.tp},
            {"cp", lay.cp},
            {"ep", lay.ep},
            {"micro_batch", lay.micro_batch},
            {"sequence_parallel", lay.sequence_parallel}}},
          {"recompute", std::string(to_string(recompute))},
          {"forward_s", ot.layer.forward},
          {"backward_input_s", ot.layer.backward_input},
          {"backward_weight_s", ot.layer.backward_weight},
          {"recompute_s", ot.layer_recompute},
          {"seconds_by_kind",
           {{"forward", kind_seconds_to_json(ot.layer_kinds.forward)},
            {"backward_input", kind_seconds_to_json(ot.layer_kinds.backward_input)},
            {"backward_weight", kind_seconds_to_json(ot.layer_kinds.backward_weight)},
            {"recompute", kind_seconds_to_json(ot.layer_kinds.recompute)}}},
          {"kernels",
           {{"forward", kernels(kt.forward)},
            {"backward_input", kernels(kt.backward_input)},
            {"backward_weight", kernels(kt.backward_weight)},
            {"recompute", kernels(kt.recompute)}}}};
}

inline nlohmann::json plan_entry_to_json(const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  nlohmann::json j{{"layout",
                    {{"tp", l.tp},
                     {"pp", l.pp},
                     {"dp", l.dp},
                     {"v", l.chunks},
                     {"micro_batch", l.micro_batch},
                     {"microbatches", l.microbatches},
                     {"sequence_parallel", l.sequence_parallel},
                     {"cp", l.cp},
                     {"ep", l.ep}}},
                   {"schedule", e.choice.schedule},
                   {"recompute", std::string(to_string(e.choice.recompute))},
                   {"fits", e.fits},
                   {"step_time_s", e.step_time_s},
                   {"makespan_s", e.makespan_s},
                   {"dp_exposed_s", e.dp_exposed_s},
                   {"optimizer_s", e.optimizer_s},
                   {"tokens_per_s", e.tokens_per_s},
                   {"tflops_per_gpu", e.tflops_per_gpu},
                   {"mfu", e.mfu},
                   {"bubble_rate", e.bubble_rate},
                   {"flops_per_iteration", e.flops_per_iteration},
                   {"peak_memory_bytes", e.peak_memory_bytes},
                   {"partition", e.choice.partition},
                   {"stages", nlohmann::json::array()}};
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    const plan_stage& st = e.stages[s];
    j["stages"].push_back({{"stage", s},
                           {"chunks", st.chunks},
                           {"layers", st.layers},
                           {"embedding", st.embedding},
                           {"head", st.head},
                           {"busy_s", st.busy_s},
                           {"seconds_by_kind", kind_seconds_to_json(st.seconds_by_kind)},
                           {"optimizer_s", st.optimizer_s},
                           {"parameters",
                            {{"layers", st.parameters.layers},
                             {"experts", st.parameters.experts},
                             {"embedding", st.parameters.embedding},
                             {"head", st.parameters.head}}},
                           {"memory_bytes",
                            {{"weights", st.statics.weights},
                             {"gradients", st.statics.gradients},
                             {"optimizer", st.statics.optimizer},
                             {"activations", st.activations},
                             {"total", st.total}}}});
  }
  // Interleaved 1F1B's micro-batches per round of the virtual stages (N; PP by default).
  if (e.choice.schedule == "interleaved-1f1b") {
    j["group_size"] = e.choice.group_size == 0 ? l.pp : e.choice.group_size;
  }
  return j;
}

/// The plan document (schema v1, docs/formats.md): the job, the plans best first, the
/// baseline with the comparison, the Pareto frontier and what the search did.
inline nlohmann::json plan_to_json(const training_job& job, const plan_result& r) {
  nlohmann::json j{{"version", plan_json_version},
                   {"model", job.model.name},
                   {"gpu", job.cluster.name},
                   {"gpus", job.gpus},
                   {"sequence", job.sequence},
                   {"global_batch", r.global_batch},
                   {"tokens_per_step", r.global_batch * job.sequence},
                   {"optimizer_sharding", std::string(to_string(job.sharding))},
                   {"usable_memory_bytes", job.cluster.usable_memory()},
                   {"plans", nlohmann::json::array()},
                   {"frontier", nlohmann::json::array()},
                   {"search",
                    {{"candidates", r.stats.candidates},
                     {"evaluated", r.stats.evaluated},
                     {"pruned_memory", r.stats.pruned_memory},
                     {"pruned_time", r.stats.pruned_time},
                     {"failed", r.stats.failed},
                     {"seconds", r.stats.seconds}}}};
  for (const plan_entry& e : r.plans) {
    j["plans"].push_back(plan_entry_to_json(e));
  }
  for (const plan_frontier_point& f : r.frontier) {
    j["frontier"].push_back({{"step_time_s", f.step_time_s},
                             {"peak_memory_bytes", f.peak_memory_bytes},
                             {"fits", f.fits},
                             {"label", f.label}});
  }
  auto baseline = [&](const plan_entry& e) {
    nlohmann::json b = plan_entry_to_json(e);
    if (!r.plans.empty()) {
      const plan_comparison c = compare_plans(r.plans.front(), e, job.gpus);
      b["speedup"] = c.speedup;
      b["time_saved"] = c.time_saved;
      b["gpus_recovered"] = c.gpus_recovered;
    }
    return b;
  };
  if (r.baseline) {
    j["baseline"] = baseline(*r.baseline);
  }
  if (!r.other_baselines.empty()) {
    j["other_baselines"] = nlohmann::json::array();
    for (const plan_entry& e : r.other_baselines) {
      j["other_baselines"].push_back(baseline(e));
    }
  }
  if (r.smallest_need_bytes > 0.0) {
    j["smallest_need_bytes"] = r.smallest_need_bytes;
  }
  return j;
}

/// Which ranks run which pipeline stage, and which layers each of its chunks holds, in the rank
/// order of job_costs.hpp (tensor parallelism fastest, then context, then data, then pipeline:
/// rank = t + TP·(c + CP·(d + DP·s))). Layers are numbered 0 .. L−1 in model order.
inline nlohmann::json plan_map_to_json(const training_job& job, const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  // Layers in model order along each route (DualPipe's two routes each hold the whole model).
  const placement& pl = e.sched.layout();
  const std::size_t n = e.choice.partition.size();
  const bool routes = pl.routes() > 1 && pl.total_chunks() == n;
  auto is_first = [&](std::size_t g) {
    return routes ? pl.is_first(static_cast<global_chunk>(g)) : g == 0;
  };
  auto is_last = [&](std::size_t g) {
    return routes ? pl.is_last(static_cast<global_chunk>(g)) : g + 1 == n;
  };
  std::vector<std::uint32_t> first(n, 0);
  for (std::size_t g = 1; g < n; ++g) {
    first[g] = is_last(g - 1) ? 0 : first[g - 1] + e.choice.partition[g - 1];
  }
  nlohmann::json j{{"version", plan_json_version},
                   {"model", job.model.name},
                   {"schedule", e.choice.schedule},
                   {"rank_order", "tp, cp, dp, pp (rank = t + tp*(c + cp*(d + dp*stage)))"},
                   {"tp", l.tp},
                   {"cp", l.cp},
                   {"pp", l.pp},
                   {"dp", l.dp},
                   {"ep", l.ep},
                   {"v", l.chunks},
                   {"stages", nlohmann::json::array()}};
  const std::uint64_t per_stage = std::uint64_t{l.tp} * l.cp * l.dp;
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    const plan_stage& st = e.stages[s];
    nlohmann::json chunks = nlohmann::json::array();
    for (global_chunk g : st.chunks) {
      // A chunk of no layer (an end holding only the embedding or the head) lists none.
      nlohmann::json layers = nlohmann::json::array();
      if (e.choice.partition[g] > 0) {
        layers = {first[g], first[g] + e.choice.partition[g] - 1};
      }
      chunks.push_back({{"global_chunk", g},
                        {"layers", std::move(layers)},
                        {"embedding", is_first(g)},
                        {"head", is_last(g)}});
    }
    j["stages"].push_back({{"stage", s},
                           {"ranks", {{"first", s * per_stage}, {"count", per_stage}}},
                           {"chunks", std::move(chunks)}});
  }
  return j;
}

}  // namespace pipesched
