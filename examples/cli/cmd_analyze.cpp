// `pipesched analyze`: telemetry in, straggler out, plan back (tools/analyze.hpp) on a measured
// run (a pipesched Chrome trace or a timing CSV), printed by io/analyze_io.hpp.

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/core.h>

#include <pipesched/io/analyze_io.hpp>
#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/telemetry_io.hpp>
#include <pipesched/tools/analyze.hpp>

#include "cli_support.hpp"

namespace {

using namespace pipesched;
using namespace pipesched::cli;

struct analyze_options_cli {
  std::string trace;
  std::string absolute = "0";
  std::string relative = "0.03";
  std::string comm = "0";
  std::vector<std::string> replan_with = {"zb-auto", "zb-v"};
  std::optional<double> memory_limit;
  bool allow_overlap = false;
  bool json = false;
  // The plan the run was made from: --planned-costs, --planned-fraction, --seconds-per-unit.
  std::optional<std::string> planned_costs, planned_fraction, seconds_per_unit;
};

// The three calibration options together or none: one alone cannot say anything.
std::optional<planned_speed> planned_of(const analyze_options_cli& o) {
  try {
    if (!calibration_inputs_given(o.planned_costs.has_value(), o.planned_fraction.has_value(),
                                  o.seconds_per_unit.has_value())) {
      return std::nullopt;
    }
  } catch (const field_error& e) {
    usage_error("--planned-costs, --planned-fraction and --seconds-per-unit: " + e.rule());
  }
  planned_speed p;
  try {
    p.costs = read_cost_model(read_text_file(*o.planned_costs));
  } catch (const pipesched::invalid_argument& e) {
    usage_error("--planned-costs: " + *o.planned_costs + ": " + e.what());
  }
  p.achieved_fraction = parse_real(*o.planned_fraction, "--planned-fraction");
  p.seconds_per_unit = parse_real(*o.seconds_per_unit, "--seconds-per-unit");
  return p;
}

int cmd_analyze(const analyze_options_cli& o) {
  analyze_result r;
  {
    // No count to show here: the phases, with the elapsed time.
    progress_line progress("analyze: reading " + o.trace);
    const std::string text = read_text_file(o.trace == "-" ? "/dev/stdin" : o.trace);
    measured_run run;
    try {
      run = read_measured_run(text);
    } catch (const pipesched::invalid_argument& e) {
      usage_error(o.trace + ": " + e.what());
    }
    analyze_options ao;
    ao.thresholds = {parse_real(o.absolute, "--abs-threshold"),
                     parse_real(o.relative, "--rel-threshold")};
    ao.comm = parse_real(o.comm, "--comm");
    ao.replan.generators = o.replan_with;
    ao.replan.memory_limit = o.memory_limit;
    ao.allow_overlaps = o.allow_overlap;
    ao.planned = planned_of(o);
    ao.phase = [&progress](const std::string& what) { progress.set("analyze: " + what); };
    try {
      r = analyze_run(run, ao);
    } catch (const field_error& e) {
      usage_error(option_for(e.field(), {{"absolute", "--abs-threshold"},
                                         {"relative", "--rel-threshold"},
                                         {"achieved_fraction", "--planned-fraction"},
                                         {"seconds_per_unit", "--seconds-per-unit"}}) +
                  ": " + e.rule());
    } catch (const pipesched::invalid_argument& e) {
      if (ao.planned && std::string_view(e.what()).starts_with("calibrate_achieved_fraction")) {
        usage_error(std::string("--planned-costs: ") + e.what());
      }
      throw;
    }
  }
  for (const std::string& w : r.warnings) {
    std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  fmt::print("{}", o.json ? analyze_to_json(r).dump(2) + "\n" : analyze_text(r));
  return 0;
}

void declare_analyze(CLI::App* a, analyze_options_cli& an) {
  a->add_option("trace", an.trace,
                "A pipesched Chrome trace, or a CSV stage,kind,mb,chunk,start,end (- for stdin)")
      ->required();
  a->add_option("--abs-threshold", an.absolute,
                "Straggler: this much slower per micro-batch than its peers (trace units)")
      ->capture_default_str();
  a->add_option("--rel-threshold", an.relative, "Straggler: and this fraction slower")
      ->capture_default_str();
  a->add_option("--comm", an.comm, "Transfer latency for the re-plan (trace units)")
      ->capture_default_str();
  a->add_option("--replan", an.replan_with, "Generators to re-plan with")
      ->delimiter(',')
      ->capture_default_str();
  a->add_option("--memory-limit", an.memory_limit, "Per-stage limit for the re-plan (M_B units)");
  a->add_flag("--allow-overlap", an.allow_overlap,
              "Accept ops of one stage that overlap in time (each a warning on stderr)");
  a->add_option("--planned-costs", an.planned_costs,
                "The plan's op times (pipesched plan --export PREFIX: PREFIX.costs.json, "
                "seconds): estimate the achieved fraction of peak the run shows");
  a->add_option("--planned-fraction", an.planned_fraction,
                "With --planned-costs: the achieved fraction the plan assumed");
  a->add_option("--seconds-per-unit", an.seconds_per_unit,
                "With --planned-costs: the trace's time unit in seconds (1e-6: microseconds)");
  a->add_flag("--json", an.json, "Print one JSON object");
}

const registration analyze_cmd = command<analyze_options_cli>(
    "analyze",
    60,
    "Measured timings in: per-stage costs, stragglers, re-plan and its gain",
    declare_analyze,
    cmd_analyze);

}  // namespace
