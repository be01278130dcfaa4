#include <string>
#include <variant>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/io/framework_export.hpp>

using namespace pipesched;

namespace {
training_job framework_export_job(optimizer_sharding sharding = optimizer_sharding::optimizer,
                                  const char* model = "llama3-70b") {
  training_job job;
  job.model = model_preset(model);
  job.cluster = cluster_preset("h100-sxm-80gb");
  job.sequence = 8192;
  job.sharding = sharding;
  return job;
}

/// A plan as the planner would hand it over, made by hand: zero-layer ends and CP > 1 are not
/// searched yet, and the exports must already read them right.
plan_entry framework_export_entry(std::uint32_t pp,
                                  std::uint32_t v,
                                  std::vector<std::uint32_t> partition,
                                  std::string schedule,
                                  recompute_kind recompute,
                                  placement pl = placement()) {
  plan_entry e;
  e.choice.layout.tp = 8;
  e.choice.layout.pp = pp;
  e.choice.layout.dp = 16;
  e.choice.layout.chunks = v;
  e.choice.layout.micro_batch = 1;
  e.choice.layout.microbatches = 16;
  e.choice.layout.sequence_parallel = true;
  e.choice.schedule = std::move(schedule);
  e.choice.recompute = recompute;
  e.choice.partition = std::move(partition);
  e.sched = schedule::on(e.choice.schedule,
                         pl.total_chunks() == 1 ? placement::loop(pp, v) : std::move(pl), 16);
  return e;
}

bool framework_export_has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

const torchtitan_option* framework_export_option(const torchtitan_settings& s,
                                                 const std::string& field) {
  for (const torchtitan_option& o : s.options) {
    if (o.field == field) {
      return &o;
    }
  }
  return nullptr;
}
}  // namespace

TEST_CASE("megatron_args: even interleaved plan, the model's structure and the group size",
          "[io][framework_export]") {
  const training_job job = framework_export_job();
  plan_entry e = framework_export_entry(4, 2, std::vector<std::uint32_t>(8, 10), "interleaved-1f1b",
                                        recompute_kind::selective);
  CHECK(megatron_unsupported(job, e).empty());
  CHECK(megatron_args(job, e) ==
        "--num-layers 80\n--hidden-size 8192\n--ffn-hidden-size 28672\n"
        "--num-attention-heads 64\n--group-query-attention\n--num-query-groups 8\n"
        "--seq-length 8192\n--max-position-embeddings 8192\n--position-embedding-type rope\n"
        "--normalization RMSNorm\n--swiglu\n--disable-bias-linear\n"
        "--untie-embeddings-and-output-weights\n--attention-dropout 0.0\n--hidden-dropout 0.0\n"
        "--attention-backend flash\n--make-vocab-size-divisible-by 128\n--bf16\n"
        "--tensor-model-parallel-size 8\n--pipeline-model-parallel-size 4\n"
        "--context-parallel-size 1\n--num-layers-per-virtual-pipeline-stage 10\n"
        "--microbatch-group-size-per-virtual-pipeline-stage 4\n--sequence-parallel\n"
        "--recompute-granularity selective\n--micro-batch-size 1\n--global-batch-size 256\n"
        "--use-distributed-optimizer\n--overlap-grad-reduce\n");
  e.choice.group_size = 8;
  CHECK(framework_export_has(megatron_args(job, e),
                             "\n--microbatch-group-size-per-virtual-pipeline-stage 8\n"));
}

