#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/analysis/validate.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"

// Everything `pipesched simulate` says about a schedule, from one call: validity, timing,
// memory against a limit, and the rule violations as the text lines every output shows.
// Its writers are in io/ (simulation_json.hpp, report_text.hpp).

namespace pipesched {

/// One line per violation, `<kind>: <message>` as `pipesched validate` prints them, plus
/// `... and N more violations` when the report stored fewer than it found.
inline std::vector<std::string> violation_lines(const validation_report& r) {
  std::vector<std::string> out;
  for (const auto& v : r.violations) {
    out.push_back(std::string(to_string(v.kind)) + ": " + v.message);
  }
  if (r.truncated() > 0) {
    out.push_back("... and " + std::to_string(r.truncated()) + " more violations");
  }
  return out;
}
/// `memory_budget: <message>`, one per stage over its limit.
inline std::vector<std::string> violation_lines(const std::vector<budget_violation>& v) {
  std::vector<std::string> out;
  for (const auto& b : v) {
    out.push_back("memory_budget: " + b.message);
  }
  return out;
}
/// `memory_lifetime: <message>` per stored lifetime error, then the budget lines.
inline std::vector<std::string> violation_lines(const memory_report& m) {
  std::vector<std::string> out;
  for (const auto& e : m.errors) {
    out.push_back("memory_lifetime: " + e.message);
  }
  for (auto& l : violation_lines(m.violations)) {
    out.push_back(std::move(l));
  }
  return out;
}

/// What report_schedule() checks a schedule against.
struct report_options {
  cost_model costs{};
  memory_model memory{};
  memory_limits memory_limit;  ///< one for every stage or one per stage, units of `memory`
  /// Carried into the report: a searching generator's bound on the longest stage span
  /// (generation_result::lower_bound), for the text and JSON writers.
  std::optional<double> lower_bound;
  /// Simulate and check memory even when validation fails (a JSON report describes invalid
  /// schedules too); false stops after validate(), leaving `simulation` and `memory` empty.
  bool analyze_invalid = true;
  /// false: validate and check memory only, without timing (what `pipesched validate` needs;
  /// `simulation` then stays empty and the memory curve carries no times).
  bool simulate = true;
  /// How a lowered schedule's SEND / RECV pairs take time (simulate_options::transfers).
  transfer_timing transfers = transfer_timing::blocking;
};

/// The result of report_schedule().
struct schedule_report {
  validation_report validation;
  simulation_result simulation;  ///< stages sized p but not run when `not_simulated`
  /// Why simulate() refused an invalid schedule (e.g. a declared shape far beyond its ops).
  std::optional<std::string> not_simulated;
  memory_report memory;  ///< against `memory_limit`; curves stamped with simulated times
  memory_limits memory_limit;
  std::optional<double> lower_bound;

  /// Valid, ran to the end and within the memory limit: `pipesched simulate` exits 0.
  bool ok() const noexcept {
    return validation.ok() && !not_simulated && !simulation.deadlock && memory.ok();
  }
  /// Every broken rule, one line each: for a valid schedule the memory lines; for an invalid
  /// one the validation lines and the budget lines (its memory lifetime errors only restate
  /// the validation).
  std::vector<std::string> violations() const {
    if (validation.ok()) {
      return violation_lines(memory);
    }
    std::vector<std::string> out = violation_lines(validation);
    for (auto& l : violation_lines(memory.violations)) {
      out.push_back(std::move(l));
    }
    return out;
  }
};

/// Validates `sched`, simulates it under `options.costs` and checks its memory under
/// `options.memory` and `options.memory_limit`. Never throws for an invalid schedule (a
/// deadlock is in `simulation.deadlock`; one simulate() refuses is `not_simulated`); throws
/// invalid_argument for unusable options (tables of another shape, a negative limit) and when
/// simulate() refuses a valid schedule.
inline schedule_report report_schedule(const schedule& sched, const report_options& options = {}) {
  schedule_report rep;
  rep.memory_limit = options.memory_limit;
  rep.lower_bound = options.lower_bound;
  rep.validation = validate(sched);
  if (!rep.validation.ok() && !options.analyze_invalid) {
    return rep;
  }
  if (!options.simulate) {
    memory_options mo = memory_options::with_limit(options.memory_limit);
    mo.record_curve = false;
    rep.memory = check_memory(sched, options.memory, mo);
    return rep;
  }
  try {
    simulate_options so;
    so.validate = false;  // validated above; an invalid one is timed on purpose (analyze_invalid)
    so.transfers = options.transfers;
    rep.simulation = simulate(sched, options.costs, so);
  } catch (const invalid_argument& e) {
    if (rep.validation.ok()) {
      throw;
    }
    rep.not_simulated = e.what();
    rep.simulation.stages.resize(sched.stages());
  }
  const memory_options mo = memory_options::with_limit(options.memory_limit);
  rep.memory = rep.not_simulated ? check_memory(sched, options.memory, mo)
                                 : check_memory(sched, options.memory, mo, rep.simulation);
  return rep;
}

}  // namespace pipesched
