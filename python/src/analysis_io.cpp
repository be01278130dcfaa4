// validate, simulate, check_memory and their reports; JSON and PyTorch CSV reading and writing.

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/io/schedule_export.hpp>
#include <pipesched/io/schedule_input.hpp>
#include <pipesched/io/simulation_json.hpp>
#include <pipesched/io/torch_csv.hpp>

#include "bindings.hpp"

namespace pipesched::python {

namespace {

/// A position that may be absent (the library's no_index): None in Python.
py::object index_or_none(std::size_t i, std::size_t none) {
  return i == none ? py::object(py::none()) : py::object(py::int_(i));
}

/// Per-stage lists of the simulated ops' start or end times.
py::list per_stage_times(const simulation_result& r, double timed_op::*field) {
  py::list out;
  for (const auto& stage : r.ops) {
    std::vector<double> v;
    v.reserve(stage.size());
    for (const timed_op& t : stage) {
      v.push_back(t.*field);
    }
    out.append(number_list(v));
  }
  return out;
}

/// `memory_limit=`: one number for every stage or one per stage (None: no budget).
memory_options memory_limit_arg(const py::object& limit, bool record_curve) {
  memory_options o;
  o.memory_limit = limit.cast<memory_limits>();
  o.record_curve = record_curve;
  return o;
}

torch_csv_options csv_args(const std::optional<std::string>& layout,
                           const std::optional<std::string>& spelling) {
  torch_csv_options o;
  if (layout) {
    if (*layout != "steps" && *layout != "list") {
      detail::fail("csv_layout: must be 'steps' or 'list', not \"", *layout, "\"");
    }
    o.alignment = *layout == "list" ? torch_alignment::list_order : torch_alignment::unit_steps;
  }
  if (spelling) {
    if (*spelling != "current" && *spelling != "legacy") {
      detail::fail("csv_spelling: must be 'current' or 'legacy', not \"", *spelling, "\"");
    }
    o.spelling = *spelling == "legacy" ? torch_spelling::legacy : torch_spelling::current;
  }
  return o;
}

std::optional<violation_kind> parse_violation_kind(const std::string& name) {
  for (std::size_t k = 0; k < violation_kind_count; ++k) {
    if (to_string(static_cast<violation_kind>(k)) == name) {
      return static_cast<violation_kind>(k);
    }
  }
  return std::nullopt;
}

void bind_analysis_types(py::module_& m) {
  py::class_<blocked_stage>(m, "BlockedStage",
                            "A stage that could not finish: the op it is blocked on and what "
                            "that op waits for.")
      .def_readonly("stage", &blocked_stage::stage)
      .def_readonly("op_index", &blocked_stage::op_index)
      .def_readonly("op", &blocked_stage::blocked)
      .def_readonly("waits_on_stage", &blocked_stage::waits_on_stage)
      .def_readonly("waits_for", &blocked_stage::waits_for)
      .def_readonly("never_produced", &blocked_stage::never_produced)
      .def("__repr__", [](const blocked_stage& b) {
        return detail::concat("BlockedStage(stage=", b.stage, ", op_index=", b.op_index,
                              ", waits_for='", b.waits_for, "')");
      });

  py::class_<deadlock_witness>(m, "DeadlockWitness", "Proof that a schedule cannot run to the end.")
      .def_readonly("stuck", &deadlock_witness::stuck, "Every stage that stopped early.")
      .def_readonly("cycle", &deadlock_witness::cycle,
                    "The wait-for cycle as stages (each waits on the next, the last on the "
                    "first); empty when the stuck stages wait on an op never produced.")
      .def("describe", &deadlock_witness::describe)
      .def("__str__", &deadlock_witness::describe)
      .def("__repr__", [](const deadlock_witness& d) { return "<" + d.describe() + ">"; });

  py::class_<violation>(m, "Violation", "One broken rule, located.")
      .def_property_readonly(
          "kind", [](const violation& v) { return std::string(to_string(v.kind)); },
          "out_of_range, duplicate, missing, mixed_backward, local_order, "
          "comm_mismatch, overlap or deadlock.")
      .def_readonly("stage", &violation::stage)
      .def_property_readonly(
          "op_index",
          [](const violation& v) { return index_or_none(v.op_index, violation::no_index); },
          "Position in the stage's list; None when the violation has none (a missing op).")
      .def_readonly("message", &violation::message)
      .def("__str__", [](const violation& v) { return v.message; })
      .def("__repr__", [](const violation& v) {
        return detail::concat("Violation(", to_string(v.kind), ": ", v.message, ")");
      });

  py::class_<validation_report>(m, "ValidationReport", "Every violation of a schedule.")
      .def_property_readonly("ok", &validation_report::ok)
      .def("__bool__", &validation_report::ok)
      .def_readonly("violations", &validation_report::violations,
                    "The first max_violations found, in stage order.")
      .def_readonly("total", &validation_report::total)
      .def_property_readonly("truncated", &validation_report::truncated)
      .def_readonly("deadlock", &validation_report::deadlock)
      .def(
          "count",
          [](const validation_report& r, const std::string& kind) {
            const auto k = parse_violation_kind(kind);
            if (!k) {
              detail::fail("count: kind \"", kind, "\" is not a violation kind");
            }
            return r.count(*k);
          },
          py::arg("kind"), "All violations of that kind, stored or not.")
      .def("__repr__", [](const validation_report& r) {
        return detail::concat("ValidationReport(ok=", r.ok() ? "True" : "False",
                              ", total=", r.total, ")");
      });

  py::class_<timed_op>(m, "TimedOp", "An op with its simulated start and end.")
      .def_readonly("stage", &timed_op::stage)
      .def_readonly("index", &timed_op::index)
      .def_readonly("op", &timed_op::o)
      .def_readonly("start", &timed_op::start)
      .def_readonly("end", &timed_op::end)
      .def_property_readonly("duration", &timed_op::duration)
      .def("__repr__", [](const timed_op& t) {
        return detail::concat(to_string(t.o, t.o.chunk != 0), "@[", t.start, ", ", t.end, ")");
      });

  py::class_<stage_timing>(m, "StageTiming", "Timing statistics of one stage.")
      .def_readonly("first_start", &stage_timing::first_start)
      .def_readonly("last_end", &stage_timing::last_end)
      .def_readonly("span", &stage_timing::span)
      .def_readonly("busy", &stage_timing::busy)
      .def_readonly("comm", &stage_timing::comm)
      .def_readonly("idle", &stage_timing::idle)
      .def_readonly("idle_fraction", &stage_timing::idle_fraction)
      .def_readonly("makespan_idle", &stage_timing::makespan_idle)
      .def_readonly("ops_run", &stage_timing::ops_run);

  py::class_<simulation_result>(m, "SimulationResult", "The outcome of simulate().")
      .def_readonly("makespan", &simulation_result::makespan)
      .def_readonly("bubble_rate", &simulation_result::bubble_rate)
      .def_readonly("utilization", &simulation_result::utilization)
      .def_readonly("max_span_stage", &simulation_result::max_span_stage)
      .def_readonly("stages", &simulation_result::stages)
      .def_property_readonly(
          "ops", [](const simulation_result& r) { return r.ops.to_vectors(); },
          "ops[s][i]: TimedOp of op i of stage s (empty without record_ops).")
      .def_property_readonly(
          "starts", [](const simulation_result& r) { return per_stage_times(r, &timed_op::start); },
          "Start times per stage: numpy arrays when numpy is installed, else lists.")
      .def_property_readonly(
          "ends", [](const simulation_result& r) { return per_stage_times(r, &timed_op::end); },
          "End times per stage: numpy arrays when numpy is installed, else lists.")
      .def_property_readonly(
          "critical_path",
          [](const simulation_result& r) {
            py::list out;
            for (const op_location& l : r.critical_path) {
              out.append(py::make_tuple(l.stage, l.op_index));
            }
            return out;
          },
          "The chain of (stage, op index) that sets the makespan, in time order.")
      .def_readonly("deadlock", &simulation_result::deadlock)
      .def_property_readonly("completed", &simulation_result::completed)
      .def("__repr__", [](const simulation_result& r) {
        return detail::concat("SimulationResult(makespan=", r.makespan,
                              ", bubble_rate=", r.bubble_rate, ", utilization=", r.utilization,
                              r.completed() ? "" : ", deadlock", ")");
      });

  py::class_<lifetime_error>(m, "LifetimeError", "A buffer-lifetime error, located.")
      .def_property_readonly("kind",
                             [](const lifetime_error& e) { return std::string(to_string(e.kind)); })
      .def_readonly("stage", &lifetime_error::stage)
      .def_readonly("op_index", &lifetime_error::op_index)
      .def_property_readonly("buffer", [](const lifetime_error& e) { return to_string(e.buffer); })
      .def_readonly("message", &lifetime_error::message)
      .def("__repr__", [](const lifetime_error& e) { return e.message; });

  py::class_<stage_memory>(m, "StageMemory", "Memory of one stage, static memory included.")
      .def_readonly("static_memory", &stage_memory::static_memory)
      .def_readonly("peak", &stage_memory::peak)
      .def_property_readonly("peak_op_index",
                             [](const stage_memory& s) {
                               return index_or_none(s.peak_op_index, stage_memory::no_index);
                             })
      .def_readonly("peak_time", &stage_memory::peak_time)
      .def_readonly("peak_stage_units", &stage_memory::peak_stage_units)
      .def_readonly("final_value", &stage_memory::final_value)
      .def_property_readonly(
          "curve", [](const stage_memory& s) { return number_list(s.curve); },
          "Value after each op (numpy array when numpy is installed).")
      .def_property_readonly("curve_time",
                             [](const stage_memory& s) { return number_list(s.curve_time); });

  py::class_<memory_report>(m, "MemoryReport", "The result of check_memory().")
      .def_readonly("stages", &memory_report::stages)
      .def_readonly("errors", &memory_report::errors)
      .def_readonly("total_errors", &memory_report::total_errors)
      .def_readonly("violations", &memory_report::violations)
      .def_property_readonly("ok", &memory_report::ok)
      .def_property_readonly("lifetimes_ok", &memory_report::lifetimes_ok)
      .def_property_readonly("within_budget", &memory_report::within_budget)
      .def_property_readonly("max_peak", &memory_report::max_peak)
      .def("peak_memory", &memory_report::peak_memory, py::arg("stage"))
      .def("__repr__", [](const memory_report& r) {
        return detail::concat("MemoryReport(ok=", r.ok() ? "True" : "False",
                              ", max_peak=", r.max_peak(), ")");
      });
}

}  // namespace

void bind_analysis(py::module_& m) {
  bind_analysis_types(m);

  m.def(
      "validate",
      [](const schedule& s, std::size_t max_violations, bool check_feasibility) {
        py::gil_scoped_release unlocked;
        return validate(s, validate_options{max_violations, check_feasibility});
      },
      py::arg("schedule"), py::kw_only(), py::arg("max_violations") = 1000,
      py::arg("check_feasibility") = true,
      "Every rule the schedule breaks (docs/model.md section 1), with a deadlock witness; "
      "never raises for an invalid schedule.");

  m.def(
      "simulate",
      [](const schedule& s, const py::object& cost, const std::optional<std::string>& costs,
         bool record_ops, bool critical_path, bool validate_first) {
        const cost_model model = cost_arg(cost, costs);
        py::gil_scoped_release unlocked;
        return simulate(s, model, simulate_options{record_ops, critical_path, validate_first});
      },
      py::arg("schedule"), py::kw_only(), py::arg("cost") = py::none(),
      py::arg("costs") = py::none(), py::arg("record_ops") = true, py::arg("critical_path") = true,
      py::arg("validate") = true,
      "Times the schedule under the cost model (cost: TF, TB, TW[, TC] or a CostModel; costs: a "
      "cost model file): makespan, bubble rate, per-op times. An invalid schedule raises, naming "
      "its first violation; validate=False times it anyway (a partial order: check completed).");

  m.def(
      "check_memory",
      [](const schedule& s, const py::object& memory, const std::optional<std::string>& file,
         const py::object& limit, bool record_curve,
         const std::optional<simulation_result>& simulation) {
        const memory_model model = memory_arg(memory, file);
        const memory_options o = memory_limit_arg(limit, record_curve);
        py::gil_scoped_release unlocked;
        return simulation ? check_memory(s, model, o, *simulation) : check_memory(s, model, o);
      },
      py::arg("schedule"), py::kw_only(), py::arg("memory") = py::none(),
      py::arg("memory_file") = py::none(), py::arg("memory_limit") = py::none(),
      py::arg("record_curve") = true, py::arg("simulation") = py::none(),
      "Buffer lifetimes, per-stage peaks and curves, and the stages over memory_limit (one "
      "number, or one per stage); a simulation stamps the curves with times.");

  m.def(
      "simulation_json",
      [](const schedule& s, const py::object& cost, const std::optional<std::string>& costs,
         const py::object& memory, const std::optional<std::string>& memory_file,
         const memory_limits& memory_limit, std::optional<double> lower_bound) {
        report_options ro;
        ro.costs = cost_arg(cost, costs);
        ro.memory = memory_arg(memory, memory_file);
        ro.memory_limit = memory_limit;
        ro.lower_bound = lower_bound;
        py::gil_scoped_release unlocked;
        return simulation_to_json(s, report_schedule(s, ro)).dump(2) + "\n";
      },
      py::arg("schedule"), py::kw_only(), py::arg("cost") = py::none(),
      py::arg("costs") = py::none(), py::arg("memory") = py::none(),
      py::arg("memory_file") = py::none(), py::arg("memory_limit") = py::none(),
      py::arg("lower_bound") = py::none(),
      "The simulation result JSON v1 that `pipesched simulate --json` prints (docs/formats.md).");
}

void bind_io(py::module_& m) {
  m.def("to_json", &write_schedule_json, py::arg("schedule"), "Schedule JSON v1 text.");
  m.def(
      "from_json", [](const std::string& text) { return read_schedule_json(text); },
      py::arg("text"), "Reads schedule JSON v1; errors name the JSON path and the rule.");
  m.def(
      "to_torch_csv",
      [](const schedule& s, const std::optional<std::string>& layout,
         const std::optional<std::string>& spelling) {
        return to_torch_csv(s, csv_args(layout, spelling));
      },
      py::arg("schedule"), py::kw_only(), py::arg("csv_layout") = py::none(),
      py::arg("csv_spelling") = py::none(),
      "PyTorch pipelining CSV text. csv_layout: 'steps' (unit-step grid, empty idle cells) or "
      "'list' (list order); default 'list' with SEND/RECV ops, else 'steps'. csv_spelling: "
      "'current' (I = input gradient, B = full backward, default) or 'legacy' (B, BW).");
  m.def(
      "from_torch_csv",
      [](const std::string& text, std::string name) {
        return from_torch_csv(text, std::move(name));
      },
      py::arg("text"), py::arg("name") = "torch-csv",
      "Reads a PyTorch pipelining CSV (docs/formats.md); errors name the row and column.");
  m.def(
      "to_torch_actions",
      [](const schedule& s, const std::optional<std::string>& layout,
         const std::optional<std::string>& spelling) {
        py::list ranks;
        for (const auto& cells : to_torch_actions(s, csv_args(layout, spelling))) {
          py::list row;
          for (const auto& c : cells) {
            row.append(c.empty() ? py::object(py::none()) : py::object(py::str(c)));
          }
          ranks.append(row);
        }
        return ranks;
      },
      py::arg("schedule"), py::kw_only(), py::arg("csv_layout") = py::none(),
      py::arg("csv_spelling") = py::none(),
      "Per rank, PyTorch's action strings ('0F3', '1I2', '2W0', '(0F7;7B3)OVERLAP_F_B'): the "
      "cells of to_torch_csv() with the same options, None for an idle step ('steps' layout).");
  m.def(
      "export_schedule",
      [](const std::string& prefix, const schedule& s, const py::object& cost,
         const std::optional<std::string>& costs, const py::object& memory,
         const std::optional<std::string>& memory_file) {
        const cost_model c = cost_arg(cost, costs);
        const memory_model mm = memory_arg(memory, memory_file);
        py::gil_scoped_release unlocked;
        // The files read are never overwritten (the CLI's rule for --costs / --memory-file).
        return write_export(
            schedule_export(prefix, s, c, mm),
            {{costs.value_or(""), "costs"}, {memory_file.value_or(""), "memory_file"}});
      },
      py::arg("prefix"), py::arg("schedule"), py::kw_only(), py::arg("cost") = py::none(),
      py::arg("costs") = py::none(), py::arg("memory") = py::none(),
      py::arg("memory_file") = py::none(),
      "Writes the schedule as `pipesched plan --export PREFIX` does (docs/formats.md): "
      "PREFIX.csv (PyTorch compute_comms), PREFIX.compute.csv, PREFIX.schedule.json, "
      "PREFIX.costs.json and PREFIX.memory.json, with the costs and memory of the cost= / "
      "costs= / memory= / memory_file= keywords. Returns the paths written.");
  m.def(
      "read_schedule",
      [](const std::string& path, const std::optional<std::string>& format) {
        std::optional<input_format> f = input_format::automatic;
        if (format) {
          f = parse_input_format(*format);
          if (!f) {
            detail::fail("input_format: must be 'json' or 'torch-csv', not \"", *format, "\"");
          }
        }
        const std::string text = read_text_file(path);
        try {
          // A CSV carries no name: the file's, without directory and extension (as the CLI).
          return read_schedule(text, *f, std::filesystem::path(path).stem().string());
        } catch (const invalid_argument& e) {
          detail::fail(path, ": ", e.what());
        }
      },
      py::arg("path"), py::kw_only(), py::arg("input_format") = py::none(),
      "Reads a schedule file, pipesched JSON or PyTorch CSV recognised by content (or "
      "input_format 'json' / 'torch-csv').");
}

}  // namespace pipesched::python