TEST_CASE("megatron_args: uneven chunks as Megatron's layout, zero-layer ends as E| and |L",
          "[io][framework_export]") {
  const training_job job = framework_export_job(optimizer_sharding::none);
  const plan_entry e =
      framework_export_entry(2, 2, {1, 39, 39, 1}, "interleaved-1f1b", recompute_kind::full);
  const std::string args = megatron_args(job, e);
  CHECK(framework_export_has(args, "\n--pipeline-model-parallel-layout Et|" + std::string(39, 't') +
                                       "|" + std::string(39, 't') + "|tL\n"));
  CHECK(!framework_export_has(args, "--num-layers-per-virtual-pipeline-stage"));
  CHECK(framework_export_has(
      args,
      "--recompute-granularity full\n--recompute-method uniform\n--recompute-num-layers 1\n"));
  CHECK(!framework_export_has(args, "--use-distributed-optimizer"));
  // Llama 3's ends: the first chunk only the embedding, the last only the output and loss.
  const std::vector<std::uint32_t> ends{0, 13, 14, 13, 14, 13, 13, 0};
  const plan_entry llama3 =
      framework_export_entry(4, 2, ends, "interleaved-1f1b", recompute_kind::none);
  CHECK(megatron_unsupported(job, llama3).empty());
  const std::string layout = megatron_args(job, llama3);
  CHECK(framework_export_has(layout, "\n--pipeline-model-parallel-layout E|" +
                                         std::string(13, 't') + "|" + std::string(14, 't') + "|"));
  CHECK(framework_export_has(layout, "|" + std::string(13, 't') + "|L\n"));
  CHECK(!framework_export_has(layout, "--recompute"));
  // 1F1B: no virtual stages, no group size, no recompute flags.
  const plan_entry one =
      framework_export_entry(4, 1, {20, 20, 20, 20}, "1f1b", recompute_kind::none);
  const std::string plain = megatron_args(job, one);
  CHECK(!framework_export_has(plain, "virtual"));
  CHECK(!framework_export_has(plain, "--recompute"));
}

TEST_CASE("megatron_args: context parallelism, blocking transfers and a GPT-3 model",
          "[io][framework_export]") {
  training_job job = framework_export_job();
  plan_entry e = framework_export_entry(4, 2, std::vector<std::uint32_t>(8, 10), "interleaved-1f1b",
                                        recompute_kind::none);
  e.choice.layout.cp = 4;
  CHECK(framework_export_has(megatron_args(job, e), "\n--context-parallel-size 4\n"));
  CHECK(framework_export_has(megatron_args(job, e), "\n--global-batch-size 256\n"));
  job.blocking_p2p = true;
  CHECK(framework_export_has(megatron_args(job, e), "\n--no-overlap-p2p-communication\n"));
  job.overlap_grad_reduce = false;
  CHECK(!framework_export_has(megatron_args(job, e), "--overlap-grad-reduce"));
  CHECK(!framework_export_has(megatron_args(job, e), "gradient-accumulation-fusion"));
  job.gradient_accumulation_fusion = false;
  CHECK(framework_export_has(megatron_args(job, e), "\n--no-gradient-accumulation-fusion\n"));
  job.model.activation_bytes = 1;  // Transformer Engine's FP8 on a bf16 model
  CHECK(framework_export_has(megatron_args(job, e), "\n--bf16\n--fp8-format hybrid\n"));
  job.model.activation_bytes = 4;
  CHECK(!framework_export_has(megatron_args(job, e), "--bf16"));
  CHECK(!framework_export_has(megatron_args(job, e), "--fp8"));

  const training_job gpt = framework_export_job(optimizer_sharding::optimizer, "gpt3-175b");
  const plan_entry g = framework_export_entry(8, 1, std::vector<std::uint32_t>(8, 12), "1f1b",
                                              recompute_kind::selective);
  const std::string args = megatron_args(gpt, g);
  CHECK(framework_export_has(args,
                             "--ffn-hidden-size 49152\n--num-attention-heads 96\n"
                             "--seq-length 8192\n"));
  CHECK(framework_export_has(args,
                             "--position-embedding-type learned_absolute\n"
                             "--normalization LayerNorm\n--attention-backend unfused\n"));
  for (const char* absent : {"--group-query-attention", "--swiglu", "--disable-bias-linear",
                             "--untie-embeddings", "dropout", "--no-overlap"}) {
    CHECK(!framework_export_has(args, absent));
  }
}

