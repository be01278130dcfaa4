#include <catch2/catch.hpp>

#include <pipesched/plan/job.hpp>
#include <pipesched/plan/job_costs.hpp>

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
                    "gpt3-175b, deepseek-v3, mixtral-8x7b, or a model JSON file)");
}

TEST_CASE("job: the deepseek-v3 preset has the paper's dimensions and parameters", "[plan][job]") {
  const transformer_spec& t = model_preset("deepseek-v3");
  // arXiv 2412.19437 §4.2 and the published config.json.
  CHECK(t.layers == 61);
  CHECK(t.hidden == 7168);
  CHECK(t.heads == 128);
  CHECK(t.vocab == 129280);
  CHECK(t.ffn == 18432);
  CHECK(t.experts == 256);
  CHECK(t.top_k == 8);
  CHECK(t.shared_experts == 1);
  CHECK(t.expert_ffn == 2048);
  CHECK(t.dense_layers == 3);
  CHECK(t.mla);
  CHECK(t.q_lora_rank == 1536);
  CHECK(t.kv_lora_rank == 512);
  CHECK(t.qk_nope_head_dim == 128);
  CHECK(t.qk_rope_head_dim == 64);
  CHECK(t.v_head_dim == 128);
  const std::uint64_t v = padded_vocab(t.vocab, 1);
  CHECK(v == t.vocab);  // 129,280 is a multiple of 128
  // 671B without the multi-token-prediction module (the paper, README_WEIGHTS.md).
  const model_parameters total = total_parameters(t, v);
  CHECK(total.total() == Approx(671e9).epsilon(0.005));
  const model_parameters active = activated_parameters(t, v);
  // DeepSeek counts the output head but not the input embedding (a lookup): 36.6B in
  // README_WEIGHTS.md, the paper's 37B rounded. Counting the embedding too gives 37.55B.
  const double deepseek_count = active.layers + active.head;
  CHECK(deepseek_count == Approx(36.6e9).epsilon(0.005));
  CHECK(deepseek_count == Approx(37e9).epsilon(0.015));
  CHECK(active.total() == Approx(37e9).epsilon(0.015));
}

TEST_CASE("job: the mixtral-8x7b preset has Mistral's parameters", "[plan][job]") {
  const transformer_spec& t = model_preset("mixtral-8x7b");
  CHECK(t.layers == 32);
  CHECK(t.kv() == 8);
  CHECK(t.moe_layers() == 32);
  const std::uint64_t v = padded_vocab(t.vocab, 1);
  // 46.7B in all, 12.9B active per token (arXiv 2401.04088; Mistral counts both embeddings).
  CHECK(total_parameters(t, v).total() == Approx(46.7e9).epsilon(0.005));
  CHECK(activated_parameters(t, v).total() == Approx(12.9e9).epsilon(0.005));
}

TEST_CASE("job: the h800 preset is the h100's with DeepSeek's NVLink", "[plan][job]") {
  const cluster_spec& h100 = cluster_preset("h100-sxm-80gb");
  const cluster_spec& h800 = cluster_preset("h800-sxm-80gb");
  CHECK(h800.intra_node_bandwidth == 160e9);
  CHECK(h800.peak_flops_bf16 == h100.peak_flops_bf16);
  CHECK(h800.peak_flops_fp8 == h100.peak_flops_fp8);
  CHECK(h800.hbm_bandwidth == h100.hbm_bandwidth);
  CHECK(h800.memory_bytes == h100.memory_bytes);
  CHECK(h800.inter_node_bandwidth == h100.inter_node_bandwidth);
  CHECK(h800.gemm_efficiency.points == h100.gemm_efficiency.points);
  CHECK(h800.achieved_fraction == h100.achieved_fraction);
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
  job.model.memory_efficient_norm = true;
  CHECK_NOTHROW(job.check());
  job.activations = activation_model::megatron;
  CHECK_THROWS_WITH(job.check(),
                    "plan: memory_efficient_norm needs the tensor activation model "
                    "(Megatron's estimator counts every norm's input)");
  job.activations = activation_model::tensors;
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

TEST_CASE("job: an MoE model's chunks weigh their layers by kind", "[plan][job]") {
  training_job job;
  job.model = model_preset("deepseek-v3");
  job.cluster = cluster_preset("h800-sxm-80gb");
  job.gpus = 16;
  job.sequence = 4096;
  job.global_batch = 16;
  plan_layout l;
  l.pp = 16;
  l.microbatches = 16;
  // 61 layers: the first chunk holds the 3 dense ones and one MoE layer.
  std::vector<std::uint32_t> layers(16, 4);
  layers.back() = 1;
  const job_costs jc =
      make_job_costs(job, l, recompute_kind::none, layers, placement::sequential(16));
  const transformer_spec& t = job.model;
  double sum = 0.0;
  for (const stage_parameters& s : jc.parameters) {
    sum += s.total();
  }
  CHECK(sum == Approx(total_parameters(t, t.vocab).total()));
  const double dense = parameters_of_layer(t, ffn_kind::dense).total();
  const double moe = parameters_of_layer(t, ffn_kind::moe).total();
  CHECK(jc.parameters[0].layers == Approx(3.0 * dense + moe));
  CHECK(jc.parameters[1].layers == Approx(4.0 * moe));
  // Each layer's ops timed by its kind's kernels.
  const job_op_times ot = op_times_of(job, l, recompute_kind::none);
  const double dense_f = ot.dense_layer_kinds.forward.total();
  const double moe_f = ot.layer_kinds.forward.total();
  CHECK(dense_f != moe_f);
  // Each F also slows beside its send to the next stage (overlap_split).
  const double s = job.cluster.overlap_slowdown;
  CHECK(jc.costs.chunk_costs()[0].forward ==
        Approx(3.0 * dense_f + moe_f + ot.embedding.forward.total() + s * jc.costs.comm(0, 1)));
  CHECK(jc.costs.chunk_costs()[1].forward == Approx(4.0 * moe_f + s * jc.costs.comm(1, 2)));
}
