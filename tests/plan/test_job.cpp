#include <catch2/catch.hpp>

#include <pipesched/plan/job.hpp>

using namespace pipesched;

TEST_CASE("job: model presets have the published dimensions", "[plan][job]") {
  const transformer_spec& l405 = model_preset("llama3-405b");
  CHECK(l405.layers == 126);
  CHECK(l405.hidden == 16384);
  CHECK(l405.ffn == 53248);
  CHECK(l405.heads == 128);
  CHECK(l405.kv_heads == 8);
  CHECK(l405.vocab == 128256);
  CHECK(l405.mlp == mlp_kind::swiglu);
  CHECK(l405.norm == norm_kind::rmsnorm);
  CHECK_FALSE(l405.tied_embeddings);
  CHECK(model_preset("llama3-70b").layers == 80);
  CHECK(model_preset("llama3-8b").ffn == 14336);
  const transformer_spec& gpt = model_preset("gpt3-175b");
  CHECK(gpt.hidden == 12288);
  CHECK(gpt.heads == 96);
  CHECK(gpt.kv() == 96);
  CHECK(gpt.tied_embeddings);
  for (const transformer_spec& t : model_presets()) {
    CHECK_NOTHROW(t.check());
  }
  CHECK_THROWS_WITH(model_preset("llama9"),
                    "unknown model \"llama9\" (presets: llama3-8b, llama3-70b, llama3-405b, "
                    "gpt3-175b, or a model JSON file)");
}

TEST_CASE("job: cluster presets and their checks", "[plan][job]") {
  const cluster_spec& h = cluster_preset("h100-sxm-80gb");
  CHECK(h.memory_bytes == 80.0 * 1024 * 1024 * 1024);
  CHECK(h.usable_memory() == h.memory_bytes * h.usable_fraction);
  CHECK(h.peak_flops(2) == 989.4e12);
  CHECK(h.peak_flops(1) == 1978.9e12);
  CHECK(cluster_preset("a100-sxm-80gb").peak_flops(2) == 312e12);
  for (const cluster_spec& c : cluster_presets()) {
    CHECK_NOTHROW(c.check());
  }
  cluster_spec bad = h;
  bad.usable_fraction = 1.5;
  CHECK_THROWS_WITH(bad.check("c"), "c: usable_fraction: must be at most 1, not 1.5");
  bad = h;
  bad.inter_node_bandwidth = 0;
  CHECK_THROWS_WITH(bad.check("c"), "c: inter_node_bandwidth: must be finite and > 0, not 0");
  CHECK_THROWS_WITH(cluster_preset("tpu"), Catch::Contains("unknown GPU \"tpu\""));
}

TEST_CASE("job: check names the field", "[plan][job]") {
  training_job job;
  job.model = model_preset("llama3-8b");
  job.cluster = cluster_preset("a100-sxm-80gb");
  job.gpus = 8;
  job.sequence = 4096;
  CHECK_NOTHROW(job.check());
  job.model.activation_bytes = 1;
  CHECK_THROWS_WITH(job.check(), Catch::Contains("has no fp8 peak"));
  job.model.activation_bytes = 2;
  job.sequence = 0;
  CHECK_THROWS_WITH(job.check(), "plan: sequence (tokens per sequence) must be at least 1");
  job.sequence = 1;
  job.gpus = 0;
  CHECK_THROWS_WITH(job.check(), "plan: gpus must be at least 1");
  job.gpus = max_plan_gpus + 1;
  CHECK_THROWS_WITH(job.check(), "plan: gpus (16777217) must be at most 16777216 (max_plan_gpus)");
  job.gpus = 8;
  job.sequence = 4096;
  job.global_batch = max_plan_step_tokens / 4096 + 1;
  CHECK_THROWS_WITH(job.check(),
                    "plan: the global batch (1048577 sequences of 4096 tokens) must "
                    "be at most 4294967296 tokens per step (max_plan_step_tokens)");
  job.global_batch = max_plan_step_tokens / 4096;
  CHECK_NOTHROW(job.check());
  CHECK(to_string(optimizer_sharding::weights) == "weights");
}

TEST_CASE("job: op times are finite and > 0 at the cluster's rate", "[plan][job]") {
  training_job job;
  job.model = model_preset("llama3-8b");
  job.cluster = cluster_preset("h100-sxm-80gb");
  job.gpus = 8;
  job.sequence = 4096;
  job.global_batch = 64;
  CHECK_NOTHROW(job.check());
  job.cluster.peak_flops_bf16 = 1e-300;  // a step's work would be inf seconds
  job.cluster.achieved_fraction = 1.0;
  CHECK_THROWS_WITH(job.check(),
                    "plan: peak_flops_bf16 (1e-300 FLOP/s) × achieved_fraction (1) "
                    "makes the layers' work of one step take more seconds than a "
                    "double holds: the op times must be finite and > 0");
  job.cluster.peak_flops_bf16 = 989.4e12;
  job.cluster.achieved_fraction = 1e-320;
  CHECK_THROWS_WITH(job.check(), Catch::Contains("more seconds than a double holds"));
  job.cluster.achieved_fraction = 1.0;
  job.cluster.peak_flops_bf16 = 1e308;  // one weight gradient would be 0 s
  job.cluster.gemm_efficiency = {};
  job.sequence = 1;
  job.model.hidden = 1;
  job.model.ffn = 1;
  job.model.heads = 1;
  job.model.kv_heads = 1;
  CHECK_THROWS_WITH(job.check(), Catch::Contains("take 0 s"));
}
