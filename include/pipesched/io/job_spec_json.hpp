#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/io/json.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/plan/job.hpp"

// The model and cluster JSON the planner reads (docs/formats.md, "Plans"), apart from the plan
// writers so that a reader of these files does not compile the planner.

namespace pipesched {

inline constexpr int transformer_spec_json_version = 1;
inline constexpr int cluster_spec_json_version = 1;

/// A model file (schema v1): `{"version": 1, "layers", "hidden", "ffn", "heads", "kv_heads",
/// "vocab", "mlp": "gelu" | "swiglu", "norm": "layernorm" | "rmsnorm", "tied_embeddings"}`,
/// and optionally "name", "head_dim" (default hidden / heads), "activation_bytes" (2),
/// "attention": "flash" | "materialized" (flash), "dropout" (false), "bias" (false),
/// "memory_efficient_norm" (false), "position": "rotary" | "learned" (rotary); a mixture of
/// experts: "experts" (0: dense), "top_k", "expert_ffn", "shared_experts" (0), "dense_layers" (0),
/// "capacity_factor" (0: dropless); MLA attention: "mla": {"q_lora_rank", "kv_lora_rank",
/// "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"}.
inline transformer_spec transformer_spec_from_json(const nlohmann::json& j) {
  const detail::json_reader c{j, ""};
  c.object({"version",
            "name",
            "layers",
            "hidden",
            "ffn",
            "heads",
            "kv_heads",
            "head_dim",
            "vocab",
            "mlp",
            "norm",
            "tied_embeddings",
            "activation_bytes",
            "attention",
            "dropout",
            "bias",
            "memory_efficient_norm",
            "position",
            "experts",
            "top_k",
            "expert_ffn",
            "shared_experts",
            "dense_layers",
            "capacity_factor",
            "mla"});
  c.version(transformer_spec_json_version, "model");
  transformer_spec t;
  constexpr std::uint64_t u32 = std::numeric_limits<std::uint32_t>::max();
  constexpr std::uint64_t big = std::uint64_t{1} << 40;
  t.name = c.has("name") ? c["name"].name() : std::string("model");
  t.layers = static_cast<std::uint32_t>(c["layers"].integer(1, max_model_layers));
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
  if (c.has("attention")) {
    const std::string a = c["attention"].string();
    const auto k = parse_attention_kind(a);
    if (!k) {
      c["attention"].error("must be \"flash\" or \"materialized\", not ",
                           detail::json_reader::quote(a));
    }
    t.attention = *k;
  }
  if (c.has("position")) {
    const std::string a = c["position"].string();
    if (a != "rotary" && a != "learned") {
      c["position"].error("must be \"rotary\" or \"learned\", not ", detail::json_reader::quote(a));
    }
    t.position = a == "rotary" ? position_kind::rotary : position_kind::learned;
  }
  for (auto [key, field] :
       {std::pair{"dropout", &transformer_spec::dropout},
        std::pair{"bias", &transformer_spec::bias},
        std::pair{"memory_efficient_norm", &transformer_spec::memory_efficient_norm}}) {
    if (c.has(key)) {
      if (!c[key].v.is_boolean()) {
        c[key].error("must be true or false, not ", c[key].v.dump());
      }
      t.*field = c[key].v.get<bool>();
    }
  }
  for (auto [key, field] : {std::pair{"experts", &transformer_spec::experts},
                            std::pair{"top_k", &transformer_spec::top_k},
                            std::pair{"shared_experts", &transformer_spec::shared_experts},
                            std::pair{"dense_layers", &transformer_spec::dense_layers}}) {
    if (c.has(key)) {
      t.*field = static_cast<std::uint32_t>(c[key].integer(0, u32));
    }
  }
  if (c.has("expert_ffn")) {
    t.expert_ffn = c["expert_ffn"].integer(0, big);
  }
  if (c.has("capacity_factor")) {
    t.capacity_factor = c["capacity_factor"].number();
  }
  if (c.has("mla")) {
    const detail::json_reader m = c["mla"];
    m.object({"q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"});
    t.mla = true;
    t.q_lora_rank = m["q_lora_rank"].integer(1, big);
    t.kv_lora_rank = m["kv_lora_rank"].integer(1, big);
    t.qk_nope_head_dim = m["qk_nope_head_dim"].integer(1, big);
    t.qk_rope_head_dim = m["qk_rope_head_dim"].integer(1, big);
    t.v_head_dim = m["v_head_dim"].integer(1, big);
  }
  try {
    t.check("model");
  } catch (const field_error& e) {
    // The model's rules, at the key they concern; a rule about a key the file left out (top_k
    // missing beside experts) at the document.
    if (c.has("mla") && c["mla"].has(e.field())) {
      c["mla"][e.field()].error(e.rule());
    }
    if (!c.has(e.field())) {
      c.error(e.field(), ": ", e.rule());
    }
    c[e.field()].error(e.rule());
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
                   {"activation_bytes", t.activation_bytes},
                   {"attention", std::string(to_string(t.attention))},
                   {"dropout", t.dropout},
                   {"bias", t.bias},
                   {"position", std::string(to_string(t.position))}};
  if (t.head_dim != 0) {
    j["head_dim"] = t.head_dim;
  }
  if (t.memory_efficient_norm) {  // written only when set: other models' files stay as they were
    j["memory_efficient_norm"] = true;
  }
  // A dense model's file stays as it was.
  if (t.is_moe()) {
    j["experts"] = t.experts;
    j["top_k"] = t.top_k;
    j["expert_ffn"] = t.expert_ffn;
    j["shared_experts"] = t.shared_experts;
    j["dense_layers"] = t.dense_layers;
    j["capacity_factor"] = t.capacity_factor;
  }
  if (t.mla) {
    j["mla"] = {{"q_lora_rank", t.q_lora_rank},
                {"kv_lora_rank", t.kv_lora_rank},
                {"qk_nope_head_dim", t.qk_nope_head_dim},
                {"qk_rope_head_dim", t.qk_rope_head_dim},
                {"v_head_dim", t.v_head_dim}};
  }
  return j;
}

namespace detail {

/// An efficiency curve's JSON: `[[size, efficiency], ...]` (efficiency_curve's form).
inline efficiency_curve efficiency_curve_from_json(const json_reader& c) {
  efficiency_curve out;
  const std::size_t n = c.array();
  for (std::size_t i = 0; i < n; ++i) {
    const json_reader point = c[i];
    if (point.array() != 2) {
      point.error("must be a pair [size, efficiency], not ", point.v.dump());
    }
    out.points.emplace_back(point[std::size_t{0}].number(), point[std::size_t{1}].number());
  }
  return out;
}

inline nlohmann::json efficiency_curve_to_json(const efficiency_curve& e) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [size, eff] : e.points) {
    out.push_back({size, eff});
  }
  return out;
}

}  // namespace detail

