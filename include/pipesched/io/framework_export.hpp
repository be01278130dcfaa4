#pragma once

// A chosen plan as a training framework reads it: Megatron-LM's command-line arguments
// (docs/formats.md, "Exported plan"), spelled as megatron/training/arguments.py and the config
// dataclasses its parser is built from read them (tests/data/megatron_args_spec.json names the
// snapshot they were read from).

#include <cstdint>
#include <string>
#include <string_view>

#include "pipesched/plan/job.hpp"
#include "pipesched/plan/planner.hpp"

namespace pipesched {

/// Why Megatron-LM's arguments cannot describe `e` as planned, or empty when they can: Megatron
/// trains with 1F1B and interleaved 1F1B (loop placement) here, and its distributed optimizer
/// shards the optimizer states only (ZeRO-1); sharded gradients or weights are Megatron-FSDP,
/// another code path with other memory.
inline std::string megatron_unsupported(const training_job& job, const plan_entry& e) {
  const std::string& s = e.choice.schedule;
  if (s != "1f1b" && s != "interleaved-1f1b") {
    return "Megatron-LM runs 1f1b and interleaved-1f1b, not " + s;
  }
  if (job.sharding == optimizer_sharding::gradients ||
      job.sharding == optimizer_sharding::weights) {
    return "Megatron-LM's distributed optimizer shards the optimizer states only "
           "(--optimizer-sharding optimizer), not the gradients or weights";
  }
  return {};
}

/// Megatron-LM's arguments for the plan `e` of `job`, one "--flag" or "--flag value" per line
/// (no quoting needed: `pretrain_gpt.py $(cat PREFIX.megatron.args)`). `group_size` is the
/// interleaved schedule's micro-batches per round of the virtual stages (0: p, the
/// generator's default). Call only when megatron_unsupported(job, e) is empty.
inline std::string megatron_args(const training_job& job,
                                 const plan_entry& e,
                                 std::uint32_t group_size = 0) {
  const plan_layout& l = e.choice.layout;
  std::string out;
  const auto arg = [&out](std::string_view flag, const std::string& value) {
    out += std::string(flag);
    if (!value.empty()) {
      out += " " + value;
    }
    out += "\n";
  };
  using std::to_string;
  arg("--num-layers", to_string(job.model.layers));
  arg("--hidden-size", to_string(job.model.hidden));
  arg("--num-attention-heads", to_string(job.model.heads));
  arg("--seq-length", to_string(job.sequence));
  arg("--tensor-model-parallel-size", to_string(l.tp));
  arg("--pipeline-model-parallel-size", to_string(l.pp));
  arg("--context-parallel-size", "1");
  // Even chunks: layers per virtual stage; otherwise Megatron's layout, one "|"-separated
  // entry per global chunk in model order (its flat order is virtual stage, then rank: ours),
  // the embedding "E" first and the loss "L" last.
  bool even = true;
  for (std::uint32_t layers : e.choice.partition) {
    even = even && layers == e.choice.partition.front();
  }
  if (!even) {
    std::string layout;
    for (std::size_t g = 0; g < e.choice.partition.size(); ++g) {
      layout += g == 0 ? "E" : "|";
      layout += std::string(e.choice.partition[g], 't');
    }
    arg("--pipeline-model-parallel-layout", layout + "L");
  } else if (l.chunks > 1) {
    arg("--num-layers-per-virtual-pipeline-stage", to_string(e.choice.partition.front()));
  }
  if (l.chunks > 1) {
    arg("--microbatch-group-size-per-virtual-pipeline-stage",
        to_string(group_size == 0 ? l.pp : group_size));
  }
  if (l.sequence_parallel) {
    arg("--sequence-parallel", "");
  }
  if (e.choice.recompute == recompute_kind::selective) {
    arg("--recompute-granularity", "selective");
  } else if (e.choice.recompute == recompute_kind::full) {
    // Every layer's input kept and the layer re-run: one layer per uniform unit.
    arg("--recompute-granularity", "full");
    arg("--recompute-method", "uniform");
    arg("--recompute-num-layers", "1");
  }
  arg("--micro-batch-size", to_string(l.micro_batch));
  arg("--global-batch-size", to_string(std::uint64_t{l.micro_batch} * l.microbatches * l.dp));
  if (job.sharding != optimizer_sharding::none) {
    arg("--use-distributed-optimizer", "");
  }
  return out;
}

}  // namespace pipesched
