#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/model/memory_model.hpp"

// Memory model JSON, schema v1 (docs/formats.md). Strict like the cost model reader: unknown
// keys, wrong types and negative numbers are errors naming the JSON pointer.

namespace pipesched {

/// Version of the memory model JSON written by memory_model_to_json.
inline constexpr int memory_model_json_version = 1;

namespace detail {

inline nlohmann::json chunk_memory_json(const chunk_memory& c) {
  nlohmann::json j = {{"activation", c.activation}, {"weight_grad_input", c.weight_grad_input}};
  if (c.received != 0.0) {
    j["received"] = c.received;
  }
  if (c.input != 0.0) {
    j["input"] = c.input;
  }
  return j;
}
// M_W <= M_B is also memory_model's rule; checked here first so the error names the JSON path.
inline chunk_memory read_chunk_memory(const json_reader& c) {
  c.object({"activation", "weight_grad_input", "received", "input"});
  chunk_memory m{c["activation"].non_negative(), c["weight_grad_input"].non_negative(),
                 c.non_negative_or("received", 0.0), c.non_negative_or("input", 0.0)};
  if (m.weight_grad_input > m.activation) {
    c["weight_grad_input"].error("must be <= activation (", m.activation, ")");
  }
  return m;
}

inline nlohmann::json memory_factors_json(const memory_factors& f) {
  if (f.activation == f.weight_grad_input && f.activation == f.input &&
      f.activation == f.received) {
    return f.activation;  // the short form: one number for every buffer
  }
  return {{"activation", f.activation},
          {"weight_grad_input", f.weight_grad_input},
          {"input", f.input},
          {"received", f.received}};
}
// A number (every buffer that factor) or an object whose keys default to 1.
inline memory_factors read_memory_factors(const json_reader& c) {
  if (c.v.is_number()) {
    return memory_factors::all(c.non_negative());
  }
  c.object({"activation", "weight_grad_input", "input", "received"});
  return memory_factors{c.non_negative_or("activation", 1.0),
                        c.non_negative_or("weight_grad_input", 1.0),
                        c.non_negative_or("input", 1.0), c.non_negative_or("received", 1.0)};
}

}  // namespace detail

/// Memory model as JSON (schema v1):
/// `{"version":1, "activation":M_B, "weight_grad_input":M_W, "received":R,
///   "stages":[{entry}...] | "chunks":[[{entry}...]...], "static":[S0, S1, ...]}`
/// with entries `{"activation", "weight_grad_input", "received" (optional, 0), "input"
/// (optional, 0)}`; `input` is M_in, what an F marked recompute keeps (docs/model.md §5), written
/// only when not 0; `microbatches` (per-micro-batch factors, docs/model.md §5.1) when set.
inline nlohmann::json memory_model_to_json(const memory_model& m) {
  nlohmann::json j = {{"version", memory_model_json_version}};
  const chunk_memory& u = m.uniform_memory();
  j["activation"] = u.activation;
  j["weight_grad_input"] = u.weight_grad_input;
  j["received"] = u.received;
  if (u.input != 0.0) {
    j["input"] = u.input;
  }
  if (!m.stage_memory().empty()) {
    j["stages"] = nlohmann::json::array();
    for (const chunk_memory& c : m.stage_memory()) {
      j["stages"].push_back(detail::chunk_memory_json(c));
    }
  }
  if (!m.chunk_memories().empty()) {
    const std::size_t v = m.chunk_memory_chunks();
    j["chunks"] = nlohmann::json::array();
    for (std::size_t i = 0; i < m.chunk_memories().size(); ++i) {
      if (i % v == 0) {
        j["chunks"].push_back(nlohmann::json::array());
      }
      j["chunks"].back().push_back(detail::chunk_memory_json(m.chunk_memories()[i]));
    }
  }
  if (!m.static_memories().empty()) {
    j["static"] = m.static_memories();
  }
  if (m.has_microbatch_factors()) {
    const auto& t = m.microbatch_factors();
    j["microbatches"] = detail::microbatch_table_json(t.stages(), t.chunks(), t.values(),
                                                      detail::memory_factors_json);
  }
  return j;
}

/// Reads a memory model (schema v1). Uniform defaults: activation 1, weight_grad_input 0.5,
/// received 0; weight_grad_input must be <= activation everywhere; `stages` and `chunks`
/// exclude each other.
inline memory_model memory_model_from_json(const nlohmann::json& j) {
  const detail::json_reader c{j, ""};
  c.object({"version", "activation", "weight_grad_input", "received", "input", "stages", "chunks",
            "static", "microbatches"});
  c.version(memory_model_json_version, "memory model");
  const chunk_memory u{c.non_negative_or("activation", 1.0),
                       c.non_negative_or("weight_grad_input", 0.5),
                       c.non_negative_or("received", 0.0), c.non_negative_or("input", 0.0)};
  if (u.weight_grad_input > u.activation) {
    if (c.has("weight_grad_input")) {
      c["weight_grad_input"].error("must be <= activation (", u.activation, ")");
    }
    c["activation"].error("must be >= weight_grad_input (", u.weight_grad_input, ", the default)");
  }
  memory_model m(u);
  if (c.has("stages") && c.has("chunks")) {
    c["chunks"].error("cannot be combined with /stages (give one of them)");
  }
  if (c.has("stages")) {
    const detail::json_reader st = c["stages"];
    std::vector<chunk_memory> per_stage(st.array());
    for (std::size_t s = 0; s < per_stage.size(); ++s) {
      per_stage[s] = detail::read_chunk_memory(st[s]);
    }
    m.set_stage_memory(std::move(per_stage));
  }
  if (c.has("chunks")) {
    auto [v, flat] = detail::read_per_chunk(c["chunks"], detail::read_chunk_memory);
    m.set_chunk_memory(v, std::move(flat));
  }
  if (c.has("static")) {
    const detail::json_reader st = c["static"];
    std::vector<double> s(st.array());
    for (std::size_t i = 0; i < s.size(); ++i) {
      s[i] = st[i].non_negative();
    }
    m.set_static_memory(std::move(s));
  }
  if (c.has("microbatches")) {
    auto [stages, chunks, flat] =
        detail::read_microbatch_table(c["microbatches"], detail::read_memory_factors);
    m.set_microbatch_factors(stages, chunks, std::move(flat));
  }
  return m;
}

/// Parses JSON text, then memory_model_from_json().
inline memory_model read_memory_model(std::string_view text) {
  return memory_model_from_json(detail::json_reader::parse(text, "read_memory_model"));
}
/// memory_model_to_json() as text, indented by 2.
inline std::string write_memory_model(const memory_model& m) {
  return memory_model_to_json(m).dump(2);
}

}  // namespace pipesched