TEST_CASE("megatron_unsupported: schedules, sharding, group sizes and CP Megatron refuses",
          "[io][framework_export]") {
  const plan_entry zb =
      framework_export_entry(4, 1, {20, 20, 20, 20}, "zb-h1", recompute_kind::none);
  CHECK(megatron_unsupported(framework_export_job(), zb) ==
        "Megatron-LM runs 1f1b and interleaved-1f1b, not zb-h1");
  const plan_entry ok =
      framework_export_entry(4, 1, {20, 20, 20, 20}, "1f1b", recompute_kind::none);
  CHECK(megatron_unsupported(framework_export_job(optimizer_sharding::gradients), ok) ==
        "Megatron-LM's distributed optimizer shards the optimizer states only "
        "(--optimizer-sharding optimizer), not the gradients or weights");
  CHECK(!megatron_unsupported(framework_export_job(optimizer_sharding::weights), ok).empty());

  plan_entry e = framework_export_entry(4, 2, std::vector<std::uint32_t>(8, 10), "interleaved-1f1b",
                                        recompute_kind::none);
  e.choice.layout.microbatches = 10;  // the last group of 4 holds 2 < p
  CHECK(megatron_unsupported(framework_export_job(), e) ==
        "Megatron-LM's interleaved schedule needs p <= N <= m micro-batches per group and m mod "
        "N = 0 or >= p, not N = 4 with p = 4, m = 10");
  e.choice.layout.microbatches = 3;  // N = p > m
  CHECK(!megatron_unsupported(framework_export_job(), e).empty());
  e.choice.layout.microbatches = 16;
  e.choice.layout.cp = 3;  // 8192 tokens are not a multiple of 6
  CHECK(megatron_unsupported(framework_export_job(), e) ==
        "Megatron-LM splits each sequence into 2*cp pieces: the sequence (8192 tokens) must be "
        "a multiple of 2*cp = 6");
  e.choice.layout.cp = 1;
  training_job blocking = framework_export_job();
  blocking.blocking_p2p = true;
  const plan_entry two = framework_export_entry(2, 2, std::vector<std::uint32_t>(4, 20),
                                                "interleaved-1f1b", recompute_kind::none);
  CHECK(megatron_unsupported(blocking, two) ==
        "Megatron-LM's interleaved schedule needs pp > 2 with blocking transfers (--p2p "
        "blocking), not pp = 2");
  // Memory-efficient norms: neither framework's exported arguments run them.
  training_job efficient = framework_export_job(optimizer_sharding::gradients);
  REQUIRE(torchtitan_unsupported(efficient, ok).empty());
  efficient.model.memory_efficient_norm = true;
  CHECK(torchtitan_unsupported(efficient, ok) ==
        "torchtitan's norms keep their input for the backward (no memory-efficient norm); plan "
        "without --memory-efficient-norm");
  efficient.sharding = optimizer_sharding::optimizer;
  CHECK(megatron_unsupported(efficient, ok) ==
        "Megatron-LM's memory-efficient norm (--memory-efficient-layer-norm) is apex's LayerNorm "
        "in its local layers only; plan without --memory-efficient-norm");
}

TEST_CASE("megatron_args: experts, their layers and expert parallelism; MLA's ranks",
          "[io][framework_export]") {
  const training_job mixtral = framework_export_job(optimizer_sharding::optimizer, "mixtral-8x7b");
  plan_entry e = framework_export_entry(4, 1, {8, 8, 8, 8}, "1f1b", recompute_kind::none);
  e.choice.layout.ep = 4;
  CHECK(megatron_unsupported(mixtral, e).empty());
  std::string args = megatron_args(mixtral, e);
  // Every layer has experts (no --moe-layer-freq), no shared expert, dropless.
  CHECK(framework_export_has(args,
                             "\n--num-query-groups 8\n--num-experts 8\n--moe-router-topk 2\n"
                             "--moe-ffn-hidden-size 14336\n--moe-token-dispatcher-type "
                             "alltoall\n--moe-grouped-gemm\n--seq-length 8192\n"));
  CHECK(
      framework_export_has(args, "\n--context-parallel-size 1\n--expert-model-parallel-size 4\n"));
  CHECK(!framework_export_has(args, "--moe-layer-freq"));
  CHECK(!framework_export_has(args, "--moe-shared-expert-intermediate-size"));
  CHECK(!framework_export_has(args, "--moe-expert-capacity-factor"));
  CHECK(!framework_export_has(args, "--multi-latent-attention"));

  training_job top1 = mixtral;
  top1.model.top_k = 1;
  top1.model.capacity_factor = 1.25;
  args = megatron_args(top1, e);
  CHECK(framework_export_has(args, "\n--moe-router-topk 1\n--moe-router-pre-softmax\n"));
  CHECK(framework_export_has(
      args, "\n--moe-expert-capacity-factor 1.25\n--moe-pad-expert-input-to-capacity\n"));

  const training_job ds = framework_export_job(optimizer_sharding::optimizer, "deepseek-v3");
  plan_entry d = framework_export_entry(4, 1, {16, 15, 15, 15}, "1f1b", recompute_kind::full);
  d.choice.layout.ep = 8;
  CHECK(megatron_unsupported(ds, d).empty());
  args = megatron_args(ds, d);
  CHECK(framework_export_has(
      args,
      "\n--num-attention-heads 128\n--multi-latent-attention\n--q-lora-rank 1536\n"
      "--kv-lora-rank 512\n--qk-head-dim 128\n--qk-pos-emb-head-dim 64\n--v-head-dim 128\n"
      "--num-experts 256\n--moe-layer-freq ([0]*3+[1]*58)\n--moe-router-topk 8\n"
      "--moe-ffn-hidden-size 2048\n--moe-shared-expert-intermediate-size 2048\n"));
  CHECK(!framework_export_has(args, "--group-query-attention"));
  CHECK(!framework_export_has(args, "--kv-channels"));

  // Every layer dense: the pattern holds no expert layer.
  training_job all_dense = ds;
  all_dense.model.dense_layers = 61;
  CHECK(framework_export_has(megatron_args(all_dense, d), "\n--moe-layer-freq ([0]*61)\n"));
  // MLA without experts: no MoE argument.
  training_job mla = ds;
  mla.model.experts = mla.model.top_k = mla.model.shared_experts = mla.model.dense_layers = 0;
  mla.model.expert_ffn = 0;
  d.choice.layout.ep = 1;
  args = megatron_args(mla, d);
  CHECK(framework_export_has(args, "\n--multi-latent-attention\n"));
  CHECK(!framework_export_has(args, "--num-experts"));
  CHECK(!framework_export_has(args, "--expert-model-parallel-size"));
  CHECK(torchtitan_unsupported(mla, d) ==
        "the model has MLA attention, whose torchtitan arguments (experts, top-k, expert "
        "parallelism, MLA ranks) are not written yet");
}

