// `pipesched list`, `generate`, `validate` and `simulate`: a schedule (cli_support.hpp's
// schedule options) and what it is, shown as text, JSON or a picture.

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/core.h>

#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/report_text.hpp>
#include <pipesched/io/simulation_json.hpp>
#include <pipesched/io/terminal.hpp>
#include <pipesched/io/text.hpp>
#include <pipesched/io/timeline.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/io/whatif_io.hpp>
#include <pipesched/tools/whatif.hpp>

#include "cli_support.hpp"

namespace {

using namespace pipesched;
using namespace pipesched::cli;

int cmd_list() {
  std::size_t width = 0;
  for (const auto& e : default_registry().entries()) {
    width = std::max(width, e.name.size());
  }
  for (const auto& e : default_registry().entries()) {
    fmt::print("{:<{}}  {}\n", e.name, width, e.description);
  }
  return 0;
}

struct generate_options {
  schedule_source src;
  model_options model;
  std::string format = "text";
  std::string output;
  torch_csv_cli csv;
};

int cmd_generate(const generate_options& o) {
  const torch_csv_options csv = o.csv.options(o.format);
  check_format(o.format);
  const generator_params params = o.model.params();
  const generation_result g = load_schedule(o.src, params);
  const schedule& s = g.sched;
  // A limit the generator cannot take is checked, never ignored: no schedule over it is shown.
  if (!g.memory_violations.empty()) {
    print_violations(violation_lines(g.memory_violations), false);
    return 1;
  }
  std::string text;
  if (o.format == "json") {
    text = write_schedule_json(s);
  } else if (o.format == "torch-csv") {
    text = to_torch_csv(s, csv);
  } else {
    // Every view times the schedule the same way: the simulator under --cost (default T_F =
    // T_B = T_W = 1 per stage, BW = T_B + T_W), so generate and simulate show one makespan.
    if (o.format != "text") {
      report_options ro;
      ro.costs = params.costs;
      ro.memory = params.memory;
      write_picture(o.output, o.format, s, report_schedule(s, ro), csv);
      return 0;
    }
    const simulation_result r = simulate(s, params.costs);
    terminal_options to;
    to.color = is_stdout(o.output) && stdout_is_terminal();
    text = format_schedule_text(s) + "\n" + render_timeline(s, to_timeline(s, r), to);
  }
  write_output(o.output, text);
  return 0;
}

struct validate_options_cli {
  schedule_source src;
  model_options model;
};

int cmd_validate(const validate_options_cli& o) {
  const generator_params params = o.model.params();
  const schedule s = load_schedule(o.src, params).sched;
  // One call: validate, then (for a valid schedule) the memory limit, without timing.
  report_options ro;
  ro.memory = params.memory;
  ro.memory_limit = params.memory_limit;
  ro.analyze_invalid = false;
  ro.simulate = false;
  const schedule_report r = report_schedule(s, ro);
  if (!r.ok()) {
    print_violations(r.violations(), false);
    return 1;
  }
  fmt::print("valid: {} (p={}, m={}, v={}, {} ops)\n", s.name().empty() ? "schedule" : s.name(),
             s.stages(), s.microbatches(), s.chunks(), s.size());
  return 0;
}

struct simulate_options_cli {
  schedule_source src;
  model_options model;
  links_cli links;  // --link-bandwidth ...: the links report instead of simulate's
  std::string transfers = "blocking";  // --transfers: SEND / RECV of a lowered schedule
  bool json = false;
  std::string format = "text";
  std::string output;
  torch_csv_cli csv;
};

/// simulate --link-bandwidth ...: the schedule over links (time_links, tools/whatif.hpp), as text
/// or JSON (io/whatif_io.hpp).
int simulate_links_cli(const simulate_options_cli& o,
                       const schedule& s,
                       const generator_params& params,
                       bool json) {
  if (o.format != "text" && o.format != "json") {
    usage_error("--format " + o.format + ": not with --link-bandwidth (text or json)");
  }
  whatif_request req;
  req.costs = params.costs;
  o.links.fill(req);
  link_timing_result r;
  link_discipline traffic = link_discipline::fifo;
  try {
    r = time_links(s, req, &traffic);
  } catch (const field_error& e) {
    whatif_usage_error(e);
  }
  const std::uint32_t d = req.replicas.value_or(1);
  write_output(o.output, json ? links_to_json(s, r, traffic, d).dump(2) + "\n"
                              : links_text(s, r, traffic, d));
  return 0;
}

int cmd_simulate(const simulate_options_cli& o) {
  const torch_csv_options csv = o.csv.options(o.format);
  check_format(o.format);
  if (o.json && o.format != "text" && o.format != "json") {
    usage_error("--json: conflicts with --format " + o.format + " (use one)");
  }
  const bool json = o.json || o.format == "json";
  const generator_params params = o.model.params();
  const generation_result g = load_schedule(o.src, params);
  if (o.links.link_bandwidth || o.links.replicas || o.links.gradient_bytes ||
      o.links.allreduce_latency || o.links.message_bytes || o.links.traffic || o.links.buckets) {
    return simulate_links_cli(o, g.sched, params, json);
  }
  const schedule& s = g.sched;
  report_options ro;
  ro.costs = params.costs;
  ro.memory = params.memory;
  ro.memory_limit = params.memory_limit;
  // For the schedules that search: no schedule within the same memory limit has a shorter
  // longest stage span (returned with the schedule by the same search).
  ro.lower_bound = g.lower_bound;
  // JSON describes invalid schedules too; the other outputs only list their violations.
  ro.analyze_invalid = json;
  if (o.transfers != "blocking" && o.transfers != "posted") {
    usage_error("--transfers: must be blocking or posted, not \"" + o.transfers + "\"");
  }
  ro.transfers = o.transfers == "posted" ? transfer_timing::posted : transfer_timing::blocking;
  const schedule_report rep = report_schedule(s, ro);
  const int code = rep.ok() ? 0 : 1;
  if (!rep.validation.ok() && !json) {
    print_violations(violation_lines(rep.validation), false);
    return 1;
  }
  const bool to_stdout = is_stdout(o.output);
  if (json) {
    write_output(o.output, simulation_to_json(s, rep).dump(2) + "\n");
    if (!to_stdout) {
      print_violations(rep.violations(), false);
    }
    return code;
  }
  if (o.format == "text") {
    terminal_options view;
    view.color = to_stdout && stdout_is_terminal();
    write_output(o.output, report_text(s, rep, view));
    if (!to_stdout) {
      print_violations(violation_lines(rep.memory.violations), false);
    }
    return code;
  }
  write_picture(o.output, o.format, s, rep, csv);
  print_violations(violation_lines(rep.memory.violations), to_stdout);
  return code;
}

const registration list_cmd{{"list", 10, [](CLI::App& app) -> std::function<int()> {
                               app.add_subcommand(
                                   "list", "List every schedule name with a one-line description");
                               return [] { return cmd_list(); };
                             }}};

void declare_generate(CLI::App* g, generate_options& gen) {
  add_schedule_source(g, gen.src, false);
  add_model_options(g, gen.model);
  g->add_option("--format,-f", gen.format,
                "Output: text (listing + timeline timed with --cost), json, torch-csv, chrome "
                "(trace), svg")
      ->capture_default_str();
  g->add_option("--output,-o", gen.output, "Write to FILE instead of stdout");
  add_torch_csv_options(g, gen.csv);
}

const registration generate_cmd = command<generate_options>(
    "generate", 20, "Generate a schedule and print or save it", declare_generate, cmd_generate);

void declare_validate(CLI::App* v, validate_options_cli& val) {
  add_schedule_source(v, val.src, true);
  add_model_options(v, val.model);
}

const registration validate_cmd =
    command<validate_options_cli>("validate",
                                  30,
                                  "Check a schedule; exit 1 listing every violation",
                                  declare_validate,
                                  cmd_validate);

void declare_simulate(CLI::App* sc, simulate_options_cli& sim) {
  add_schedule_source(sc, sim.src, true);
  add_model_options(sc, sim.model);
  sc->add_option("--transfers", sim.transfers,
                 "SEND / RECV of a lowered schedule: blocking (a rendezvous both stages wait "
                 "in, as MPI_Send / MPI_Recv) or posted (isend / irecv, as PyTorch's runtime: "
                 "only the op consuming the data waits for it)")
      ->capture_default_str();
  sc->add_flag("--json", sim.json, "Print one JSON object instead of the readable report");
  sc->add_option("--format,-f", sim.format,
                 "Output: text (report + timeline), json, chrome (trace), svg, torch-csv")
      ->capture_default_str();
  sc->add_option("--output,-o", sim.output, "Write the report, JSON or picture to FILE");
  sim.links.add(sc);
  add_torch_csv_options(sc, sim.csv);
}

const registration simulate_cmd =
    command<simulate_options_cli>("simulate",
                                  40,
                                  "Simulate a schedule: makespan, bubble, memory",
                                  declare_simulate,
                                  cmd_simulate);

}  // namespace
