#pragma once

// A small planner run shared by the io tests of the plan (computed once per test binary), and
// the random small jobs the search's property tests draw.
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

#include <pipesched/plan/planner.hpp>

namespace test_plan {

/// Llama 3 8B on H100s: the job most plan tests start from.
inline pipesched::training_job llama3_8b_job(std::uint64_t gpus,
                                             std::uint64_t sequence,
                                             std::uint64_t global_batch) {
  pipesched::training_job j;
  j.model = pipesched::model_preset("llama3-8b");
  j.cluster = pipesched::cluster_preset("h100-sxm-80gb");
  j.gpus = gpus;
  j.sequence = sequence;
  j.global_batch = global_batch;
  return j;
}

inline const pipesched::training_job& small_job() {
  static const pipesched::training_job job = llama3_8b_job(64, 8192, 64);
  return job;
}

/// The search with a baseline (TP 8, PP 2, 1F1B, its other choices searched).
inline const pipesched::plan_result& small_plan() {
  static const pipesched::plan_result r = [] {
    pipesched::plan_options o;
    o.top = 3;
    o.threads = 1;
    pipesched::plan_fixed base;
    base.tp = 8;
    base.pp = 2;
    base.schedule = "1f1b";
    base.micro_batch = 1;
    o.baseline = base;
    return pipesched::plan(small_job(), o);
  }();
  return r;
}

/// A small random job (a few layers, a few GPUs, a memory that binds), from `rng`: small
/// enough that the planner's space is searched in full in well under a second.
inline pipesched::training_job random_small_job(std::mt19937& rng) {
  using namespace pipesched;
  auto pick = [&](std::initializer_list<std::uint64_t> xs) {
    std::vector<std::uint64_t> v(xs);
    return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
  };
  training_job job;
  transformer_spec& t = job.model;
  t.name = "random";
  t.layers = static_cast<std::uint32_t>(pick({4, 6, 8}));
  t.hidden = pick({256, 512});
  t.ffn = 4 * t.hidden;
  t.heads = 8;
  t.kv_heads = static_cast<std::uint32_t>(pick({4, 8}));
  t.vocab = pick({4096, 8192});
  t.mlp = pick({0, 1}) == 0 ? mlp_kind::gelu : mlp_kind::swiglu;
  job.cluster = cluster_preset("h100-sxm-80gb");
  job.cluster.name = "random";
  job.cluster.gpus_per_node = static_cast<std::uint32_t>(pick({2, 4, 8}));
  job.cluster.memory_bytes = std::uniform_real_distribution<double>(0.15e9, 1.5e9)(rng);
  job.cluster.usable_fraction = 0.05 * static_cast<double>(pick({12, 14, 16, 18}));
  job.cluster.inter_node_bandwidth = std::uniform_real_distribution<double>(1e9, 50e9)(rng);
  job.cluster.inter_node_latency = std::uniform_real_distribution<double>(1e-6, 1e-3)(rng);
  job.cluster.achieved_fraction = 0.05 * static_cast<double>(pick({6, 10, 14}));
  job.gpus = pick({4, 8});
  job.sequence = pick({512, 1024});
  job.global_batch = pick({8, 16});
  return job;
}

}  // namespace test_plan
