// The what-if and analyze front ends (tools/whatif.hpp, tools/analyze.hpp) with the CLI's
// writers (io/whatif_io.hpp, io/analyze_io.hpp): the same request in, the same text out as
// `pipesched whatif` and `pipesched analyze`.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pipesched/io/analyze_io.hpp>
#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/telemetry_io.hpp>
#include <pipesched/io/whatif_io.hpp>
#include <pipesched/tools/analyze.hpp>
#include <pipesched/tools/whatif.hpp>

#include "bindings.hpp"

namespace pipesched::python {

namespace {

/// The keyword a library field comes from.
std::string keyword_of(const std::string& field) {
  if (field == "straggler" || field == "stage_slowdown") {
    return "stragglers";
  }
  if (field == "stalls.probability" || field == "stalls.duration") {
    return "stalls";
  }
  if (field == "latency") {
    return "allreduce_latency";
  }
  if (field == "absolute") {
    return "abs_threshold";
  }
  if (field == "relative") {
    return "rel_threshold";
  }
  if (field == "achieved_fraction") {
    return "planned_fraction";
  }
  return field;
}

}  // namespace

void bind_plan(py::module_& m) {
  m.def(
      "whatif",
      [](const schedule& s, const py::object& cost, const std::optional<std::string>& costs,
         const py::object& memory, const std::optional<std::string>& memory_file,
         const memory_limits& memory_limit, double cv, double link_cv,
         const std::vector<std::pair<stage_index, double>>& stragglers,
         std::optional<std::pair<double, double>> stalls, std::uint32_t samples,
         std::optional<std::uint64_t> seed, bool sensitivity, bool dynamic,
         std::optional<std::uint32_t> replicas, std::optional<double> gradient_bytes,
         std::optional<double> bandwidth, std::optional<double> allreduce_latency,
         std::optional<std::vector<double>> link_bandwidth,
         std::optional<std::vector<double>> message_bytes, std::optional<std::string> traffic,
         std::optional<std::uint32_t> buckets, const std::string& format) {
        const bool json = json_format(format);
        whatif_request req;
        req.costs = cost_arg(cost, costs);
        req.memory = memory_arg(memory, memory_file);
        req.memory_limit = memory_limit;
        req.cv = cv;
        req.link_cv = link_cv;
        req.stragglers = stragglers;
        if (stalls) {
          req.stalls = stall_model{stalls->first, stalls->second};
        }
        req.samples = samples;
        req.seed = seed;
        req.sensitivity = sensitivity;
        req.dynamic = dynamic;
        req.replicas = replicas;
        req.gradient_bytes = gradient_bytes;
        req.bandwidth = bandwidth;
        req.allreduce_latency = allreduce_latency;
        req.link_bandwidth = std::move(link_bandwidth);
        req.message_bytes = std::move(message_bytes);
        req.traffic = std::move(traffic);
        req.buckets = buckets;
        whatif_result r;
        try {
          py::gil_scoped_release unlocked;
          r = run_whatif(s, req);
        } catch (const field_error& e) {
          throw invalid_argument(keyword_of(e.field()) + ": " + e.rule());
        }
        return json ? whatif_to_json(r).dump(2) + "\n" : whatif_text(r);
      },
      py::arg("schedule"), py::kw_only(), py::arg("cost") = py::none(),
      py::arg("costs") = py::none(), py::arg("memory") = py::none(),
      py::arg("memory_file") = py::none(), py::arg("memory_limit") = py::none(),
      py::arg("cv") = 0.0, py::arg("link_cv") = 0.0,
      py::arg("stragglers") = std::vector<std::pair<stage_index, double>>{},
      py::arg("stalls") = py::none(), py::arg("samples") = 100, py::arg("seed") = py::none(),
      py::arg("sensitivity") = false, py::arg("dynamic") = false, py::arg("replicas") = py::none(),
      py::arg("gradient_bytes") = py::none(), py::arg("bandwidth") = py::none(),
      py::arg("allreduce_latency") = py::none(), py::arg("link_bandwidth") = py::none(),
      py::arg("message_bytes") = py::none(), py::arg("traffic") = py::none(),
      py::arg("buckets") = py::none(), py::arg("format") = "json",
      "The iteration-time distribution of `schedule` under sampled noise, as `pipesched whatif` "
      "prints it (format 'json' or 'text'). Keywords are the CLI's options: stragglers as "
      "[(stage, factor), ...], stalls as (probability, duration), replicas with gradient_bytes "
      "(and bandwidth, allreduce_latency) for D data-parallel replicas; link_bandwidth (one "
      "value or one per stage), message_bytes, traffic ('fifo' or 'priority') and buckets "
      "time every sample over links.");

  m.def(
      "analyze",
      [](const std::string& path, double abs_threshold, double rel_threshold, double comm,
         const std::vector<std::string>& replan, const memory_limits& memory_limit,
         bool allow_overlaps, std::optional<std::string> planned_costs,
         std::optional<double> planned_fraction, std::optional<double> seconds_per_unit,
         const std::string& format) {
        const bool json = json_format(format);
        bool planned_given = false;
        try {
          planned_given =
              calibration_inputs_given(planned_costs.has_value(), planned_fraction.has_value(),
                                       seconds_per_unit.has_value());
        } catch (const field_error& e) {
          detail::fail("planned_costs, planned_fraction and seconds_per_unit: ", e.rule());
        }
        const std::string text = read_text_file(path);
        measured_run run;
        try {
          run = read_measured_run(text);
        } catch (const invalid_argument& e) {
          detail::fail(path, ": ", e.what());
        }
        analyze_options o;
        o.thresholds = {abs_threshold, rel_threshold};
        o.comm = comm;
        o.replan.generators = replan;
        o.replan.memory_limit = memory_limit;
        o.allow_overlaps = allow_overlaps;
        if (planned_given) {
          planned_speed p;
          try {
            p.costs = read_cost_model(read_text_file(*planned_costs));
          } catch (const invalid_argument& e) {
            detail::fail("planned_costs: ", *planned_costs, ": ", e.what());
          }
          p.achieved_fraction = *planned_fraction;
          p.seconds_per_unit = *seconds_per_unit;
          o.planned = p;
        }
        analyze_result r;
        try {
          py::gil_scoped_release unlocked;
          r = analyze_run(run, o);
        } catch (const field_error& e) {
          throw invalid_argument(keyword_of(e.field()) + ": " + e.rule());
        }
        return json ? analyze_to_json(r).dump(2) + "\n" : analyze_text(r);
      },
      py::arg("path"), py::kw_only(), py::arg("abs_threshold") = 0.0,
      py::arg("rel_threshold") = 0.03, py::arg("comm") = 0.0,
      py::arg("replan") = std::vector<std::string>{"zb-auto", "zb-v"},
      py::arg("memory_limit") = py::none(), py::arg("allow_overlaps") = false,
      py::arg("planned_costs") = py::none(), py::arg("planned_fraction") = py::none(),
      py::arg("seconds_per_unit") = py::none(), py::arg("format") = "json",
      "Measured timings in (a pipesched Chrome trace or a CSV stage,kind,mb,chunk,start,end): "
      "per-stage costs, stragglers and re-plans, as `pipesched analyze` prints them. With "
      "planned_costs (a plan's exported PREFIX.costs.json), planned_fraction and "
      "seconds_per_unit: also the achieved fraction of peak the run shows.");
}

}  // namespace pipesched::python
