#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/model/cost_model.hpp"

// Cost model JSON, schema v1 (docs/formats.md). Reading is strict: unknown keys, wrong types,
// negative or non-finite numbers and unsupported versions are rejected with the JSON pointer of
// the value, e.g. `/stages/2/forward: must be a finite number >= 0, not -1`.

namespace pipesched {

/// Version of the cost model JSON written by cost_model_to_json.
inline constexpr int cost_model_json_version = 1;

namespace detail {

inline nlohmann::json costs_json(const op_costs& c) {
  nlohmann::json j = {{"forward", c.forward},
                      {"backward_input", c.backward_input},
                      {"backward_weight", c.backward_weight}};
  if (c.overlapped) {
    j["overlapped"] = *c.overlapped;
  }
  if (c.recompute) {
    j["recompute"] = *c.recompute;
  }
  return j;
}
inline op_costs read_costs(const json_reader& c) {
  c.object({"forward", "backward_input", "backward_weight", "overlapped", "recompute"});
  op_costs out{c["forward"].non_negative(), c["backward_input"].non_negative(),
               c["backward_weight"].non_negative()};
  if (c.has("overlapped")) {
    out.overlapped = c["overlapped"].non_negative();
  }
  if (c.has("recompute")) {
    out.recompute = c["recompute"].non_negative();
  }
  return out;
}

inline nlohmann::json cost_factors_json(const cost_factors& f) {
  if (f.forward == f.backward_input && f.forward == f.backward_weight && !f.recompute) {
    return f.forward;  // the short form: one number for every kind
  }
  nlohmann::json j = {{"forward", f.forward},
                      {"backward_input", f.backward_input},
                      {"backward_weight", f.backward_weight}};
  if (f.recompute) {
    j["recompute"] = *f.recompute;
  }
  return j;
}
// A number (every kind that factor) or an object whose keys default to 1.
inline cost_factors read_cost_factors(const json_reader& c) {
  if (c.v.is_number()) {
    return cost_factors::all(c.non_negative());
  }
  c.object({"forward", "backward_input", "backward_weight", "recompute"});
  cost_factors f{c.non_negative_or("forward", 1.0), c.non_negative_or("backward_input", 1.0),
                 c.non_negative_or("backward_weight", 1.0)};
  if (c.has("recompute")) {
    f.recompute = c["recompute"].non_negative();
  }
  return f;
}

}  // namespace detail

/// Cost model as JSON (schema v1):
/// `{"version":1, "forward":F, "backward_input":B, "backward_weight":W, "comm":C,
///   "overlapped":T_FB, "stages":[{triple}...] | "chunks":[[{triple}...]...], "links":[[...]...]}`
/// where `overlapped` (T_FB of an overlapped F and B pair, docs/model.md §3; also allowed in
/// each triple), `recompute` (T_R of an R, default T_F; also allowed in each triple), `stages`,
/// `chunks` and `links` appear only when set; `microbatches` (per-micro-batch factors,
/// docs/model.md §3.1) likewise.
inline nlohmann::json cost_model_to_json(const cost_model& m) {
  nlohmann::json j = {{"version", cost_model_json_version}};
  const op_costs& u = m.uniform_costs();
  j["forward"] = u.forward;
  j["backward_input"] = u.backward_input;
  j["backward_weight"] = u.backward_weight;
  j["comm"] = m.uniform_comm();
  if (u.overlapped) {
    j["overlapped"] = *u.overlapped;
  }
  if (u.recompute) {
    j["recompute"] = *u.recompute;
  }
  if (!m.stage_costs().empty()) {
    j["stages"] = nlohmann::json::array();
    for (const op_costs& c : m.stage_costs()) {
      j["stages"].push_back(detail::costs_json(c));
    }
  }
  if (!m.chunk_costs().empty()) {
    const std::size_t v = m.chunk_costs_chunks();
    j["chunks"] = nlohmann::json::array();
    for (std::size_t i = 0; i < m.chunk_costs().size(); ++i) {
      if (i % v == 0) {
        j["chunks"].push_back(nlohmann::json::array());
      }
      j["chunks"].back().push_back(detail::costs_json(m.chunk_costs()[i]));
    }
  }
  if (!m.link_comm().empty()) {
    const std::size_t p = static_cast<std::size_t>(std::llround(std::sqrt(m.link_comm().size())));
    j["links"] = nlohmann::json::array();
    for (std::size_t from = 0; from < p; ++from) {
      nlohmann::json row = nlohmann::json::array();
      for (std::size_t to = 0; to < p; ++to) {
        row.push_back(m.link_comm()[from * p + to]);
      }
      j["links"].push_back(std::move(row));
    }
  }
  if (m.has_microbatch_factors()) {
    const auto& t = m.microbatch_factors();
    j["microbatches"] = detail::microbatch_table_json(t.stages(), t.chunks(), t.values(),
                                                      detail::cost_factors_json);
  }
  return j;
}

/// Reads a cost model (schema v1). The uniform triple defaults to 1 each and `comm` to 0;
/// entries of `stages` and `chunks` need all three fields; `stages` and `chunks` exclude each
/// other; `links` is a square matrix (row = sending stage, column = receiving stage);
/// `microbatches` holds one factor entry per micro-batch (detail::read_microbatch_table).
inline cost_model cost_model_from_json(const nlohmann::json& j) {
  const detail::json_reader c{j, ""};
  c.object({"version", "forward", "backward_input", "backward_weight", "comm", "stages", "chunks",
            "links", "overlapped", "recompute", "microbatches"});
  c.version(cost_model_json_version, "cost model");
  cost_model m(op_costs{c.non_negative_or("forward", 1.0), c.non_negative_or("backward_input", 1.0),
                        c.non_negative_or("backward_weight", 1.0)},
               c.non_negative_or("comm", 0.0));
  if (c.has("overlapped")) {
    m.set_overlapped(c["overlapped"].non_negative());
  }
  if (c.has("recompute")) {
    m.set_recompute(c["recompute"].non_negative());
  }
  if (c.has("stages") && c.has("chunks")) {
    c["chunks"].error("cannot be combined with /stages (give one of them)");
  }
  if (c.has("stages")) {
    const detail::json_reader st = c["stages"];
    std::vector<op_costs> per_stage(st.array());
    for (std::size_t s = 0; s < per_stage.size(); ++s) {
      per_stage[s] = detail::read_costs(st[s]);
    }
    m.set_stage_costs(std::move(per_stage));
  }
  if (c.has("chunks")) {
    auto [v, flat] = detail::read_per_chunk(c["chunks"], detail::read_costs);
    m.set_chunk_costs(v, std::move(flat));
  }
  if (c.has("links")) {
    const detail::json_reader l = c["links"];
    const std::size_t p = l.array();
    std::vector<double> lat;
    lat.reserve(p * p);
    for (std::size_t from = 0; from < p; ++from) {
      const detail::json_reader row = l[from];
      if (row.array() != p) {
        row.error("must hold ", p, " latencies (a square matrix, one row per stage)");
      }
      for (std::size_t to = 0; to < p; ++to) {
        lat.push_back(row[to].non_negative());
      }
    }
    m.set_link_comm(static_cast<std::uint32_t>(p), std::move(lat));
  }
  if (c.has("microbatches")) {
    auto [stages, chunks, flat] =
        detail::read_microbatch_table(c["microbatches"], detail::read_cost_factors);
    m.set_microbatch_factors(stages, chunks, std::move(flat));
  }
  return m;
}

/// Parses JSON text, then cost_model_from_json().
inline cost_model read_cost_model(std::string_view text) {
  return cost_model_from_json(detail::json_reader::parse(text, "read_cost_model"));
}
/// cost_model_to_json() as text, indented by 2.
inline std::string write_cost_model(const cost_model& m) {
  return cost_model_to_json(m).dump(2);
}

}  // namespace pipesched
