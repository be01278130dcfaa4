// Generators by registry name, the zb search's result, communication lowering, and the cost and
// memory models they take.

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/model/transformer_costs.hpp>
#include <pipesched/tools/request.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "bindings.hpp"

namespace pipesched::python {

namespace {

/// The keyword a schedule_request field comes from (field_error::field()).
std::string keyword_of(const std::string& field, const char* search_keyword) {
  if (field == "search") {
    return search_keyword;
  }
  if (field == "recompute.chunks") {
    return "recompute";
  }
  if (field == "generator") {
    return "schedule";
  }
  return field;  // stages, microbatches, chunks, recv, recompute_policy
}

/// The keyword arguments of generate() / generate_result(), named as the CLI's long options,
/// as one schedule_request (tools/request.hpp): what the CLI builds from its options.
schedule_request read_request(const py::object& source,
                              std::optional<std::uint32_t> stages,
                              std::optional<std::uint32_t> microbatches,
                              std::optional<std::uint32_t> chunks,
                              const py::object& cost,
                              const std::optional<std::string>& costs,
                              const py::object& memory,
                              const std::optional<std::string>& memory_file,
                              const memory_limits& memory_limit,
                              std::optional<double> search_budget,
                              std::optional<std::size_t> search_evaluations,
                              const py::object& recompute,
                              const std::string& recompute_policy,
                              bool with_comm,
                              const std::string& recv) {
  generator_params params;
  params.costs = cost_arg(cost, costs);
  params.memory = memory_arg(memory, memory_file);
  params.memory_limit = memory_limit;
  params.chunks = chunks.value_or(0);
  std::variant<generated_source, given_source> src;
  if (py::isinstance<schedule>(source)) {
    if (stages || microbatches) {
      detail::fail(stages ? "stages" : "microbatches",
                   ": comes from the given Schedule: leave it None");
    }
    src = given_source{source.cast<schedule>()};
  } else {
    if (!py::isinstance<py::str>(source)) {
      detail::fail("schedule: expected a schedule name or a Schedule, got ",
                   std::string(py::str(py::type::of(source).attr("__name__"))));
    }
    if (!stages || !microbatches) {
      detail::fail(!stages ? "stages" : "microbatches", ": required with a schedule name");
    }
    params.stages = *stages;
    params.microbatches = *microbatches;
    src = generated_source{source.cast<std::string>()};
  }
  request_options opts;
  if (search_budget || search_evaluations) {
    zb_auto_options o;
    o.search_budget_ms = search_budget.value_or(0.0);
    if (search_evaluations) {
      o.search_evaluations = *search_evaluations;
    }
    opts.search = o;
  }
  if (!recompute.is_none()) {
    if (py::isinstance<py::str>(recompute)) {
      if (recompute.cast<std::string>() != "all") {
        detail::fail("recompute: expected 'all' or global chunk numbers, not \"",
                     recompute.cast<std::string>(), "\"");
      }
      opts.recompute_all = true;
    } else {
      try {
        opts.recompute_chunks = recompute.cast<std::vector<global_chunk>>();
      } catch (const py::cast_error&) {
        detail::fail("recompute: expected 'all' or global chunk numbers (whole numbers >= 0)");
      }
      if (opts.recompute_chunks.empty()) {
        detail::fail("recompute: expected 'all' or at least one global chunk");
      }
    }
  }
  opts.recompute_policy = recompute_policy;
  opts.with_comm = with_comm;
  opts.recv = recv;
  try {
    return make_request(std::move(src), std::move(params), opts, default_registry());
  } catch (const field_error& e) {
    throw invalid_argument(
        keyword_of(e.field(), search_budget ? "search_budget" : "search_evaluations") + ": " +
        e.rule());
  }
}

/// build_schedule, its field errors naming the keyword; `search_keyword`: the search option
/// given (search_budget or search_evaluations).
generation_result run(const schedule_request& req, const char* search_keyword) {
  try {
    py::gil_scoped_release unlocked;  // searches can take a while; other Python threads may run
    return build_schedule(req, default_registry());
  } catch (const field_error& e) {
    throw invalid_argument(keyword_of(e.field(), search_keyword) + ": " + e.rule());
  }
}

// One signature for generate() and generate_result(), so the keyword names stay the same.
#define PIPESCHED_PY_GENERATE_ARGS                                                                 \
  py::arg("schedule"),                                                                             \
      py::arg("stages") = py::none(), py::arg("microbatches") = py::none(), py::kw_only(),         \
      py::arg("chunks") = py::none(), py::arg("cost") = py::none(), py::arg("costs") = py::none(), \
      py::arg("memory") = py::none(), py::arg("memory_file") = py::none(),                         \
      py::arg("memory_limit") = py::none(), py::arg("search_budget") = py::none(),                 \
      py::arg("search_evaluations") = py::none(), py::arg("recompute") = py::none(),               \
      py::arg("recompute_policy") = "before-backward", py::arg("with_comm") = false,               \
      py::arg("recv") = "eager"

#define PIPESCHED_PY_GENERATE_PARAMS                                                         \
  const py::object &source, std::optional<std::uint32_t> p, std::optional<std::uint32_t> mb, \
      std::optional<std::uint32_t> v, const py::object &cost,                                \
      const std::optional<std::string>&costs, const py::object &memory,                      \
      const std::optional<std::string>&memory_file, const memory_limits &limit,              \
      std::optional<double> budget, std::optional<std::size_t> evaluations,                  \
      const py::object &recompute, const std::string &recompute_policy, bool with_comm,      \
      const std::string &recv

#define PIPESCHED_PY_GENERATE_REQUEST                                                          \
  read_request(source, p, mb, v, cost, costs, memory, memory_file, limit, budget, evaluations, \
               recompute, recompute_policy, with_comm, recv),                                  \
      budget ? "search_budget" : "search_evaluations"

constexpr const char* generate_doc =
    R"(The schedule the CLI's schedule options describe (tools/request.hpp's build_schedule):
`schedule` is a registered name (see schedules()) with stages and microbatches, or a Schedule
(e.g. read_schedule(path): the CLI's --input), then recompute, then lowering.

Keyword arguments are the CLI's long options: chunks (v; default the schedule's), cost
(TF, TB, TW[, TC] per stage, or a CostModel), costs (a cost model JSON file), memory (MB, MW[,
MIN], or a MemoryModel), memory_file, memory_limit (one number for every stage or a list of one per stage, in the units of memory),
search_budget (ms) and search_evaluations (the schedules that search: zb-auto, zb-1p, zb-2p,
zb-v), recompute ('all' or global chunks) and recompute_policy ('before-backward' or
'idle-slot'), with_comm (insert SEND/RECV ops) and recv ('eager' or 'late').)";

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
      [](PIPESCHED_PY_GENERATE_PARAMS) {
        generation_result g = run(PIPESCHED_PY_GENERATE_REQUEST);
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
      [](PIPESCHED_PY_GENERATE_PARAMS) { return run(PIPESCHED_PY_GENERATE_REQUEST); },
      PIPESCHED_PY_GENERATE_ARGS,
      "As generate(), returning a GenerationResult: the schedule with the search's lower bound "
      "and span (zb-auto, zb-1p, zb-2p, zb-v) and the stages over memory_limit (not raised).");

  m.def(
      "lower_communication",
      [](const schedule& s, const std::string& recv, const py::object& cost,
         const std::optional<std::string>& costs) {
        lowering_options lo;
        try {
          lo.receives = named_receive_placement(recv, "lower_communication");
        } catch (const field_error& e) {
          throw invalid_argument(e.field() + ": " + e.rule());
        }
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
