// Generators by registry name, the zb search's result, communication lowering, and the cost and
// memory models they take.

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/model/transformer_costs.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "bindings.hpp"

namespace pipesched::python {

namespace {

struct generate_args {
  std::string schedule_name;
  generator_params params;
  generation_options options;
  bool with_comm = false;
  receive_placement recv = receive_placement::eager;
};

receive_placement recv_arg(const std::string& recv) {
  if (recv != "eager" && recv != "late") {
    detail::fail("recv: must be 'eager' or 'late', not \"", recv, "\"");
  }
  return recv == "late" ? receive_placement::late : receive_placement::eager;
}

/// The keyword arguments of generate() / generate_result(), named as the CLI's long options.
generate_args read_args(std::string schedule_name,
                        std::uint32_t stages,
                        std::uint32_t microbatches,
                        std::optional<std::uint32_t> chunks,
                        const py::object& cost,
                        const std::optional<std::string>& costs,
                        const py::object& memory,
                        const std::optional<std::string>& memory_file,
                        std::optional<double> memory_limit,
                        std::optional<double> search_budget,
                        std::optional<std::size_t> search_evaluations,
                        bool with_comm,
                        const std::string& recv) {
  generate_args a;
  a.schedule_name = std::move(schedule_name);
  a.params.stages = stages;
  a.params.microbatches = microbatches;
  a.params.chunks = chunks.value_or(0);
  a.params.costs = cost_arg(cost, costs);
  a.params.memory = memory_arg(memory, memory_file);
  a.params.memory_limit = memory_limit;
  if (search_budget || search_evaluations) {
    zb_auto_options o;
    o.search_budget_ms = search_budget.value_or(0.0);
    if (search_evaluations) {
      o.search_evaluations = *search_evaluations;
    }
    a.options.search = o;
  }
  a.with_comm = with_comm;
  a.recv = recv_arg(recv);
  if (a.recv != receive_placement::eager && !with_comm) {
    detail::fail("recv: only meaningful with with_comm=True");
  }
  return a;
}

generation_result run(const generate_args& a) {
  py::gil_scoped_release unlocked;  // searches can take a while; other Python threads may run
  generation_result g = default_registry().generate_result(a.schedule_name, a.params, a.options);
  if (!a.with_comm) {
    return g;
  }
  lowering_options lo;
  lo.receives = a.recv;
  lo.costs = a.params.costs;
  // The search's figures describe the compute-only order, not the lowered one (as the CLI).
  generation_result lowered;
  lowered.sched = lower_communication(g.sched, lo);
  lowered.memory_violations = std::move(g.memory_violations);
  return lowered;
}

// One signature for generate() and generate_result(), so the keyword names stay the same.
#define PIPESCHED_PY_GENERATE_ARGS                                                                 \
  py::arg("schedule"), py::arg("stages"), py::arg("microbatches"), py::kw_only(),                  \
      py::arg("chunks") = py::none(), py::arg("cost") = py::none(), py::arg("costs") = py::none(), \
      py::arg("memory") = py::none(), py::arg("memory_file") = py::none(),                         \
      py::arg("memory_limit") = py::none(), py::arg("search_budget") = py::none(),                 \
      py::arg("search_evaluations") = py::none(), py::arg("with_comm") = false,                    \
      py::arg("recv") = "eager"

constexpr const char* generate_doc =
    R"(Generates the registered schedule `schedule` (see schedules()).

Keyword arguments are the CLI's long options: chunks (v; default the schedule's), cost
(TF, TB, TW[, TC] per stage, or a CostModel), costs (a cost model JSON file), memory (MB, MW,
or a MemoryModel), memory_file, memory_limit (per stage, in the units of memory),
search_budget (ms) and search_evaluations (the schedules that search: zb-auto, zb-1p, zb-2p,
zb-v), with_comm (insert SEND/RECV ops) and recv ('eager' or 'late').)";

}  // namespace