/// A cluster file (schema v1): `{"version": 1, "memory_bytes", "peak_flops_bf16",
/// "intra_node_bandwidth", "inter_node_bandwidth"}` (bytes, FLOP/s, bytes/s) and optionally
/// "name", "usable_fraction" (0.9), "peak_flops_fp8" (0), "gpus_per_node" (8),
/// "intra_node_latency" and "inter_node_latency" (seconds, 0), and the kernel model's
/// "hbm_bandwidth" (bytes/s, 0: memory-bound kernels not timed), "gemm_efficiency" and
/// "attention_efficiency" (curves `[[FLOPs, efficiency], ...]`, docs/model.md §10.2),
/// "memory_efficiency" (1), "overlap_slowdown" (0: compute beside a collective runs at full
/// speed) and "achieved_fraction" (1 with a GEMM curve, else 0.5: the one share of the peak
/// every op achieves, as files without the curves were read).
inline cluster_spec cluster_spec_from_json(const nlohmann::json& j) {
  const detail::json_reader c{j, ""};
  c.object({"version", "name", "memory_bytes", "usable_fraction", "peak_flops_bf16",
            "peak_flops_fp8", "achieved_fraction", "gpus_per_node", "intra_node_bandwidth",
            "intra_node_latency", "inter_node_bandwidth", "inter_node_latency", "hbm_bandwidth",
            "gemm_efficiency", "attention_efficiency", "memory_efficiency", "overlap_slowdown"});
  c.version(cluster_spec_json_version, "cluster");
  cluster_spec k;
  k.name = c.has("name") ? c["name"].name() : std::string("cluster");
  // Numbers are read as any finite number: cluster_spec::check has the ranges, reported at
  // their key.
  auto number_or = [&](std::string_view key, double fallback) {
    return c.has(key) ? c[key].number() : fallback;
  };
  k.memory_bytes = c["memory_bytes"].number();
  k.usable_fraction = number_or("usable_fraction", k.usable_fraction);
  k.peak_flops_bf16 = c["peak_flops_bf16"].number();
  k.peak_flops_fp8 = number_or("peak_flops_fp8", 0.0);
  if (c.has("gemm_efficiency")) {
    k.gemm_efficiency = detail::efficiency_curve_from_json(c["gemm_efficiency"]);
  }
  if (c.has("attention_efficiency")) {
    k.attention_efficiency = detail::efficiency_curve_from_json(c["attention_efficiency"]);
  }
  k.achieved_fraction =
      number_or("achieved_fraction", k.gemm_efficiency.points.empty() ? 0.5 : 1.0);
  k.hbm_bandwidth = number_or("hbm_bandwidth", 0.0);
  k.memory_efficiency = number_or("memory_efficiency", 1.0);
  k.overlap_slowdown = number_or("overlap_slowdown", 0.0);
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
    // A curve's rule names its point: "gemm_efficiency/2".
    const std::string& f = e.field();
    if (const auto slash = f.find('/'); slash != std::string::npos) {
      c[std::string_view(f).substr(0, slash)][std::stoul(f.substr(slash + 1))].error(e.rule());
    }
    c[f].error(e.rule());
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
          {"inter_node_latency", k.inter_node_latency},
          {"hbm_bandwidth", k.hbm_bandwidth},
          {"gemm_efficiency", detail::efficiency_curve_to_json(k.gemm_efficiency)},
          {"attention_efficiency", detail::efficiency_curve_to_json(k.attention_efficiency)},
          {"memory_efficiency", k.memory_efficiency},
          {"overlap_slowdown", k.overlap_slowdown}};
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

}  // namespace pipesched