TEST_CASE("megatron_unsupported: a mixture of experts under TP without SP or with biases",
          "[io][framework_export]") {
  const training_job mixtral = framework_export_job(optimizer_sharding::optimizer, "mixtral-8x7b");
  plan_entry e = framework_export_entry(4, 1, {8, 8, 8, 8}, "1f1b", recompute_kind::none);
  e.choice.layout.ep = 4;
  e.choice.layout.sequence_parallel = false;
  CHECK(megatron_unsupported(mixtral, e) ==
        "Megatron-LM trains a mixture of experts with tp > 1 only with sequence parallelism (its "
        "MoE layer refuses otherwise): plan with SP, not tp = 8 without it");
  e.choice.layout.sequence_parallel = true;
  training_job bias = mixtral;
  bias.model.bias = true;
  CHECK(megatron_unsupported(bias, e) ==
        "Megatron-LM's experts take biases only with expert tensor parallelism 1, and the plan "
        "splits them over tp = 8");
  e.choice.layout.tp = 1;
  e.choice.layout.sequence_parallel = false;
  CHECK(megatron_unsupported(bias, e).empty());
  // torchtitan still refuses experts.
  CHECK(torchtitan_unsupported(framework_export_job(optimizer_sharding::weights, "mixtral-8x7b"),
                               e) ==
        "the model has experts, whose torchtitan arguments (experts, top-k, expert parallelism, "
        "MLA ranks) are not written yet");
}