void bind_gen(py::module_& m) {
  py::class_<op_costs>(m, "OpCosts", "Durations T_F, T_B, T_W (and optional T_FB) of one slice.")
      .def(py::init([](double f, double b, double w, std::optional<double> overlapped) {
             op_costs c;
             c.forward = f;
             c.backward_input = b;
             c.backward_weight = w;
             c.overlapped = overlapped;
             return c;
           }),
           py::arg("forward") = 1.0, py::arg("backward_input") = 1.0,
           py::arg("backward_weight") = 1.0, py::arg("overlapped") = py::none())
      .def_readwrite("forward", &op_costs::forward)
      .def_readwrite("backward_input", &op_costs::backward_input)
      .def_readwrite("backward_weight", &op_costs::backward_weight)
      .def_readwrite("overlapped", &op_costs::overlapped)
      .def("__repr__", [](const op_costs& c) {
        return detail::concat("OpCosts(forward=", c.forward, ", backward_input=", c.backward_input,
                              ", backward_weight=", c.backward_weight, ")");
      });

  py::class_<cost_model>(m, "CostModel",
                         "Compute costs per stage (split over its v chunks) or per chunk, and the "
                         "latency T_comm of one transfer (docs/model.md section 3).")
      .def(py::init<>(), "Unit costs (1, 1, 1) per stage, T_comm = 0.")
      .def_static("uniform", &cost_model::uniform, py::arg("forward"), py::arg("backward_input"),
                  py::arg("backward_weight"), py::arg("comm") = 0.0)
      .def_static(
          "from_json", [](const std::string& text) { return read_cost_model(text); },
          py::arg("text"), "A cost model JSON v1 document (docs/formats.md).")
      .def("set_overlapped", &cost_model::set_overlapped, py::arg("t_fb"))
      .def("set_stage_costs", &cost_model::set_stage_costs, py::arg("per_stage"))
      .def("set_chunk_costs", &cost_model::set_chunk_costs, py::arg("chunks"), py::arg("per_chunk"))
      .def("set_comm", &cost_model::set_comm, py::arg("comm"))
      .def("set_link_comm", &cost_model::set_link_comm, py::arg("stages"), py::arg("latencies"))
      .def("__repr__", [](const cost_model&) { return std::string("CostModel(...)"); });

  py::class_<chunk_memory>(m, "ChunkMemory", "M_B, M_W and the receive-buffer size of a slice.")
      .def(py::init([](double a, double w, double r) {
             return chunk_memory{a, w, r};
           }),
           py::arg("activation") = 1.0, py::arg("weight_grad_input") = 0.5,
           py::arg("received") = 0.0)
      .def_readwrite("activation", &chunk_memory::activation)
      .def_readwrite("weight_grad_input", &chunk_memory::weight_grad_input)
      .def_readwrite("received", &chunk_memory::received);

  py::class_<memory_model>(m, "MemoryModel",
                           "Activation sizes per stage (split over v) or per chunk, plus static "
                           "memory per stage.")
      .def(py::init<>(), "M_B = 1, M_W = 0.5 per stage.")
      .def_static("uniform", &memory_model::uniform, py::arg("activation"),
                  py::arg("weight_grad_input"))
      .def_static(
          "from_json", [](const std::string& text) { return read_memory_model(text); },
          py::arg("text"), "A memory model JSON v1 document (docs/formats.md).")
      .def("set_stage_memory", &memory_model::set_stage_memory, py::arg("per_stage"))
      .def("set_chunk_memory", &memory_model::set_chunk_memory, py::arg("chunks"),
           py::arg("per_chunk"))
      .def("set_static_memory", &memory_model::set_static_memory, py::arg("per_stage"))
      .def("__repr__", [](const memory_model&) { return std::string("MemoryModel(...)"); });

  py::class_<transformer_profile>(m, "TransformerProfile",
                                  "Costs and memory of a slice of transformer layers for one "
                                  "micro-batch (docs/model.md section 5).")
      .def_readonly("costs", &transformer_profile::costs)
      .def_readonly("memory", &transformer_profile::memory)
      .def("cost_model", &make_cost_model, py::arg("comm") = 0.0,
           "A per-stage CostModel of this slice, transfer latency `comm` (same units).")
      .def("memory_model", &make_memory_model, "A per-stage MemoryModel of this slice.");

  m.def(
      "transformer_costs",
      [](std::uint64_t hidden, std::uint64_t heads, std::uint64_t sequence,
         std::uint64_t microbatch, std::uint32_t layers, const std::string& units) {
        if (units != "absolute" && units != "per_layer") {
          detail::fail("units: must be 'absolute' or 'per_layer', not \"", units, "\"");
        }
        return transformer_costs(
            transformer_dims{hidden, heads, sequence, microbatch, layers},
            units == "absolute" ? transformer_units::absolute : transformer_units::per_layer);
      },
      py::arg("hidden"), py::arg("heads"), py::arg("sequence"), py::arg("microbatch"),
      py::arg("layers") = 1, py::kw_only(), py::arg("units") = "per_layer",
      "T_F, T_B, T_W and M_B, M_W of `layers` transformer layers (one stage's slice) from the "
      "per-layer formulas of docs/model.md section 5. units: 'per_layer' (T_F and M_B of one "
      "layer = 1) or 'absolute' (FLOPs, bytes).");

  py::class_<generator_entry>(m, "GeneratorInfo", "A registered generator (see schedules()).")
      .def_readonly("name", &generator_entry::name)
      .def_readonly("description", &generator_entry::description)
      .def_readonly("default_chunks", &generator_entry::default_chunks)
      .def_readonly("searches", &generator_entry::searches,
                    "True when it searches: takes search_budget / search_evaluations and "
                    "reports a lower bound.")
      .def("__repr__", [](const generator_entry& e) { return "GeneratorInfo('" + e.name + "')"; });

  m.def(
      "schedules",
      [] {
        const auto entries = default_registry().entries();
        return std::vector<generator_entry>(entries.begin(), entries.end());
      },
      "Every registered schedule generator, in `pipesched list` order.");

  py::class_<budget_violation>(m, "BudgetViolation", "A stage above its memory limit.")
      .def_readonly("stage", &budget_violation::stage)
      .def_readonly("limit", &budget_violation::limit)
      .def_readonly("op_index", &budget_violation::op_index)
      .def_readonly("value", &budget_violation::value)
      .def_readonly("peak", &budget_violation::peak)
      .def_readonly("peak_op_index", &budget_violation::peak_op_index)
      .def_readonly("message", &budget_violation::message)
      .def("__repr__", [](const budget_violation& v) { return v.message; });

  py::class_<generation_result>(m, "GenerationResult",
                                "A schedule with what its generator knows about it; a value is "
                                "None when the generator does not compute it.")
      .def_readonly("schedule", &generation_result::sched)
      .def_readonly("lower_bound", &generation_result::lower_bound,
                    "No schedule for the same parameters and memory limit has a shorter longest "
                    "stage span (the schedules that search).")
      .def_readonly("span", &generation_result::span)
      .def_readonly("published_span", &generation_result::published_span)
      .def_readonly("search_evaluations", &generation_result::search_evaluations)
      .def_readonly("memory_violations", &generation_result::memory_violations,
                    "Stages over memory_limit (a hand-crafted order checked against it).")
      .def("__repr__", [](const generation_result& g) {
        return detail::concat("GenerationResult(schedule='", g.sched.name(), "', lower_bound=",
                              g.lower_bound ? std::to_string(*g.lower_bound) : "None",
                              ", span=", g.span ? std::to_string(*g.span) : "None", ")");
      });

  m.def(
      "generate",
      [](std::string name, std::uint32_t p, std::uint32_t mb, std::optional<std::uint32_t> v,
         const py::object& cost, const std::optional<std::string>& costs, const py::object& memory,
         const std::optional<std::string>& memory_file, std::optional<double> limit,
         std::optional<double> budget, std::optional<std::size_t> evaluations, bool with_comm,
         const std::string& recv) {
        generation_result g =
            run(read_args(std::move(name), p, mb, v, cost, costs, memory, memory_file, limit,
                          budget, evaluations, with_comm, recv));
        // A limit is never ignored: a hand-crafted order over it is an error (as the CLI's).
        if (!g.memory_violations.empty()) {
          std::string msg = g.sched.name() + ": over memory_limit:";
          for (const auto& viol : g.memory_violations) {
            msg += " " + viol.message + ";";
          }
          throw invalid_argument(msg);
        }
        return std::move(g.sched);
      },
      PIPESCHED_PY_GENERATE_ARGS, generate_doc);

  m.def(
      "generate_result",
      [](std::string name, std::uint32_t p, std::uint32_t mb, std::optional<std::uint32_t> v,
         const py::object& cost, const std::optional<std::string>& costs, const py::object& memory,
         const std::optional<std::string>& memory_file, std::optional<double> limit,
         std::optional<double> budget, std::optional<std::size_t> evaluations, bool with_comm,
         const std::string& recv) {
        return run(read_args(std::move(name), p, mb, v, cost, costs, memory, memory_file, limit,
                             budget, evaluations, with_comm, recv));
      },
      PIPESCHED_PY_GENERATE_ARGS,
      "As generate(), returning a GenerationResult: the schedule with the search's lower bound "
      "and span (zb-auto, zb-1p, zb-2p, zb-v) and the stages over memory_limit (not raised).");

  m.def(
      "lower_communication",
      [](const schedule& s, const std::string& recv, const py::object& cost,
         const std::optional<std::string>& costs) {
        lowering_options lo;
        lo.receives = recv_arg(recv);
        lo.costs = cost_arg(cost, costs);
        py::gil_scoped_release unlocked;
        return lower_communication(s, lo);
      },
      py::arg("schedule"), py::kw_only(), py::arg("recv") = "eager", py::arg("cost") = py::none(),
      py::arg("costs") = py::none(),
      "The schedule with SEND/RECV ops that cannot deadlock under blocking point-to-point "
      "(the CLI's --with-comm).");
}

}  // namespace pipesched::python
