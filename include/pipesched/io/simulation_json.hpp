#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/analysis/schedule_report.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/io/detail/json_reader.hpp"
#include "pipesched/io/timeline.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/timed_op.hpp"

// Simulation result JSON, schema v1 (docs/formats.md): what `pipesched simulate --json`
// prints. Reading is strict like the model readers: unknown keys are errors naming the JSON
// pointer.

namespace pipesched {

/// Version of the simulation result JSON written by simulation_to_json.
inline constexpr int simulation_json_version = 1;

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
  memory_limits memory_limit;                      ///< the limits checked, when given
  std::vector<std::string> violations;             ///< rule violations (schedule, memory)
  std::vector<stage_timing> summaries;             ///< one per stage: span, busy, idle
  std::vector<std::optional<double>> peak_memory;  ///< one per stage; nullopt when unknown
  std::optional<timeline> ops;                     ///< per-op times, when the file has them
  std::optional<std::string> deadlock;             ///< why the simulation stopped early
};

namespace detail {

inline nlohmann::json simulation_json(const schedule& sched,
                                      double makespan,
                                      double bubble_rate,
                                      double utilization,
                                      const std::vector<stage_timing>& stages,
                                      const std::vector<std::optional<double>>& peaks,
                                      const timeline* ops) {
  nlohmann::json j = {
      {"version", simulation_json_version}, {"name", sched.name()},      {"p", sched.stages()},
      {"m", sched.microbatches()},          {"v", sched.chunks()},       {"makespan", makespan},
      {"bubble_rate", bubble_rate},         {"utilization", utilization}};
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
/// record_ops) leaves out the per-op lists. `lower_bound` and `memory_limit` come from the
/// report overload below.
inline nlohmann::json simulation_to_json(const schedule& sched,
                                         const simulation_result& r,
                                         const memory_report* memory = nullptr,
                                         bool with_ops = true) {
  std::vector<stage_timing> stages;
  std::vector<std::optional<double>> peaks;
  for (std::size_t s = 0; s < r.stages.size(); ++s) {
    stages.push_back(r.stages[s]);
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
    j["violations"] = violation_lines(*memory);
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
  std::vector<stage_timing> stages;
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
  const detail::json_reader c{j, ""};
  c.object({"version", "name", "p", "m", "v", "makespan", "bubble_rate", "utilization",
            "lower_bound", "memory_limit", "stages", "deadlock", "violations"});
  c.version(simulation_json_version, "simulation result");
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
    // One number for every stage, or one per stage (docs/formats.md).
    const detail::json_reader ml = c["memory_limit"];
    if (ml.v.is_array()) {
      std::vector<double> per_stage(ml.array());
      for (std::size_t s = 0; s < per_stage.size(); ++s) {
        per_stage[s] = ml[s].non_negative();
      }
      r.memory_limit = std::move(per_stage);
    } else {
      r.memory_limit = ml.non_negative();
    }
  }
  if (c.has("deadlock")) {
    r.deadlock = c["deadlock"].string();
  }
  if (c.has("violations")) {
    const detail::json_reader vs = c["violations"];
    const std::size_t n = vs.array();
    for (std::size_t i = 0; i < n; ++i) {
      r.violations.push_back(vs[i].string());
    }
  }
  const detail::json_reader st = c["stages"];
  if (st.array() != r.stages) {
    st.error("must hold p (", r.stages, ") entries");
  }
  std::size_t with_ops = 0;
  std::vector<std::vector<timed_op>> lists(r.stages);
  for (stage_index s = 0; s < r.stages; ++s) {
    const detail::json_reader e = st[s];
    e.object({"span", "busy", "idle", "peak_memory", "ops"});
    stage_timing summary;  // the file keeps span, busy and idle
    summary.span = e["span"].non_negative();
    summary.busy = e["busy"].non_negative();
    summary.idle = e["idle"].number();
    r.summaries.push_back(summary);
    const detail::json_reader pk = e["peak_memory"];
    r.peak_memory.push_back(pk.v.is_null() ? std::nullopt
                                           : std::optional<double>(pk.non_negative()));
    if (!e.has("ops")) {
      continue;
    }
    ++with_ops;
    const detail::json_reader ops = e["ops"];
    const std::size_t n = ops.array();
    if (n > max_stage_ops) {
      ops.error("holds ", n, " ops, more than max_stage_ops (", max_stage_ops, ")");
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      const detail::json_reader o = ops[i];
      o.object({"kind", "mb", "chunk", "start", "end"});
      const op_kind kind = o["kind"].kind();
      const auto mb = static_cast<microbatch_index>(o["mb"].integer(0, r.microbatches - 1));
      const auto chunk = static_cast<chunk_index>(o["chunk"].integer(0, r.chunks - 1));
      const double start = o["start"].non_negative();
      const double end = o["end"].non_negative();
      if (end < start) {
        o["end"].error("must be >= start (", start, ")");
      }
      lists[s].push_back({s, i, make_op(kind, mb, chunk), start, end});
    }
  }
  if (with_ops != 0 && with_ops != r.stages) {
    st.error("ops must be given for every stage or for none");
  }
  if (with_ops != 0) {
    timeline tl;
    tl.stages = lists;
    tl.reported_bubble_rate = r.bubble_rate;
    r.ops = std::move(tl);
  }
  return r;
}

/// A whole report_schedule() as JSON, the shape of `pipesched simulate --json`: the writer
/// above (without per-op lists unless `with_ops`), plus `lower_bound` and `memory_limit` when
/// the report has them, `violations` = report.violations() when there are any, and for a
/// schedule simulate() refused `"deadlock": "not simulated: <why>"`.
inline nlohmann::json simulation_to_json(const schedule& sched,
                                         const schedule_report& report,
                                         bool with_ops = false) {
  nlohmann::json j = simulation_to_json(sched, report.simulation, &report.memory, with_ops);
  if (report.not_simulated) {
    j["deadlock"] = "not simulated: " + *report.not_simulated;
  }
  if (report.lower_bound) {
    j["lower_bound"] = *report.lower_bound;
  }
  if (report.memory_limit.uniform()) {
    j["memory_limit"] = report.memory_limit.at(0);
  } else if (report.memory_limit) {
    j["memory_limit"] = report.memory_limit.values();
  }
  if (std::vector<std::string> lines = report.violations(); !lines.empty()) {
    j["violations"] = std::move(lines);
  }
  return j;
}

/// Parses JSON text, then simulation_from_json().
inline simulation_record read_simulation(std::string_view text) {
  return simulation_from_json(detail::json_reader::parse(text, "read_simulation"));
}

}  // namespace pipesched
