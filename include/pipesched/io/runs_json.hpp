#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/io/job_spec_json.hpp"
#include "pipesched/plan/plan_search.hpp"
#include "pipesched/plan/runs_calibration.hpp"

// The measured-runs file (docs/formats.md, "Measured runs"): the runs `pipesched calibrate
// --runs` fits a cluster to, in the format of tests/data/measured_runs.json.

namespace pipesched {

namespace detail {

/// A run's model: "layers", "hidden", "heads", "ffn", "vocab" and optionally "kv_heads",
/// "head_dim", "mlp", "norm", "tied_embeddings", "position", "bias" (GPT-style by default, the
/// measured-runs file's convention: GELU, LayerNorm, tied embeddings, learned positions,
/// biases) and "activation_bytes" (2; 1 for an FP8 run); "attention" and "dropout" are keys of
/// the run.
inline transformer_spec run_model_from_json(const json_reader& run, const std::string& id) {
  const json_reader m = run["model"];
  m.object({"layers", "hidden", "heads", "ffn", "vocab", "kv_heads", "head_dim", "mlp", "norm",
            "tied_embeddings", "position", "bias", "activation_bytes"});
  nlohmann::json spec{{"version", 1},
                      {"name", id},
                      {"mlp", "gelu"},
                      {"norm", "layernorm"},
                      {"tied_embeddings", true},
                      {"position", "learned"},
                      {"bias", true},
                      {"attention", "flash"},
                      {"dropout", false}};
  for (const auto& item : m.v.items()) {
    spec[item.key()] = item.value();
  }
  if (!spec.contains("kv_heads")) {
    spec["kv_heads"] = spec["heads"];
  }
  for (const char* key : {"attention", "dropout"}) {
    if (run.has(key)) {
      spec[key] = run[key].v;
    }
  }
  try {
    return transformer_spec_from_json(spec);
  } catch (const invalid_argument& e) {
    run.error("model: ", e.what());
  }
}

}  // namespace detail

/// The runs of a measured-runs file (`{"runs": [...]}`; other top-level keys are ignored) run on
/// `cluster` (the runs whose "gpu" names another cluster are left out; `only`, when not empty,
/// keeps the ids that start with it). Each run: "id", "model" (above), "seq", "gpus",
/// "global_batch", one measurement ("step_time_s", "model_tflops_per_gpu" or
/// "hardware_tflops_per_gpu"; a run without one, e.g. of memory alone, is left out), and the
/// choices it ran with, each optional (searched when left
/// out): "tp", "cp", "pp", "v", "micro_batch", "sequence_parallel", "recompute", "schedule",
/// "partition"; and how: "optimizer_sharding", "overlap_grad_reduce", "p2p" ("blocking" or
/// "overlapped"), "grad_reduce_dtype" ("fp32" or "bf16"), "tp_comm_overlap", "activation_model",
/// "gradient_accumulation_fusion".
/// Other keys (a source, a note, memory) are ignored. Errors name the JSON pointer.
inline std::vector<reference_run> read_reference_runs(std::string_view text,
                                                      const cluster_spec& cluster,
                                                      std::string_view only = {}) {
  const nlohmann::json doc = detail::json_reader::parse(text, "runs");
  const detail::json_reader root{doc, ""};
  root.object();
  const detail::json_reader list = root["runs"];
  const std::size_t n = list.array();
  std::vector<reference_run> out;
  constexpr std::uint64_t u32 = std::numeric_limits<std::uint32_t>::max();
  for (std::size_t i = 0; i < n; ++i) {
    const detail::json_reader r = list[i];
    r.object();
    reference_run run;
    run.id = r["id"].string();
    if (!only.empty() && run.id.rfind(only, 0) != 0) {
      continue;
    }
    // A run on a preset is a run on a cluster calibrated from it ("<preset>-calibrated").
    if (r.has("gpu") && r["gpu"].string() != cluster.name &&
        cluster.name != r["gpu"].string() + "-calibrated") {
      continue;
    }
    plan_request& q = run.request;
    q.model = detail::run_model_from_json(r, run.id);
    q.cluster = cluster;
    q.gpus = r["gpus"].integer(1, max_plan_gpus);
    q.sequence = r["seq"].integer(1, u32);
    q.global_batch = r["global_batch"].integer(1, max_plan_step_tokens);
    int metrics = 0;
    for (run_metric m :
         {run_metric::step_time, run_metric::model_tflops, run_metric::hardware_tflops}) {
      const std::string key(to_string(m));
      if (r.has(key)) {
        ++metrics;
        run.metric = m;
        run.measured = r[key].number();
        if (!(run.measured > 0.0)) {
          r[key].error("must be > 0, not ", run.measured);
        }
      }
    }
    if (metrics == 0) {
      continue;  // a run that measured memory only: nothing to fit times to
    }
    if (metrics > 1) {
      r.error(
          "give one measurement of step_time_s, model_tflops_per_gpu and "
          "hardware_tflops_per_gpu, not ",
          metrics);
    }
    plan_fixed& f = q.options.fixed;
    auto count = [&](const char* key) -> std::optional<std::uint32_t> {
      if (!r.has(key)) {
        return std::nullopt;
      }
      return static_cast<std::uint32_t>(r[key].integer(1, u32));
    };
    f.tp = count("tp");
    f.cp = count("cp");
    f.pp = count("pp");
    f.chunks = count("v");
    f.micro_batch = count("micro_batch");
    auto boolean = [&](const char* key) -> std::optional<bool> {
      if (!r.has(key)) {
        return std::nullopt;
      }
      if (!r[key].v.is_boolean()) {
        r[key].error("must be true or false, not ", r[key].v.dump());
      }
      return r[key].v.get<bool>();
    };
    f.sequence_parallel = boolean("sequence_parallel");
    auto text_of = [&](const char* key) -> std::optional<std::string> {
      return r.has(key) ? std::optional<std::string>(r[key].string()) : std::nullopt;
    };
    if (const auto v = text_of("recompute")) {
      const auto k = parse_recompute_kind(*v);
      if (!k) {
        r["recompute"].error("must be none, selective or full, not ",
                             detail::json_reader::quote(*v));
      }
      f.recompute = *k;
    }
    f.schedule = text_of("schedule");
    if (const auto v = text_of("partition")) {
      const auto p = parse_partition(*v);
      if (!p) {
        r["partition"].error("must be even, balanced or layers per chunk, not ",
                             detail::json_reader::quote(*v));
      }
      f.partition = *p;
    }
    if (const auto v = text_of("optimizer_sharding")) {
      const auto s = parse_optimizer_sharding(*v);
      if (!s) {
        r["optimizer_sharding"].error("must be none, optimizer, gradients or weights, not ",
                                      detail::json_reader::quote(*v));
      }
      q.sharding = *s;
    }
    if (const auto v = boolean("overlap_grad_reduce")) {
      q.overlap_grad_reduce = *v;
    }
    if (const auto v = boolean("gradient_accumulation_fusion")) {
      q.gradient_accumulation_fusion = *v;
    }
    if (const auto v = text_of("p2p")) {
      if (*v != "blocking" && *v != "overlapped") {
        r["p2p"].error("must be blocking or overlapped, not ", detail::json_reader::quote(*v));
      }
      q.blocking_p2p = *v == "blocking";
    }
    if (const auto v = text_of("tp_comm_overlap")) {
      const auto o = parse_tp_overlap(*v);
      if (!o) {
        r["tp_comm_overlap"].error("must be none, backward or all, not ",
                                   detail::json_reader::quote(*v));
      }
      q.tp_comm_overlap = *o;
    }
    if (const auto v = text_of("grad_reduce_dtype")) {
      if (*v != "fp32" && *v != "bf16") {
        r["grad_reduce_dtype"].error("must be fp32 or bf16, not ", detail::json_reader::quote(*v));
      }
      q.gradient_reduce_bytes = *v == "fp32" ? 4 : 2;
    }
    if (const auto v = text_of("activation_model")) {
      const auto a = parse_activation_model(*v);
      if (!a) {
        r["activation_model"].error("must be tensors or megatron, not ",
                                    detail::json_reader::quote(*v));
      }
      q.activations = *a;
    }
    try {
      detail::check_fixed(job_of(q), f);
    } catch (const invalid_argument& e) {
      r.error(e.what());
    }
    out.push_back(std::move(run));
  }
  return out;
}

/// `{"id", "metric", "predicted", "measured", "error", "plan"}`.
inline nlohmann::json run_prediction_to_json(const run_prediction& p) {
  return {{"id", p.id},
          {"metric", std::string(to_string(p.metric))},
          {"predicted", p.predicted},
          {"measured", p.measured},
          {"error", p.error},
          {"plan", p.plan}};
}

/// What `calibrate --runs --json` prints: the scales, the runs before and after, the cluster.
inline nlohmann::json runs_calibration_to_json(const runs_calibration& c) {
  nlohmann::json before = nlohmann::json::array(), after = nlohmann::json::array();
  for (const run_prediction& p : c.before) {
    before.push_back(run_prediction_to_json(p));
  }
  for (const run_prediction& p : c.after) {
    after.push_back(run_prediction_to_json(p));
  }
  return {{"compute_scale", c.compute_scale},
          {"network_scale", c.network_scale},
          {"mean_abs_error_before", mean_abs_error(c.before)},
          {"mean_abs_error_after", mean_abs_error(c.after)},
          {"before", before},
          {"after", after},
          {"cluster", cluster_spec_to_json(c.cluster)}};
}

}  // namespace pipesched
