// `pipesched whatif`: the iteration-time distribution of a schedule (or of the dynamic policy on
// its placement, or of D data-parallel replicas) under sampled noise: one whatif_request
// (tools/whatif.hpp), printed by io/whatif_io.hpp (docs/robustness.md).

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include <pipesched/io/distribution_svg.hpp>
#include <pipesched/io/whatif_io.hpp>
#include <pipesched/tools/whatif.hpp>

#include "cli_support.hpp"

namespace {

using namespace pipesched;
using namespace pipesched::cli;

struct whatif_options_cli {
  schedule_source src;
  model_options model;
  // Numbers are read as text and checked by the library (whatif_request's rules), so every
  // message names the option and the rule in the same words.
  std::optional<std::string> cv;
  std::optional<std::string> link_cv;
  std::vector<std::string> stragglers;  // K:FACTOR, each stage once
  std::optional<std::string> stalls;    // PROBABILITY:DURATION
  std::string samples = "100";
  std::optional<std::string> seed;  // only with noise (whatif_request::seed)
  bool sensitivity = false;
  bool dynamic = false;
  links_cli links;                       // --replicas, --gradient-bytes, the links
  std::optional<std::string> bandwidth;  // the separate ring's bytes per time unit
  report_output_cli out;
};

/// "A:B" as two finite numbers; errors name the option and its shape.
std::pair<double, double> parse_pair(const std::string& text,
                                     const std::string& option,
                                     const std::string& shape) {
  const std::size_t colon = text.find(':');
  if (colon == std::string::npos) {
    usage_error(option + ": expected " + shape + ", got \"" + text + "\"");
  }
  return {parse_real(text.substr(0, colon), option + " (" + shape + ")"),
          parse_real(text.substr(colon + 1), option + " (" + shape + ")")};
}

/// whatif --format svg: the histogram and CDF of the sampled iteration times.
void write_distribution(const std::string& path,
                        const std::string& name,
                        std::vector<double> samples,
                        std::uint64_t seed) {
  distribution_svg_options so;
  so.unit = "time units of --cost";
  so.title =
      fmt::format("{}: iteration time over {} samples (seed {})", name, samples.size(), seed);
  write_output(path, to_distribution_svg({{name, std::move(samples)}}, so));
}

// No noise option: every sample equals simulate's makespan.
int cmd_whatif(const whatif_options_cli& o) {
  const std::string format = o.out.chosen("whatif", {"text", "json", "svg"});
  const bool json = format == "json";
  const bool svg = format == "svg";
  const generator_params params = o.model.params();
  const schedule s = load_schedule(o.src, params).sched;
  whatif_request req;
  req.costs = params.costs;
  req.memory = params.memory;
  req.memory_limit = params.memory_limit;
  req.samples = static_cast<std::uint32_t>(
      parse_count(o.samples, "--samples", std::numeric_limits<std::uint32_t>::max()));
  if (o.seed) {
    req.seed = parse_count(*o.seed, "--seed", std::numeric_limits<std::uint64_t>::max());
  }
  req.sensitivity = o.sensitivity;
  req.dynamic = o.dynamic;
  req.keep_samples = svg;
  req.cv = o.cv ? parse_real(*o.cv, "--cv") : 0.0;
  req.link_cv = o.link_cv ? parse_real(*o.link_cv, "--link-cv") : 0.0;
  for (const std::string& k : o.stragglers) {
    const auto [stage, factor] = parse_pair(k, "--straggler", "K:FACTOR");
    if (stage < 0 || stage != std::floor(stage) ||
        stage > std::numeric_limits<stage_index>::max()) {
      usage_error("--straggler: K must be a stage index (a whole number >= 0), got \"" + k + "\"");
    }
    req.stragglers.emplace_back(static_cast<stage_index>(stage), factor);
  }
  if (o.stalls) {
    const auto [prob, dur] = parse_pair(*o.stalls, "--stalls", "P:D");
    req.stalls = stall_model{prob, dur};
  }
  o.links.fill(req);
  if (o.bandwidth) {
    req.bandwidth = parse_real(*o.bandwidth, "--bandwidth");
  }
  whatif_result r;
  try {
    progress_line progress("whatif");
    progress.set_count(0, req.samples);
    req.progress = [&progress](std::uint64_t done, std::uint64_t total) {
      progress.set_count(done, total);
    };
    r = run_whatif(s, req);
  } catch (const field_error& e) {
    whatif_usage_error(e);
  }
  if (svg) {
    const std::string name =
        r.data_parallel ? fmt::format("{}, D={} replicas", r.name, r.replicas) : r.name;
    std::vector<double> samples = r.samples();
    write_distribution(o.out.output, name, std::move(samples), r.seed);
    return 0;
  }
  write_output(o.out.output, json ? whatif_to_json(r).dump(2) + "\n" : whatif_text(r));
  return 0;
}

void declare_whatif(CLI::App* w, whatif_options_cli& wi) {
  add_schedule_source(w, wi.src, true);
  add_model_options(w, wi.model);
  w->add_option("--cv", wi.cv,
                "Per-op log-normal noise, coefficient of variation (0 .. 10; default 0)");
  w->add_option("--link-cv", wi.link_cv, "Noise of every cross-stage latency (cv, 0 .. 10)");
  w->add_option("--straggler", wi.stragglers,
                "Stage K runs FACTOR (> 0) times slower: K:FACTOR (each stage once)");
  w->add_option("--stalls", wi.stalls,
                "Each op stalls with probability P (0 .. 1) for D (>= 0, --cost units): P:D");
  w->add_option("--samples,-n", wi.samples, "Sampled iterations (>= 1)")->capture_default_str();
  w->add_option("--seed", wi.seed,
                "Noise seed (0 .. 2^64-1; default 1), with --cv, --link-cv or --stalls");
  w->add_flag("--sensitivity", wi.sensitivity, "Also each stage's sensitivity to a 1% slowdown");
  w->add_flag("--dynamic", wi.dynamic,
              "The dynamic policy (B, else F within --memory-limit, else W) on the schedule's "
              "placement instead of its order");
  wi.links.add(w);
  w->add_option("--bandwidth", wi.bandwidth,
                "With --replicas: ring link bytes per --cost time unit (> 0; default 1)");
  wi.out.add(w, "Print one JSON object",
             "Output: text, json, svg (histogram and CDF of the sampled iteration times)",
             "Write the report, JSON or picture to FILE");
}

const registration whatif_cmd =
    command<whatif_options_cli>("whatif",
                                50,
                                "Iteration-time distribution under sampled noise and stragglers",
                                declare_whatif,
                                cmd_whatif);

}  // namespace