TEST_CASE("torchtitan_settings_of: Llama 3's ends, FSDP, CP and the exported order",
          "[io][framework_export]") {
  const training_job job = framework_export_job(optimizer_sharding::gradients);
  const std::vector<std::uint32_t> ends{0, 13, 14, 13, 14, 13, 13, 0};
  plan_entry e = framework_export_entry(4, 2, ends, "interleaved-1f1b", recompute_kind::none);
  e.choice.layout.cp = 2;
  REQUIRE(torchtitan_unsupported(job, e).empty());
  const torchtitan_settings s = torchtitan_settings_of(job, e, "/abs/plan.compute.csv");
  CHECK(s.base_config == "llama3_70b");
  CHECK(s.flavor == "70B");
  CHECK(s.activation_checkpoint == "none");
  const auto* parts = framework_export_option(s, "module_fqns_per_model_part");
  REQUIRE(parts != nullptr);
  const auto& lists = std::get<std::vector<std::vector<std::string>>>(parts->value);
  REQUIRE(lists.size() == 8);
  CHECK(lists.front() == std::vector<std::string>{"tok_embeddings"});
  CHECK(lists.back() == std::vector<std::string>{"norm", "lm_head"});
  CHECK(lists[1].front() == "layers.0");
  CHECK(lists[6].back() == "layers.79");
  // m = 16 = 4 rounds of 4 = p: PyTorch's class runs this order; no CSV.
  CHECK(framework_export_option(s, "pipeline_parallel_schedule_csv") == nullptr);
  const std::string args = torchtitan_args(s);
  CHECK(args.rfind("--parallelism.data_parallel_replicate_degree 1\n"
                   "--parallelism.data_parallel_shard_degree 16\n"
                   "--parallelism.fsdp_reshard_after_forward never\n"
                   "--parallelism.tensor_parallel_degree 8\n"
                   "--parallelism.enable_sequence_parallel\n"
                   "--parallelism.context_parallel_degree 2\n"
                   "--parallelism.context_parallel_load_balancer headtail\n"
                   "--parallelism.pipeline_parallel_degree 4\n"
                   "--parallelism.pipeline_parallel_schedule Interleaved1F1B\n"
                   "--parallelism.module_fqns_per_model_part tok_embeddings layers.0,",
                   0) == 0);
  CHECK(framework_export_has(args,
                             ",layers.79 norm,lm_head\n--parallelism.num_pp_microbatches 16\n"
                             "--training.num_tokens_per_microbatch_per_dp_rank 8192\n"
                             "--training.num_tokens_per_train_step 2097152\n"
                             "--training.max_context_length 8192\n"
                             "--training.disable_cuda_graphs\n"
                             "activation-checkpoint:none\n"));
  // Another group size than PyTorch's round: the exported order, placed in a loop.
  e.choice.group_size = 8;
  const torchtitan_settings g = torchtitan_settings_of(job, e, "/abs/plan.compute.csv");
  REQUIRE(framework_export_option(g, "pipeline_parallel_schedule_csv") != nullptr);
  CHECK(
      std::get<std::string>(framework_export_option(g, "pipeline_parallel_schedule_csv")->value) ==
      "/abs/plan.compute.csv");
  CHECK(std::get<std::string>(framework_export_option(g, "pipeline_parallel_schedule")->value) ==
        "Interleaved1F1B");
  // Zero-bubble orders torchtitan has no class for, and V placement.
  const plan_entry zb =
      framework_export_entry(4, 1, {20, 20, 20, 20}, "zb-h1", recompute_kind::full);
  const torchtitan_settings z = torchtitan_settings_of(job, zb, "x.csv");
  CHECK(std::get<std::string>(framework_export_option(z, "pipeline_parallel_schedule")->value) ==
        "PipelineScheduleMulti");
  CHECK(framework_export_option(z, "pipeline_parallel_schedule_csv") != nullptr);
  CHECK(z.activation_checkpoint == "full");
  const plan_entry v = framework_export_entry(4, 2, std::vector<std::uint32_t>(8, 10), "zb-v",
                                              recompute_kind::selective, placement::v_shape(4));
  const torchtitan_settings vs = torchtitan_settings_of(job, v, "x.csv");
  CHECK(std::get<std::string>(framework_export_option(vs, "pipeline_parallel_schedule")->value) ==
        "ZBVZeroBubble");
  CHECK(framework_export_option(vs, "pipeline_parallel_schedule_csv") != nullptr);
  // Replicated data parallelism; 1F1B's own class.
  const plan_entry one =
      framework_export_entry(4, 1, {20, 20, 20, 20}, "1f1b", recompute_kind::selective);
  const std::string ddp = torchtitan_args(
      torchtitan_settings_of(framework_export_job(optimizer_sharding::none), one, "x.csv"));
  CHECK(framework_export_has(ddp,
                             "--parallelism.data_parallel_replicate_degree 16\n"
                             "--parallelism.data_parallel_shard_degree 1\n"
                             "--parallelism.tensor_parallel_degree 8\n"));
  CHECK(framework_export_has(ddp, "--parallelism.pipeline_parallel_schedule 1F1B\n"));
  CHECK(!framework_export_has(ddp, "fsdp_reshard"));
  CHECK(framework_export_has(ddp, "activation-checkpoint:selective\n"));
}

