// `pipesched`: the command-line face of the library. A thin layer over the headers; its
// subcommands, options, exit codes and JSON shapes are a contract other tools script against.
//
// Exit codes: 0 success (and, for validate, a valid schedule); 1 the schedule is invalid or
// over its memory budget (one violation per line on stdout); 2 unusable input (bad options,
// malformed files, unknown names), with a one-line `error: ...` on stderr.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/model_json.hpp>
#include <pipesched/io/svg.hpp>
#include <pipesched/io/terminal.hpp>
#include <pipesched/io/text.hpp>
#include <pipesched/io/timeline.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/pipesched.hpp>

namespace {

using namespace pipesched;

/// Where a command's schedule comes from: a generator by name, or a file.
struct schedule_source {
  bool with_comm = false;
  std::string recv = "eager";
  std::string schedule_name;
  std::uint32_t stages = 0;
  std::uint32_t microbatches = 0;
  std::uint32_t chunks = 0;
  std::string input;
  std::optional<std::string> search_budget;       // --search-budget MS
  std::optional<std::string> search_evaluations;  // --search-evaluations N
};

void add_schedule_source(CLI::App* cmd, schedule_source& src, bool allow_input) {
  auto* name =
      cmd->add_option("--schedule,-s", src.schedule_name, "Schedule name (see `pipesched list`)");
  auto* p = cmd->add_option("--stages,-p", src.stages, "Pipeline stages p (>= 1)");
  auto* m = cmd->add_option("--microbatches,-m", src.microbatches, "Micro-batches m (>= 1)");
  cmd->add_option("--chunks,-v", src.chunks, "Model chunks per stage v (default: the schedule's)");
  cmd->add_flag("--with-comm", src.with_comm,
                "Insert SEND/RECV ops that cannot deadlock under blocking point-to-point");
  cmd->add_option("--recv", src.recv,
                  "With --with-comm: eager (post receives early) or late (save receive buffers)")
      ->capture_default_str();
  cmd->add_option("--search-budget", src.search_budget,
                  "zb-auto, zb-1p, zb-2p, zb-v: wall-clock cap on the local search, in "
                  "milliseconds (0: none; the result then depends on the machine's speed)");
  cmd->add_option("--search-evaluations", src.search_evaluations,
                  "zb-auto, zb-1p, zb-2p, zb-v: local search budget in candidate orders timed "
                  "(deterministic; default sized from the problem, 0: no local search)");
  if (allow_input) {
    auto* in = cmd->add_option("--input,-i", src.input,
                               "Schedule file: .json (pipesched format) or .csv (PyTorch actions)");
    in->excludes(name);
    in->excludes(p);
    in->excludes(m);
  }
}

[[noreturn]] void usage_error(const std::string& msg) {
  throw pipesched::invalid_argument(msg);
}

/// Splits "a,b,c" into finite numbers; errors name the option and the expected shape.
std::vector<double> parse_numbers(const std::string& text,
                                  const std::string& option,
                                  std::size_t min_count,
                                  std::size_t max_count,
                                  const std::string& shape) {
  std::vector<double> out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t comma = text.find(',', pos);
    const std::string piece = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
    std::size_t used = 0;
    double v = 0.0;
    try {
      v = std::stod(piece, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (piece.empty() || used != piece.size()) {
      usage_error(option + ": expected " + shape + ", got \"" + text + "\" (\"" + piece +
                  "\" is not a number)");
    }
    if (!std::isfinite(v) || v < 0.0) {
      usage_error(option + ": values must be finite and >= 0, got \"" + piece + "\"");
    }
    out.push_back(v);
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  if (out.size() < min_count || out.size() > max_count) {
    usage_error(option + ": expected " + shape + ", got " + std::to_string(out.size()) +
                " value(s) in \"" + text + "\"");
  }
  return out;
}

/// Options shared by the commands that need costs and memory (simulate, validate, generate of
/// cost-aware schedules).
struct model_options {
  std::string cost = "1,1,1,0";
  std::string memory = "1,0.5";
  std::optional<double> memory_limit;
  std::string costs_file;
  std::string memory_file;

  cost_model costs() const {
    if (!costs_file.empty()) {
      try {
        return read_cost_model(read_text_file(costs_file));
      } catch (const pipesched::invalid_argument& e) {
        usage_error("--costs " + costs_file + ": " + e.what());
      }
    }
    const auto v = parse_numbers(cost, "--cost", 3, 4, "TF,TB,TW[,TC]");
    return cost_model::uniform(v[0], v[1], v[2], v.size() > 3 ? v[3] : 0.0);
  }
  memory_model memory_sizes() const {
    if (!memory_file.empty()) {
      try {
        return read_memory_model(read_text_file(memory_file));
      } catch (const pipesched::invalid_argument& e) {
        usage_error("--memory-file " + memory_file + ": " + e.what());
      }
    }
    const auto v = parse_numbers(memory, "--memory", 2, 2, "MB,MW");
    if (v[1] > v[0]) {
      usage_error("--memory: MW (" + std::to_string(v[1]) + ") must be <= MB (" +
                  std::to_string(v[0]) + ")");
    }
    return memory_model::uniform(v[0], v[1]);
  }
  generator_params params() const {
    generator_params p;
    p.costs = costs();
    p.memory = memory_sizes();
    if (memory_limit) {
      if (!std::isfinite(*memory_limit) || *memory_limit <= 0.0) {
        usage_error("--memory-limit: must be a finite number > 0, got " +
                    std::to_string(*memory_limit));
      }
      p.memory_limit = memory_limit;
    }
    return p;
  }
};

void add_model_options(CLI::App* cmd, model_options& o) {
  cmd->add_option("--cost", o.cost, "Costs TF,TB,TW[,TC] (per chunk; TC = transfer latency)")
      ->capture_default_str();
  cmd->add_option("--memory", o.memory, "Memory per chunk and micro-batch MB,MW")
      ->capture_default_str();
  cmd->add_option("--memory-limit", o.memory_limit,
                  "Per-stage memory limit, in the units of --memory");
  auto* cf = cmd->add_option("--costs", o.costs_file,
                             "Cost model JSON file (per-stage / per-chunk / per-link costs; "
                             "see docs/formats.md); replaces --cost");
  auto* mf = cmd->add_option("--memory-file", o.memory_file,
                             "Memory model JSON file (per-stage / per-chunk / static memory; "
                             "see docs/formats.md); replaces --memory");
  (void)cf;
  (void)mf;
}

bool stdout_is_terminal() {
  return ::isatty(STDOUT_FILENO) == 1 && std::getenv("NO_COLOR") == nullptr;
}

/// --csv-layout / --csv-spelling: how --format torch-csv writes (docs/formats.md).
struct torch_csv_cli {
  std::optional<std::string> layout;    // steps | list; unset: list with SEND/RECV ops, else steps
  std::optional<std::string> spelling;  // current | legacy; unset: current

  /// The writer options; throws (exit 2) on a bad value or when `format` is not torch-csv.
  torch_csv_options options(const std::string& format) const {
    torch_csv_options o;
    if (layout && *layout != "steps" && *layout != "list") {
      usage_error("--csv-layout: must be steps or list, not \"" + *layout + "\"");
    }
    if (spelling && *spelling != "current" && *spelling != "legacy") {
      usage_error("--csv-spelling: must be current or legacy, not \"" + *spelling + "\"");
    }
    if (format != "torch-csv" && (layout || spelling)) {
      usage_error(std::string(layout ? "--csv-layout" : "--csv-spelling") +
                  ": only meaningful with --format torch-csv");
    }
    if (layout) {
      o.alignment = *layout == "list" ? torch_alignment::list_order : torch_alignment::unit_steps;
    }
    if (spelling) {
      o.spelling = *spelling == "legacy" ? torch_spelling::legacy : torch_spelling::current;
    }
    return o;
  }
};

void add_torch_csv_options(CLI::App* cmd, torch_csv_cli& o) {
  cmd->add_option("--csv-layout", o.layout,
                  "torch-csv: steps (unit-step grid, empty idle cells) or list (list order, no "
                  "empty cells); default list when the schedule has SEND/RECV ops (--with-comm), "
                  "else steps");
  cmd->add_option("--csv-spelling", o.spelling,
                  "torch-csv: current (I = input gradient, B = full backward) or legacy (B, BW); "
                  "default current");
}

/// Renders a timed schedule in one of the picture / interchange formats, or "" for formats
/// that are not pictures.
std::string render_picture(const std::string& format,
                           const schedule& s,
                           const cost_model& costs,
                           const memory_model& memory,
                           const torch_csv_options& csv) {
  if (format == "torch-csv") {
    return to_torch_csv(s, csv);
  }
  if (format != "chrome" && format != "svg") {
    return {};
  }
  const simulation_result r = simulate(s, costs);
  if (r.deadlock) {
    usage_error("--format " + format + ": the schedule cannot run to the end (" +
                r.deadlock->describe() + ")");
  }
  const timeline tl = to_timeline(s, r);
  const auto curves = memory_curves(check_memory(s, memory, memory_options{}, r));
  if (format == "chrome") {
    chrome_trace_options co;
    co.memory = &curves;
    return to_chrome_trace(s, tl, co) + "\n";
  }
  svg_options so;
  so.memory = &curves;
  return to_svg(s, tl, so);
}

/// --search-budget / --search-evaluations as zb_auto_options; nullopt when neither is given.
/// Throws (exit 2) on a bad value.
std::optional<zb_auto_options> search_options(const schedule_source& src) {
  if (!src.search_budget && !src.search_evaluations) {
    return std::nullopt;
  }
  zb_auto_options o;
  if (src.search_budget) {
    const std::string& t = *src.search_budget;
    std::size_t used = 0;
    double ms = -1.0;
    try {
      ms = std::stod(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (t.empty() || used != t.size() || !std::isfinite(ms) || ms < 0.0) {
      usage_error(
          "--search-budget: must be a finite number of milliseconds >= 0 (0: no cap), got \"" + t +
          "\"");
    }
    o.search_budget_ms = ms;
  }
  if (src.search_evaluations) {
    const std::string& t = *src.search_evaluations;
    if (t.empty() || t.find_first_not_of("0123456789") != std::string::npos) {
      usage_error("--search-evaluations: must be a whole number >= 0 (candidate orders), got \"" +
                  t + "\"");
    }
    // The largest value is zb_auto_options::default_evaluations, "sized from the problem".
    constexpr unsigned long long max_n = zb_auto_options::default_evaluations - 1;
    unsigned long long n = max_n + 1;
    try {
      n = std::stoull(t);
    } catch (const std::out_of_range&) {
      // beyond 64 bits: n stays above max_n, reported below
    }
    if (n > max_n) {
      usage_error("--search-evaluations: must be at most " + std::to_string(max_n) + ", got \"" +
                  t + "\"");
    }
    o.search_evaluations = static_cast<std::size_t>(n);
  }
  return o;
}

generation_result load_schedule_compute(const schedule_source& src, const generator_params& base);

/// The schedule a command works on, with what its generator knows about it (the search's lower
/// bound): generated or read, then lowered when --with-comm asks.
generation_result load_schedule(const schedule_source& src, const generator_params& base) {
  if (src.recv != "eager" && src.recv != "late") {
    usage_error("--recv: must be eager or late, not \"" + src.recv + "\"");
  }
  if (src.recv != "eager" && !src.with_comm) {
    usage_error("--recv: only meaningful with --with-comm");
  }
  generation_result g = load_schedule_compute(src, base);
  if (!src.with_comm) {
    return g;
  }
  lowering_options lo;
  lo.receives = src.recv == "late" ? receive_placement::late : receive_placement::eager;
  lo.costs = base.costs;
  // The search's figures describe the compute-only order, not the lowered one.
  generation_result lowered;
  lowered.sched = lower_communication(g.sched, lo);
  return lowered;
}

/// The names of the registered schedules that search, "a, b, c".
std::string searching_schedules() {
  std::string out;
  for (const auto& e : default_registry().entries()) {
    if (e.searches) {
      out += (out.empty() ? "" : ", ") + e.name;
    }
  }
  return out;
}

generation_result load_schedule_compute(const schedule_source& src, const generator_params& base) {
  generation_options gen_opts;
  gen_opts.search = search_options(src);
  const char* search_flag = src.search_budget ? "--search-budget" : "--search-evaluations";
  if (gen_opts.search && !src.input.empty()) {
    usage_error(std::string(search_flag) + ": only meaningful when a schedule that searches (" +
                searching_schedules() + ") is generated, not with --input");
  }
  if (!src.input.empty()) {
    generation_result g;
    const std::string text = read_text_file(src.input);
    try {
      if (src.input.size() >= 4 && src.input.compare(src.input.size() - 4, 4, ".csv") == 0) {
        std::string stem = src.input.substr(src.input.find_last_of('/') + 1);
        stem.resize(stem.size() - 4);
        g.sched = from_torch_csv(text, stem);
      } else {
        g.sched = read_schedule_json(text);
      }
      return g;
    } catch (const pipesched::invalid_argument& e) {
      usage_error(src.input + ": " + e.what());
    }
  }
  if (src.schedule_name.empty()) {
    usage_error("give --schedule NAME --stages P --microbatches M, or --input FILE");
  }
  if (src.stages == 0 && src.microbatches == 0) {
    usage_error("--stages and --microbatches are required with --schedule");
  }
  const auto& entry = default_registry().at(src.schedule_name);
  if (gen_opts.search && !entry.searches) {
    usage_error(std::string(search_flag) + ": only meaningful for schedules that search (" +
                searching_schedules() + "), not \"" + entry.name + "\"");
  }
  generator_params params = base;
  params.stages = src.stages;
  params.microbatches = src.microbatches;
  params.chunks = src.chunks;
  return entry.generate_result(params, gen_opts);
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    usage_error(path + ": cannot open for writing");
  }
  out << text;
  if (!out) {
    usage_error(path + ": write failed");
  }
}

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
  const schedule s = load_schedule(o.src, o.model.params()).sched;
  std::string text;
  if (o.format == "text") {
    terminal_options to;
    to.color = o.output.empty() && stdout_is_terminal();
    text = format_schedule_text(s) + "\n" + render_schedule(s, to);
  } else if (o.format == "json") {
    text = write_schedule_json(s);
  } else {
    const generator_params params = o.model.params();
    text = render_picture(o.format, s, params.costs, params.memory, csv);
    if (text.empty()) {
      usage_error("--format: unknown format \"" + o.format +
                  "\" (known: text, json, torch-csv, chrome, svg)");
    }
  }
  write_output(o.output, text);
  return 0;
}

struct validate_options_cli {
  schedule_source src;
  model_options model;
};

/// Prints every budget violation; true when there was one.
bool report_budget(const memory_report& mem) {
  for (const auto& v : mem.violations) {
    fmt::print("memory_budget: {}\n", v.message);
  }
  return !mem.violations.empty();
}

memory_options budget_options(const model_options& m) {
  return m.memory_limit ? memory_options::with_limit(*m.memory_limit) : memory_options{};
}

int cmd_validate(const validate_options_cli& o) {
  const generator_params params = o.model.params();
  const schedule s = load_schedule(o.src, params).sched;
  const validation_report r = validate(s);
  if (r.ok() && o.model.memory_limit) {
    memory_options mo = budget_options(o.model);
    mo.record_curve = false;
    if (report_budget(check_memory(s, params.memory, mo))) {
      return 1;
    }
  }
  if (r.ok()) {
    fmt::print("valid: {} (p={}, m={}, v={}, {} ops)\n", s.name().empty() ? "schedule" : s.name(),
               s.stages(), s.microbatches(), s.chunks(), s.size());
    return 0;
  }
  for (const auto& v : r.violations) {
    fmt::print("{}: {}\n", to_string(v.kind), v.message);
  }
  if (r.truncated() > 0) {
    fmt::print("... and {} more violations\n", r.truncated());
  }
  return 1;
}

struct simulate_options_cli {
  schedule_source src;
  model_options model;
  bool json = false;
  std::string format = "text";
  std::string output;
  torch_csv_cli csv;
};

int cmd_simulate(const simulate_options_cli& o) {
  const torch_csv_options csv = o.csv.options(o.format);
  const generator_params params = o.model.params();
  const generation_result g = load_schedule(o.src, params);
  const schedule& s = g.sched;
  const validation_report vr = validate(s);
  if (!vr.ok()) {
    for (const auto& v : vr.violations) {
      fmt::print("{}: {}\n", to_string(v.kind), v.message);
    }
    return 1;
  }
  if (o.format != "text" && o.format != "json") {
    const std::string text = render_picture(o.format, s, params.costs, params.memory, csv);
    if (text.empty()) {
      usage_error("--format: unknown format \"" + o.format +
                  "\" (known: text, json, torch-csv, chrome, svg)");
    }
    write_output(o.output, text);
    return 0;
  }
  const simulation_result r = simulate(s, params.costs);
  const memory_report mem = check_memory(s, params.memory, budget_options(o.model), r);
  // For the schedules that search: the lower bound on the longest stage span (no schedule
  // within the same memory limit is shorter), returned with the schedule by the same search.
  const std::optional<double> bound = g.lower_bound;
  if (o.json || o.format == "json") {
    nlohmann::json j;
    j["schedule"] = s.name();
    j["num_stages"] = s.stages();
    j["microbatches"] = s.microbatches();
    j["chunks"] = s.chunks();
    j["makespan"] = r.makespan;
    j["bubble_rate"] = r.bubble_rate;
    j["max_peak_memory"] = mem.max_peak();
    if (bound) {
      j["span_lower_bound"] = *bound;
    }
    nlohmann::json stages = nlohmann::json::array();
    for (stage_index st = 0; st < s.stages(); ++st) {
      const auto& t = r.stages[st];
      stages.push_back({{"span", t.span},
                        {"busy", t.busy},
                        {"idle", t.idle},
                        {"idle_fraction", t.idle_fraction},
                        {"first_start", t.first_start},
                        {"last_end", t.last_end},
                        {"peak_memory", mem.peak_memory(st)}});
    }
    j["stages"] = std::move(stages);
    if (o.model.memory_limit) {
      j["memory_limit"] = *o.model.memory_limit;
      j["within_memory_limit"] = mem.violations.empty();
    }
    write_output(o.output, j.dump(2) + "\n");
    return mem.violations.empty() ? 0 : 1;
  }
  terminal_options to;
  to.color = o.output.empty() && stdout_is_terminal();
  fmt::print("{}\n", render_timeline(s, to_timeline(s, r), to));
  fmt::print("{}: p={} m={} v={}, {} ops\n", s.name().empty() ? "schedule" : s.name(), s.stages(),
             s.microbatches(), s.chunks(), s.size());
  fmt::print("makespan {:g}, bubble rate {:.4f} (largest span {:g} on stage {})\n", r.makespan,
             r.bubble_rate, r.stages[r.max_span_stage].span, r.max_span_stage);
  if (bound) {
    const double span = r.stages[r.max_span_stage].span;
    fmt::print("lower bound on the span within this memory limit: {:g} (gap {:.2f}%)\n", *bound,
               span > 0 ? 100.0 * (span - *bound) / span : 0.0);
  }
  fmt::print("{:>6} {:>10} {:>10} {:>10} {:>7} {:>12}\n", "stage", "span", "busy", "idle", "idle%",
             "peak memory");
  for (stage_index st = 0; st < s.stages(); ++st) {
    const auto& t = r.stages[st];
    fmt::print("{:>6} {:>10g} {:>10g} {:>10g} {:>6.1f}% {:>12g}\n", st, t.span, t.busy, t.idle,
               100.0 * t.idle_fraction, mem.peak_memory(st));
  }
  return report_budget(mem) ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pipesched: generate, check, simulate and draw pipeline-parallel schedules"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::to_string(PIPESCHED_VERSION_MAJOR) + "." +
                                        std::to_string(PIPESCHED_VERSION_MINOR) + "." +
                                        std::to_string(PIPESCHED_VERSION_PATCH));

  app.add_subcommand("list", "List every schedule name with a one-line description");

  generate_options gen;
  auto* g = app.add_subcommand("generate", "Generate a schedule and print or save it");
  add_schedule_source(g, gen.src, false);
  add_model_options(g, gen.model);
  g->add_option("--format,-f", gen.format,
                "Output: text (listing + unit-step timeline), json, torch-csv, chrome (trace), svg")
      ->capture_default_str();
  g->add_option("--output,-o", gen.output, "Write to FILE instead of stdout");
  add_torch_csv_options(g, gen.csv);

  validate_options_cli val;
  auto* v = app.add_subcommand("validate", "Check a schedule; exit 1 listing every violation");
  add_schedule_source(v, val.src, true);
  add_model_options(v, val.model);

  simulate_options_cli sim;
  auto* sc = app.add_subcommand("simulate", "Simulate a schedule: makespan, bubble, memory");
  add_schedule_source(sc, sim.src, true);
  add_model_options(sc, sim.model);
  sc->add_flag("--json", sim.json, "Print one JSON object instead of the readable report");
  sc->add_option("--format,-f", sim.format,
                 "Output: text (report + timeline), json, chrome (trace), svg, torch-csv")
      ->capture_default_str();
  sc->add_option("--output,-o", sim.output, "Write json / chrome / svg / torch-csv to FILE");
  add_torch_csv_options(sc, sim.csv);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }

  try {
    if (app.got_subcommand("list")) {
      return cmd_list();
    }
    if (app.got_subcommand("generate")) {
      return cmd_generate(gen);
    }
    if (app.got_subcommand("validate")) {
      return cmd_validate(val);
    }
    if (app.got_subcommand("simulate")) {
      return cmd_simulate(sim);
    }
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 2;
}
