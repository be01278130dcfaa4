#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/analysis/memory_checker.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/analysis/timing_simulator.hpp"

// Versioned JSON for the cost model, the memory model and simulation results (schemas in
// docs/formats.md). Reading is strict: unknown fields, wrong types, negative or non-finite
// numbers and unsupported versions are rejected with the JSON pointer of the value, e.g.
//   /stages/2/forward: must be a finite number >= 0, not -1

namespace pipesched {

/// Current version of the cost-model, memory-model and simulation-result schemas.
inline constexpr int model_json_version = 1;

namespace detail {

/// A JSON value and its JSON pointer, over json_reader, for the strict model readers:
/// unknown fields are errors here (the model files are small and hand-written, so a typo
/// like "fwd" must not silently fall back to a default).
struct json_at {
  const nlohmann::json& v;
  std::string path;

  bool has(std::string_view key) const { return v.is_object() && v.contains(key); }
  json_at operator[](std::string_view key) const {
    return {json_reader::required(v, key, path), json_reader::child(path, key)};
  }
  json_at operator[](std::size_t i) const { return {v.at(i), json_reader::child(path, i)}; }
  template <class... Args>
  [[noreturn]] void error(const Args&... rule) const {
    json_reader::fail_at(path, concat(rule...));
  }
  void object(std::initializer_list<std::string_view> allowed) const {
    json_reader::object(v, path);
    for (const auto& item : v.items()) {
      if (std::find(allowed.begin(), allowed.end(), item.key()) == allowed.end()) {
        std::string list;
        for (std::string_view a : allowed) {
          list += list.empty() ? "" : ", ";
          list += a;
        }
        json_reader::fail_at(json_reader::child(path, item.key()),
                             "unknown key (expected one of: " + list + ")");
      }
    }
  }
  std::size_t array() const { return json_reader::array(v, path).size(); }
  double non_negative() const { return json_reader::non_negative(v, path); }
  double non_negative_or(std::string_view key, double fallback) const {
    return has(key) ? (*this)[key].non_negative() : fallback;
  }
  double number() const {
    if (!v.is_number() || !std::isfinite(v.get<double>())) {
      error("must be a finite number, not ", v.dump());
    }
    return v.get<double>();
  }
  std::uint64_t integer(std::uint64_t lo, std::uint64_t hi) const {
    return json_reader::integer(v, path, lo, hi);
  }
  std::string string() const { return json_reader::string(v, path); }
  void version(std::uint64_t supported, std::string_view what) const {
    const json_at c = (*this)["version"];
    const auto got = c.integer(0, std::numeric_limits<std::uint32_t>::max());
    if (got != supported) {
      c.error("unsupported ", what, " format version ", got, " (this library reads version ",
              supported, ")");
    }
  }
};

inline nlohmann::json costs_json(const op_costs& c) {
  return {{"forward", c.forward},
          {"backward_input", c.backward_input},
          {"backward_weight", c.backward_weight}};
}
inline op_costs read_costs(const json_at& c) {
  c.object({"forward", "backward_input", "backward_weight"});
  return {c["forward"].non_negative(), c["backward_input"].non_negative(),
          c["backward_weight"].non_negative()};
}
inline nlohmann::json chunk_memory_json(const chunk_memory& c) {
  nlohmann::json j = {{"activation", c.activation}, {"weight_grad_input", c.weight_grad_input}};
  if (c.received != 0.0) {
    j["received"] = c.received;
  }
  return j;
}
inline chunk_memory read_chunk_memory(const json_at& c) {
  c.object({"activation", "weight_grad_input", "received"});
  chunk_memory m{c["activation"].non_negative(), c["weight_grad_input"].non_negative(),
                 c.non_negative_or("received", 0.0)};
  if (m.weight_grad_input > m.activation) {
    c["weight_grad_input"].error("must be <= activation (", m.activation, ")");
  }
  return m;
}
// [[x, x], [x, x]]: one inner array per stage, all of the same non-zero length; returns the
// chunk count and the entries flattened (index s*chunks + c).
template <class Read>
auto read_per_chunk(const json_at& c, Read&& read) {
  using T = decltype(read(c));
  std::vector<T> flat;
  std::uint32_t chunks = 0;
  const std::size_t n = c.array();
  if (n == 0) {
    c.error("must not be empty");
  }
  for (std::size_t s = 0; s < n; ++s) {
    const json_at row = c[s];
    const std::size_t k = row.array();
    if (s == 0) {
      if (k == 0 || k > std::numeric_limits<chunk_index>::max()) {
        row.error("must hold between 1 and ", std::numeric_limits<chunk_index>::max(), " chunks");
      }
      chunks = static_cast<std::uint32_t>(k);
    } else if (k != chunks) {
      row.error("must hold ", chunks, " chunks, like ", c.path, "/0");
    }
    for (std::size_t i = 0; i < k; ++i) {
      flat.push_back(read(row[i]));
    }
  }
  return std::pair{chunks, std::move(flat)};
}

}  // namespace detail

/// Cost model as JSON (schema v1):
/// `{"version":1, "forward":F, "backward_input":B, "backward_weight":W, "comm":C,
///   "stages":[{triple}...] | "chunks":[[{triple}...]...], "links":[[...]...]}`
/// where `stages`, `chunks` and `links` appear only when set.
inline nlohmann::json cost_model_to_json(const cost_model& m) {
  nlohmann::json j = {{"version", model_json_version}};
  const op_costs& u = m.uniform_costs();
  j["forward"] = u.forward;
  j["backward_input"] = u.backward_input;
  j["backward_weight"] = u.backward_weight;
  j["comm"] = m.uniform_comm();
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
  return j;
}

/// Reads a cost model (schema v1). The uniform triple defaults to 1 each and `comm` to 0;
/// entries of `stages` and `chunks` need all three fields; `stages` and `chunks` exclude each
/// other; `links` is a square matrix (row = sending stage, column = receiving stage).
inline cost_model cost_model_from_json(const nlohmann::json& j) {
  const detail::json_at c{j, ""};
  c.object({"version", "forward", "backward_input", "backward_weight", "comm", "stages", "chunks",
            "links"});
  c.version(model_json_version, "cost model");
  cost_model m(op_costs{c.non_negative_or("forward", 1.0), c.non_negative_or("backward_input", 1.0),
                        c.non_negative_or("backward_weight", 1.0)},
               c.non_negative_or("comm", 0.0));
  if (c.has("stages") && c.has("chunks")) {
    c["chunks"].error("cannot be combined with /stages (give one of them)");
  }
  if (c.has("stages")) {
    const detail::json_at st = c["stages"];
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
    const detail::json_at l = c["links"];
    const std::size_t p = l.array();
    std::vector<double> lat;
    lat.reserve(p * p);
    for (std::size_t from = 0; from < p; ++from) {
      const detail::json_at row = l[from];
      if (row.array() != p) {
        row.error("must hold ", p, " latencies (a square matrix, one row per stage)");
      }
      for (std::size_t to = 0; to < p; ++to) {
        lat.push_back(row[to].non_negative());
      }
    }
    m.set_link_comm(static_cast<std::uint32_t>(p), std::move(lat));
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

/// Memory model as JSON (schema v1):
/// `{"version":1, "activation":M_B, "weight_grad_input":M_W, "received":R,
///   "stages":[{entry}...] | "chunks":[[{entry}...]...], "static":[S0, S1, ...]}`
/// with entries `{"activation", "weight_grad_input", "received" (optional, 0)}`.
inline nlohmann::json memory_model_to_json(const memory_model& m) {
  nlohmann::json j = {{"version", model_json_version}};
  const chunk_memory& u = m.uniform_memory();
  j["activation"] = u.activation;
  j["weight_grad_input"] = u.weight_grad_input;
  j["received"] = u.received;
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
  return j;
}

/// Reads a memory model (schema v1). Uniform defaults: activation 1, weight_grad_input 0.5,
/// received 0; weight_grad_input must be <= activation everywhere; `stages` and `chunks`
/// exclude each other.
inline memory_model memory_model_from_json(const nlohmann::json& j) {
  const detail::json_at c{j, ""};
  c.object(
      {"version", "activation", "weight_grad_input", "received", "stages", "chunks", "static"});
  c.version(model_json_version, "memory model");
  const chunk_memory u{c.non_negative_or("activation", 1.0),
                       c.non_negative_or("weight_grad_input", 0.5),
                       c.non_negative_or("received", 0.0)};
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
    const detail::json_at st = c["stages"];
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
    const detail::json_at st = c["static"];
    std::vector<double> s(st.array());
    for (std::size_t i = 0; i < s.size(); ++i) {
      s[i] = st[i].non_negative();
    }
    m.set_static_memory(std::move(s));
  }
  return m;
}

inline memory_model read_memory_model(std::string_view text) {
  return memory_model_from_json(detail::json_reader::parse(text, "read_memory_model"));
}
inline std::string write_memory_model(const memory_model& m) {
  return memory_model_to_json(m).dump(2);
}

/// A simulation result as stored in JSON: the shape, the totals, per-stage summaries and,
/// when present, every op's interval.
struct simulation_record {
  std::string name;
  std::uint32_t stages = 0;
  std::uint32_t microbatches = 0;
  std::uint32_t chunks = 1;
  double makespan = 0.0;
  double bubble_rate = 0.0;
  std::optional<double> utilization;               ///< Σ busy / (p · makespan), when written
  std::optional<double> lower_bound;               ///< span lower bound (searching generators)
  std::optional<double> memory_limit;              ///< the per-stage limit checked, when given
  std::vector<std::string> violations;             ///< rule violations (schedule, memory)
  std::vector<stage_summary> summaries;            ///< one per stage
  std::vector<std::optional<double>> peak_memory;  ///< one per stage; nullopt when unknown
  std::optional<timeline> ops;                     ///< per-op times, when the file has them
  std::optional<std::string> deadlock;             ///< why the simulation stopped early
};

namespace detail {

inline nlohmann::json simulation_json(const schedule& sched,
                                      double makespan,
                                      double bubble_rate,
                                      double utilization,
                                      const std::vector<stage_summary>& stages,
                                      const std::vector<std::optional<double>>& peaks,
                                      const timeline* ops) {
  nlohmann::json j = {{"version", model_json_version}, {"name", sched.name()},
                      {"p", sched.stages()},           {"m", sched.microbatches()},
                      {"v", sched.chunks()},           {"makespan", makespan},
                      {"bubble_rate", bubble_rate},    {"utilization", utilization}};
  j["stages"] = nlohmann::json::array();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    nlohmann::json st = {
        {"span", stages[s].span}, {"busy", stages[s].busy}, {"idle", stages[s].idle}};
    st["peak_memory"] =
        s < peaks.size() && peaks[s] ? nlohmann::json(*peaks[s]) : nlohmann::json(nullptr);
    if (ops != nullptr) {
      st["ops"] = nlohmann::json::array();
      for (const timed_op& t : ops->stages[s]) {
        st["ops"].push_back({{"kind", std::string(to_string(t.o.kind))},
                             {"mb", t.o.mb},
                             {"chunk", t.o.chunk},
                             {"start", t.start},
                             {"end", t.end}});
      }
    }
    j["stages"].push_back(std::move(st));
  }
  return j;
}

}  // namespace detail

/// Simulation result as JSON (schema v1, docs/formats.md):
/// `{"version":1, "name":.., "p":.., "m":.., "v":.., "makespan":.., "bubble_rate":..,
///   "utilization":.., "stages":[{"span":.., "busy":.., "idle":.., "peak_memory":..|null,
///              "ops":[{"kind":"F","mb":0,"chunk":0,"start":0,"end":1}, ...]}, ...],
///   "deadlock":"...", "violations":["..."]}`
/// (deadlock only when the simulation could not finish; violations only when `memory` has
/// budget violations or lifetime errors). This overload takes the simulator's own numbers:
/// stage span / busy / idle, makespan, bubble rate and utilization; `memory` (check_memory)
/// gives peak_memory, otherwise null; `with_ops` = false (or a result simulated without
/// record_ops) leaves out the per-op lists. The writer adds no `lower_bound` or
/// `memory_limit`: a caller that has them sets those keys (the CLI does).
inline nlohmann::json simulation_to_json(const schedule& sched,
                                         const simulation_result& r,
                                         const memory_report* memory = nullptr,
                                         bool with_ops = true) {
  std::vector<stage_summary> stages;
  std::vector<std::optional<double>> peaks;
  for (std::size_t s = 0; s < r.stages.size(); ++s) {
    stages.push_back({r.stages[s].span, r.stages[s].busy, r.stages[s].idle});
    peaks.push_back(memory && s < memory->stages.size()
                        ? std::optional<double>(memory->stages[s].peak)
                        : std::nullopt);
  }
  std::optional<timeline> tl;
  if (with_ops && r.ops.size() == sched.stages()) {
    tl = to_timeline(sched, r);
  }
  nlohmann::json j = detail::simulation_json(sched, r.makespan, r.bubble_rate, r.utilization,
                                             stages, peaks, tl ? &*tl : nullptr);
  if (r.deadlock) {
    j["deadlock"] = r.deadlock->describe();
  }
  if (memory != nullptr && (!memory->errors.empty() || !memory->violations.empty())) {
    nlohmann::json v = nlohmann::json::array();
    for (const auto& e : memory->errors) {
      v.push_back("memory_lifetime: " + e.message);
    }
    for (const auto& b : memory->violations) {
      v.push_back("memory_budget: " + b.message);
    }
    j["violations"] = std::move(v);
  }
  return j;
}

/// As above from any timeline (unit steps, cost_timeline, a measured run): the summaries are
/// derived from the intervals (timeline::summary, timeline::bubble_rate); `memory` from
/// memory_curves() gives peak_memory.
inline nlohmann::json simulation_to_json(
    const schedule& sched,
    const timeline& tl,
    const std::vector<std::vector<memory_sample>>* memory = nullptr,
    bool with_ops = true) {
  std::vector<stage_summary> stages;
  std::vector<std::optional<double>> peaks;
  for (stage_index s = 0; s < tl.stages.size(); ++s) {
    stages.push_back(tl.summary(s));
    peaks.push_back(memory && s < memory->size() ? std::optional<double>(peak_of((*memory)[s]))
                                                 : std::nullopt);
  }
  return detail::simulation_json(sched, tl.makespan(), tl.bubble_rate(), tl.utilization(), stages,
                                 peaks, with_ops ? &tl : nullptr);
}

/// Reads a simulation result (schema v1); `ops` must be present on every stage or on none.
inline simulation_record simulation_from_json(const nlohmann::json& j) {
  const detail::json_at c{j, ""};
  c.object({"version", "name", "p", "m", "v", "makespan", "bubble_rate", "utilization",
            "lower_bound", "memory_limit", "stages", "deadlock", "violations"});
  c.version(model_json_version, "simulation result");
  simulation_record r;
  r.name = c["name"].string();
  r.stages = static_cast<std::uint32_t>(c["p"].integer(1, max_stages));
  r.microbatches = static_cast<std::uint32_t>(c["m"].integer(1, max_microbatches));
  r.chunks = static_cast<std::uint32_t>(c["v"].integer(1, 65535));
  r.makespan = c["makespan"].non_negative();
  r.bubble_rate = c["bubble_rate"].number();
  if (c.has("utilization")) {
    r.utilization = c["utilization"].non_negative();
  }
  if (c.has("lower_bound")) {
    r.lower_bound = c["lower_bound"].non_negative();
  }
  if (c.has("memory_limit")) {
    r.memory_limit = c["memory_limit"].non_negative();
  }
  if (c.has("deadlock")) {
    r.deadlock = c["deadlock"].string();
  }
  if (c.has("violations")) {
    const detail::json_at vs = c["violations"];
    const std::size_t n = vs.array();
    for (std::size_t i = 0; i < n; ++i) {
      r.violations.push_back(vs[i].string());
    }
  }
  const detail::json_at st = c["stages"];
  if (st.array() != r.stages) {
    st.error("must hold p (", r.stages, ") entries");
  }
  std::size_t with_ops = 0;
  timeline tl;
  tl.stages.resize(r.stages);
  for (stage_index s = 0; s < r.stages; ++s) {
    const detail::json_at e = st[s];
    e.object({"span", "busy", "idle", "peak_memory", "ops"});
    r.summaries.push_back({e["span"].non_negative(), e["busy"].non_negative(), e["idle"].number()});
    const detail::json_at pk = e["peak_memory"];
    r.peak_memory.push_back(pk.v.is_null() ? std::nullopt
                                           : std::optional<double>(pk.non_negative()));
    if (!e.has("ops")) {
      continue;
    }
    ++with_ops;
    const detail::json_at ops = e["ops"];
    const std::size_t n = ops.array();
    for (std::size_t i = 0; i < n; ++i) {
      const detail::json_at o = ops[i];
      o.object({"kind", "mb", "chunk", "start", "end"});
      const std::string k = o["kind"].string();
      const auto kind = parse_op_kind(k);
      if (!kind) {
        o["kind"].error("unknown op kind \"", k, "\"");
      }
      const auto mb = static_cast<microbatch_index>(o["mb"].integer(0, r.microbatches - 1));
      const auto chunk = static_cast<chunk_index>(o["chunk"].integer(0, r.chunks - 1));
      const double start = o["start"].non_negative();
      const double end = o["end"].non_negative();
      if (end < start) {
        o["end"].error("must be >= start (", start, ")");
      }
      tl.stages[s].push_back({s, i, make_op(*kind, mb, chunk), start, end});
    }
  }
  if (with_ops != 0 && with_ops != r.stages) {
    st.error("ops must be given for every stage or for none");
  }
  if (with_ops != 0) {
    tl.reported_bubble_rate = r.bubble_rate;
    r.ops = std::move(tl);
  }
  return r;
}

inline simulation_record read_simulation(std::string_view text) {
  return simulation_from_json(detail::json_reader::parse(text, "read_simulation"));
}

}  // namespace pipesched
