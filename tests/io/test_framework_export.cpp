#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/framework_export.hpp>

using namespace pipesched;

namespace {
training_job framework_export_job(optimizer_sharding sharding = optimizer_sharding::optimizer) {
  training_job job;
  job.model = model_preset("llama3-70b");
  job.cluster = cluster_preset("h100-sxm-80gb");
  job.sequence = 8192;
  job.sharding = sharding;
  return job;
}

plan_entry framework_export_entry(std::uint32_t pp,
                                  std::uint32_t v,
                                  std::vector<std::uint32_t> partition,
                                  std::string schedule,
                                  recompute_kind recompute) {
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
  return e;
}
}  // namespace

TEST_CASE("megatron_args: even interleaved plan, layers per virtual stage and the group size",
          "[io][framework_export]") {
  const training_job job = framework_export_job();
  const plan_entry e = framework_export_entry(4, 2, std::vector<std::uint32_t>(8, 10),
                                              "interleaved-1f1b", recompute_kind::selective);
  CHECK(megatron_unsupported(job, e).empty());
  CHECK(megatron_args(job, e) ==
        "--num-layers 80\n--hidden-size 8192\n--num-attention-heads 64\n--seq-length 8192\n"
        "--tensor-model-parallel-size 8\n--pipeline-model-parallel-size 4\n"
        "--context-parallel-size 1\n--num-layers-per-virtual-pipeline-stage 10\n"
        "--microbatch-group-size-per-virtual-pipeline-stage 4\n--sequence-parallel\n"
        "--recompute-granularity selective\n--micro-batch-size 1\n--global-batch-size 256\n"
        "--use-distributed-optimizer\n");
  CHECK(megatron_args(job, e, 8).find("--microbatch-group-size-per-virtual-pipeline-stage 8\n") !=
        std::string::npos);
}

TEST_CASE("megatron_args: uneven ends as Megatron's layout; full recompute names its method",
          "[io][framework_export]") {
  const training_job job = framework_export_job(optimizer_sharding::none);
  const plan_entry e =
      framework_export_entry(2, 2, {1, 2, 2, 1}, "interleaved-1f1b", recompute_kind::full);
  const std::string args = megatron_args(job, e);
  CHECK(args.find("--pipeline-model-parallel-layout Et|tt|tt|tL\n") != std::string::npos);
  CHECK(args.find("--num-layers-per-virtual-pipeline-stage") == std::string::npos);
  CHECK(args.find("--recompute-granularity full\n--recompute-method uniform\n"
                  "--recompute-num-layers 1\n") != std::string::npos);
  CHECK(args.find("--use-distributed-optimizer") == std::string::npos);
  // 1F1B: no virtual stages, no group size, no recompute flags.
  const plan_entry one =
      framework_export_entry(4, 1, {20, 20, 20, 20}, "1f1b", recompute_kind::none);
  const std::string plain = megatron_args(job, one);
  CHECK(plain.find("virtual") == std::string::npos);
  CHECK(plain.find("--recompute") == std::string::npos);
}

TEST_CASE("megatron_unsupported: other schedules and sharded gradients or weights",
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
}
