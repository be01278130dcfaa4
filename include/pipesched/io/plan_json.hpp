#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/io/json.hpp"
#include "pipesched/plan/plan_types.hpp"

// The planner's files (docs/formats.md, "Plans"): the model and cluster JSON it reads, the plan
// JSON it writes, and the map of pipeline stages to ranks and layers a launcher reads.

namespace pipesched {

inline constexpr int transformer_spec_json_version = 1;
inline constexpr int cluster_spec_json_version = 1;
inline constexpr int plan_json_version = 1;

/// A model file (schema v1): `{"version": 1, "layers", "hidden", "ffn", "heads", "kv_heads",
/// "vocab", "mlp": "gelu" | "swiglu", "norm": "layernorm" | "rmsnorm", "tied_embeddings"}`,
/// and optionally "name", "head_dim" (default hidden / heads) and "activation_bytes" (2).
inline transformer_spec transformer_spec_from_json(const nlohmann::json& j) {
  const detail::json_reader c{j, ""};
  c.object({"version", "name", "layers", "hidden", "ffn", "heads", "kv_heads", "head_dim", "vocab",
            "mlp", "norm", "tied_embeddings", "activation_bytes"});
  c.version(transformer_spec_json_version, "model");
  transformer_spec t;
  constexpr std::uint64_t u32 = std::numeric_limits<std::uint32_t>::max();
  constexpr std::uint64_t big = std::uint64_t{1} << 40;
  t.name = c.has("name") ? c["name"].string() : std::string("model");
  t.layers = static_cast<std::uint32_t>(c["layers"].integer(1, u32));
  t.hidden = c["hidden"].integer(1, big);
  t.ffn = c["ffn"].integer(1, big);
  t.heads = static_cast<std::uint32_t>(c["heads"].integer(1, u32));
  t.kv_heads = static_cast<std::uint32_t>(c["kv_heads"].integer(1, u32));
  t.head_dim = c.has("head_dim") ? c["head_dim"].integer(1, big) : 0;
  t.vocab = c["vocab"].integer(1, big);
  const std::string mlp = c["mlp"].string();
  if (mlp != "gelu" && mlp != "swiglu") {
    c["mlp"].error("must be \"gelu\" or \"swiglu\", not ", detail::json_reader::quote(mlp));
  }
  t.mlp = mlp == "gelu" ? mlp_kind::gelu : mlp_kind::swiglu;
  const std::string norm = c["norm"].string();
  if (norm != "layernorm" && norm != "rmsnorm") {
    c["norm"].error("must be \"layernorm\" or \"rmsnorm\", not ", detail::json_reader::quote(norm));
  }
  t.norm = norm == "layernorm" ? norm_kind::layernorm : norm_kind::rmsnorm;
  if (!c["tied_embeddings"].v.is_boolean()) {
    c["tied_embeddings"].error("must be true or false, not ", c["tied_embeddings"].v.dump());
  }
  t.tied_embeddings = c["tied_embeddings"].v.get<bool>();
  if (c.has("activation_bytes")) {
    t.activation_bytes = static_cast<std::uint32_t>(c["activation_bytes"].integer(1, 4));
  }
  try {
    t.check("model");
  } catch (const field_error& e) {
    c[e.field()].error(e.rule());  // the model's rules, at the key they concern
  }
  return t;
}

inline transformer_spec read_transformer_spec(std::string_view text) {
  return transformer_spec_from_json(detail::json_reader::parse(text, "model"));
}

inline nlohmann::json transformer_spec_to_json(const transformer_spec& t) {
  nlohmann::json j{{"version", transformer_spec_json_version},
                   {"name", t.name},
                   {"layers", t.layers},
                   {"hidden", t.hidden},
                   {"ffn", t.ffn},
                   {"heads", t.heads},
                   {"kv_heads", t.kv()},
                   {"vocab", t.vocab},
                   {"mlp", std::string(to_string(t.mlp))},
                   {"norm", std::string(to_string(t.norm))},
                   {"tied_embeddings", t.tied_embeddings},
                   {"activation_bytes", t.activation_bytes}};
  if (t.head_dim != 0) {
    j["head_dim"] = t.head_dim;
  }
  return j;
}

/// A cluster file (schema v1): `{"version": 1, "memory_bytes", "peak_flops_bf16",
/// "intra_node_bandwidth", "inter_node_bandwidth"}` (bytes, FLOP/s, bytes/s) and optionally
/// "name", "usable_fraction" (0.9), "peak_flops_fp8" (0), "achieved_fraction" (0.5),
/// "gpus_per_node" (8), "intra_node_latency" and "inter_node_latency" (seconds, 0).
inline cluster_spec cluster_spec_from_json(const nlohmann::json& j) {
  const detail::json_reader c{j, ""};
  c.object({"version", "name", "memory_bytes", "usable_fraction", "peak_flops_bf16",
            "peak_flops_fp8", "achieved_fraction", "gpus_per_node", "intra_node_bandwidth",
            "intra_node_latency", "inter_node_bandwidth", "inter_node_latency"});
  c.version(cluster_spec_json_version, "cluster");
  cluster_spec k;
  k.name = c.has("name") ? c["name"].string() : std::string("cluster");
  // Numbers are read as any finite number: cluster_spec::check has the ranges, reported at
  // their key.
  auto number_or = [&](std::string_view key, double fallback) {
    return c.has(key) ? c[key].number() : fallback;
  };
  k.memory_bytes = c["memory_bytes"].number();
  k.usable_fraction = number_or("usable_fraction", k.usable_fraction);
  k.peak_flops_bf16 = c["peak_flops_bf16"].number();
  k.peak_flops_fp8 = number_or("peak_flops_fp8", 0.0);
  k.achieved_fraction = number_or("achieved_fraction", k.achieved_fraction);
  if (c.has("gpus_per_node")) {
    k.gpus_per_node = static_cast<std::uint32_t>(c["gpus_per_node"].integer(1, 1u << 20));
  }
  k.intra_node_bandwidth = c["intra_node_bandwidth"].number();
  k.intra_node_latency = number_or("intra_node_latency", 0.0);
  k.inter_node_bandwidth = c["inter_node_bandwidth"].number();
  k.inter_node_latency = number_or("inter_node_latency", 0.0);
  try {
    k.check("cluster");
  } catch (const field_error& e) {
    c[e.field()].error(e.rule());
  }
  return k;
}

inline cluster_spec read_cluster_spec(std::string_view text) {
  return cluster_spec_from_json(detail::json_reader::parse(text, "cluster"));
}

inline nlohmann::json cluster_spec_to_json(const cluster_spec& k) {
  return {{"version", cluster_spec_json_version},
          {"name", k.name},
          {"memory_bytes", k.memory_bytes},
          {"usable_fraction", k.usable_fraction},
          {"peak_flops_bf16", k.peak_flops_bf16},
          {"peak_flops_fp8", k.peak_flops_fp8},
          {"achieved_fraction", k.achieved_fraction},
          {"gpus_per_node", k.gpus_per_node},
          {"intra_node_bandwidth", k.intra_node_bandwidth},
          {"intra_node_latency", k.intra_node_latency},
          {"inter_node_bandwidth", k.inter_node_bandwidth},
          {"inter_node_latency", k.inter_node_latency}};
}

namespace detail {

/// A spec by preset name (`presets()`), else read by `read` from the JSON file of that path.
/// Errors name the path; a name that is no file and looks like none (no '/', no ".json") goes
/// to `preset()`, which throws listing the presets.
template <class Spec, class Presets, class Preset, class Read>
Spec load_preset_or_file(const std::string& name_or_path,
                         Presets presets,
                         Preset preset,
                         Read read) {
  for (const Spec& t : presets()) {
    if (t.name == name_or_path) {
      return t;
    }
  }
  std::string text;
  try {
    text = read_text_file(name_or_path);
  } catch (const invalid_argument&) {
    if (name_or_path.find('/') != std::string::npos ||
        name_or_path.find(".json") != std::string::npos) {
      throw;  // meant as a file: say why it cannot be read
    }
    preset(name_or_path);  // throws: unknown name, listing the presets
  }
  try {
    return read(text);
  } catch (const invalid_argument& e) {
    detail::fail(name_or_path, ": ", e.what());
  }
}

}  // namespace detail

/// A model by preset name (model_presets()), else read from the model JSON file of that path.
/// Errors name the path; an unknown name that is no file lists the presets.
inline transformer_spec load_transformer_spec(const std::string& name_or_path) {
  return detail::load_preset_or_file<transformer_spec>(
      name_or_path, [] { return model_presets(); },
      [](const std::string& n) { return model_preset(n); },
      [](const std::string& t) { return read_transformer_spec(t); });
}

/// A cluster by preset name (cluster_presets()), else read from that cluster JSON file.
inline cluster_spec load_cluster_spec(const std::string& name_or_path) {
  return detail::load_preset_or_file<cluster_spec>(
      name_or_path, [] { return cluster_presets(); },
      [](const std::string& n) { return cluster_preset(n); },
      [](const std::string& t) { return read_cluster_spec(t); });
}

/// One plan as JSON: its layout, schedule, recompute, whether it fits, its time and rates (SI
/// units in the key: seconds, bytes) and per stage its layers and memory parts.
inline nlohmann::json plan_entry_to_json(const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  nlohmann::json j{{"layout",
                    {{"tp", l.tp},
                     {"pp", l.pp},
                     {"dp", l.dp},
                     {"v", l.chunks},
                     {"micro_batch", l.micro_batch},
                     {"microbatches", l.microbatches},
                     {"sequence_parallel", l.sequence_parallel}}},
                   {"schedule", e.choice.schedule},
                   {"recompute", std::string(to_string(e.choice.recompute))},
                   {"fits", e.fits},
                   {"step_time_s", e.step_time_s},
                   {"makespan_s", e.makespan_s},
                   {"dp_exposed_s", e.dp_exposed_s},
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
                           {"memory_bytes",
                            {{"weights", st.statics.weights},
                             {"gradients", st.statics.gradients},
                             {"optimizer", st.statics.optimizer},
                             {"activations", st.activations},
                             {"total", st.total}}}});
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
  if (r.baseline) {
    nlohmann::json b = plan_entry_to_json(*r.baseline);
    if (!r.plans.empty()) {
      const plan_comparison c = compare_plans(r.plans.front(), *r.baseline, job.gpus);
      b["speedup"] = c.speedup;
      b["time_saved"] = c.time_saved;
      b["gpus_recovered"] = c.gpus_recovered;
    }
    j["baseline"] = std::move(b);
  }
  if (r.smallest_need_bytes > 0.0) {
    j["smallest_need_bytes"] = r.smallest_need_bytes;
  }
  return j;
}