TEST_CASE("torchtitan_unsupported: what torchtitan cannot run, each with its reason",
          "[io][framework_export]") {
  const plan_entry one =
      framework_export_entry(4, 1, {20, 20, 20, 20}, "1f1b", recompute_kind::none);
  CHECK(torchtitan_unsupported(framework_export_job(), one) ==
        "torchtitan's FSDP2 shards the gradients with the optimizer states: it has no "
        "optimizer-states-only sharding (--optimizer-sharding optimizer); plan with gradients, "
        "weights or none");
  plan_entry cp = one;
  cp.choice.layout.cp = 2;
  CHECK(torchtitan_unsupported(framework_export_job(optimizer_sharding::none), cp) ==
        "torchtitan shards the parameters over the CP ranks (FSDP) whenever cp > 1: plan with "
        "--optimizer-sharding gradients or weights");
  const training_job fsdp = framework_export_job(optimizer_sharding::weights);
  const plan_entry dual =
      framework_export_entry(4, 2, std::vector<std::uint32_t>(8, 10), "dualpipe",
                             recompute_kind::none, placement::dual(4));
  CHECK(torchtitan_unsupported(fsdp, dual) ==
        "torchtitan runs one route through the stages; dualpipe has two (DualPipe's, entering "
        "at both ends)");
  const plan_entry hole = framework_export_entry(4, 2, {10, 10, 10, 0, 10, 10, 15, 15},
                                                 "interleaved-1f1b", recompute_kind::none);
  CHECK(torchtitan_unsupported(fsdp, hole) ==
        "torchtitan builds each model part from its modules: global chunk 3 holds no layer, "
        "embedding or head");
  CHECK(megatron_unsupported(framework_export_job(), hole).empty());  // Megatron's "||" is fine
  const plan_entry gpt =
      framework_export_entry(8, 1, std::vector<std::uint32_t>(8, 12), "1f1b", recompute_kind::none);
  CHECK(
      torchtitan_unsupported(framework_export_job(optimizer_sharding::weights, "gpt3-175b"), gpt) ==
      "torchtitan runs flash attention (FlexAttention or SDPA), not materialized scores");
  training_job odd = fsdp;
  odd.sequence = 8190;
  plan_entry split = one;
  split.choice.layout.cp = 2;
  CHECK(torchtitan_unsupported(odd, split) ==
        "torchtitan splits a micro-batch's 8190 tokens over SP and 2*cp: they must be a "
        "multiple of 32");
}

TEST_CASE("torchtitan_config: a config function deriving from torchtitan's of the same model",
          "[io][framework_export]") {
  training_job job = framework_export_job(optimizer_sharding::gradients, "llama3-405b");
  const plan_entry e = framework_export_entry(
      16, 1, {7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7}, "1f1b", recompute_kind::full);
  const torchtitan_settings s = torchtitan_settings_of(job, e, "/abs/p.compute.csv");
  REQUIRE(s.base_config == "llama3_405b");
  const std::string py = torchtitan_config(job, s, "the plan");
  CHECK(py.rfind("# torchtitan config for pipesched's plan (pipesched plan --export): the plan\n",
                 0) == 0);
  CHECK(framework_export_has(py,
                             "from torchtitan.models.llama3.config_registry import llama3_405b\n"));
  CHECK(framework_export_has(py,
                             "def pipesched_plan() -> Trainer.Config:\n"
                             "    config = llama3_405b()\n"));
  CHECK(framework_export_has(py, "    config.model_spec = model_registry(\"405B\")\n"));
  CHECK(framework_export_has(py, "    config.parallelism = ParallelismConfig()\n"));
  CHECK(framework_export_has(py, "    config.parallelism.data_parallel_shard_degree = 16\n"));
  CHECK(framework_export_has(py, "    config.parallelism.enable_sequence_parallel = True\n"));
  CHECK(framework_export_has(py, "        [\"tok_embeddings\", \"layers.0\","));
  CHECK(framework_export_has(py, "    config.training.disable_cuda_graphs = True\n"));
  CHECK(framework_export_has(py,
                             "    config.activation_checkpoint = FullAC.Config()\n"
                             "    return config\n"));
  job.model.activation_bytes = 1;
  CHECK(framework_export_has(torchtitan_config(job, s, "x"), "Float8LinearConverter.Config("));
  // Another model: no torchtitan config to derive from.
  job.model.layers = 100;
  CHECK(torchtitan_settings_of(job, e, "x.csv").base_config.empty());
}
