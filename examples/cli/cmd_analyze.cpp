// `pipesched analyze`: telemetry in, straggler out, plan back (plan/analyze.hpp) on a measured
// run (a pipesched Chrome trace or a timing CSV), printed by io/analyze_io.hpp.

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/core.h>

#include <pipesched/io/analyze_io.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/telemetry_io.hpp>
#include <pipesched/plan/analyze.hpp>

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
};

int cmd_analyze(const analyze_options_cli& o) {
  analyze_result r;
  {
    // No count to show here: the phases, with the elapsed time.
    progress_line progress("analyze: reading " + o.trace);
    const std::string text = read_text_file(o.trace == "-" ? "/dev/stdin" : o.trace);
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    measured_run run;
    try {
      run = first != std::string::npos && text[first] == '{' ? read_chrome_trace_run(text)
                                                             : read_timing_csv(text);
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
    ao.phase = [&progress](const std::string& what) { progress.set("analyze: " + what); };
    try {
      r = analyze_run(run, ao);
    } catch (const field_error& e) {
      usage_error(option_for(e.field(),
                             {{"absolute", "--abs-threshold"}, {"relative", "--rel-threshold"}}) +
                  ": " + e.rule());
    }
  }
  for (const std::string& w : r.warnings) {
    std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  fmt::print("{}", o.json ? analyze_to_json(r).dump(2) + "\n" : analyze_text(r));
  return 0;
}

const registration analyze_cmd{
    {"analyze", 60, [](CLI::App& app) -> std::function<int()> {
       auto an = std::make_shared<analyze_options_cli>();
       auto* a = app.add_subcommand(
           "analyze", "Measured timings in: per-stage costs, stragglers, re-plan and its gain");
       a->add_option(
            "trace", an->trace,
            "A pipesched Chrome trace, or a CSV stage,kind,mb,chunk,start,end (- for stdin)")
           ->required();
       a->add_option("--abs-threshold", an->absolute,
                     "Straggler: this much slower per micro-batch than its peers (trace units)")
           ->capture_default_str();
       a->add_option("--rel-threshold", an->relative, "Straggler: and this fraction slower")
           ->capture_default_str();
       a->add_option("--comm", an->comm, "Transfer latency for the re-plan (trace units)")
           ->capture_default_str();
       a->add_option("--replan", an->replan_with, "Generators to re-plan with")
           ->delimiter(',')
           ->capture_default_str();
       a->add_option("--memory-limit", an->memory_limit,
                     "Per-stage limit for the re-plan (M_B units)");
       a->add_flag("--allow-overlap", an->allow_overlap,
                   "Accept ops of one stage that overlap in time (each a warning on stderr)");
       a->add_flag("--json", an->json, "Print one JSON object");
       return [an] { return cmd_analyze(*an); };
     }}};

}  // namespace