/// Which ranks run which pipeline stage, and which layers each of its chunks holds, in the rank
/// order of job_costs.hpp (tensor parallelism fastest, then data, then pipeline: rank = t +
/// TP·(d + DP·s)). Layers are numbered 0 .. L−1 in model order.
inline nlohmann::json plan_map_to_json(const training_job& job, const plan_entry& e) {
  const plan_layout& l = e.choice.layout;
  std::vector<std::uint32_t> first(e.choice.partition.size() + 1, 0);
  for (std::size_t g = 0; g < e.choice.partition.size(); ++g) {
    first[g + 1] = first[g] + e.choice.partition[g];
  }
  nlohmann::json j{{"version", plan_json_version},
                   {"model", job.model.name},
                   {"schedule", e.choice.schedule},
                   {"rank_order", "tp, dp, pp (rank = t + tp*(d + dp*stage))"},
                   {"tp", l.tp},
                   {"pp", l.pp},
                   {"dp", l.dp},
                   {"v", l.chunks},
                   {"stages", nlohmann::json::array()}};
  const std::uint64_t per_stage = std::uint64_t{l.tp} * l.dp;
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    const plan_stage& st = e.stages[s];
    nlohmann::json chunks = nlohmann::json::array();
    for (global_chunk g : st.chunks) {
      chunks.push_back({{"global_chunk", g},
                        {"layers", {first[g], first[g + 1] - 1}},
                        {"embedding", g == 0},
                        {"head", g + 1 == e.choice.partition.size()}});
    }
    j["stages"].push_back({{"stage", s},
                           {"ranks", {{"first", s * per_stage}, {"count", per_stage}}},
                           {"chunks", std::move(chunks)}});
  }
  return j;
}

}  // namespace pipesched
