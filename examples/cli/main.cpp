// `pipesched`: the command-line face of the library. A thin layer over the headers; its
// subcommands, options, exit codes and JSON shapes are a contract other tools script against.
//
// Exit codes: 0 success (and, for validate, a valid schedule); 1 the schedule is invalid or
// over its memory budget (one violation per line on stdout, or on stderr when stdout carries
// a picture or JSON), the same code in every format; 2 unusable input (bad options, malformed
// files, unknown names, numbers that overflow), with a one-line `error: ...` on stderr.

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <pipesched/analysis/data_parallel_timing.hpp>
#include <pipesched/analysis/dynamic_policy.hpp>
#include <pipesched/analysis/robustness.hpp>
#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/analysis/telemetry.hpp>
#include <pipesched/gen/replan.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/distribution_svg.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/memory_model_json.hpp>
#include <pipesched/io/report_text.hpp>
#include <pipesched/io/schedule_input.hpp>
#include <pipesched/io/simulation_json.hpp>
#include <pipesched/io/svg.hpp>
#include <pipesched/io/telemetry_io.hpp>
#include <pipesched/io/terminal.hpp>
#include <pipesched/io/text.hpp>
#include <pipesched/io/timeline.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/pipesched.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

#include "cmd_plan.hpp"

namespace {

using namespace pipesched;

/// Where a command's schedule comes from: a generator by name, or a file.
struct schedule_source {
  bool with_comm = false;
  std::string recv = "eager";
  std::string schedule_name;
  std::optional<std::uint32_t> stages;
  std::optional<std::uint32_t> microbatches;
  std::optional<std::uint32_t> chunks;  // --chunks; unset: the schedule's default
  std::string input;
  std::optional<std::string> input_format;        // --input-format json|torch-csv
  std::optional<std::string> search_budget;       // --search-budget MS
  std::optional<std::string> search_evaluations;  // --search-evaluations N
  std::optional<std::string> recompute;           // --recompute all|CHUNKS
  std::string recompute_policy = "before-backward";
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
  cmd->add_option("--recompute", src.recompute,
                  "Activation recomputation for all chunks or the global chunks G1,G2,...: their "
                  "F keep only their input (M_in), an R re-runs them before the backward");
  cmd->add_option("--recompute-policy", src.recompute_policy,
                  "With --recompute: where each R goes: before-backward, or idle-slot (earliest "
                  "idle gap after its F within --memory-limit, default the before-backward peak)")
      ->capture_default_str();
  if (allow_input) {
    auto* in = cmd->add_option("--input,-i", src.input,
                               "Schedule file (- reads standard input): pipesched JSON or PyTorch "
                               "pipelining CSV, recognised by content");
    in->excludes(name);
    in->excludes(p);
    in->excludes(m);
    cmd->add_option("--input-format", src.input_format,
                    "With --input: json or torch-csv instead of recognising the content");
  }
}

[[noreturn]] void usage_error(const std::string& msg) {
  throw pipesched::invalid_argument(msg);
}

/// One number of an option's value: the whole text must be a finite decimal number >= 0.
/// Subnormal numbers (5e-324) are numbers; values beyond the range of a double are errors.
std::optional<double> parse_number(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front())) != 0) {
    return std::nullopt;
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v < 0.0) {
    return std::nullopt;
  }
  if (errno == ERANGE && std::fabs(v) >= 1.0) {
    return std::nullopt;  // overflow; ERANGE with a tiny value is an underflow: still a number
  }
  return v;
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
    const std::optional<double> v = parse_number(piece);
    if (!v) {
      usage_error(option + ": expected " + shape + " (finite numbers >= 0), got \"" + text +
                  "\" (\"" + piece + "\" is not one)");
    }
    out.push_back(*v);
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
  std::optional<std::string> memory_limit_text;
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
    const auto v = parse_numbers(memory, "--memory", 2, 3, "MB,MW[,MIN]");
    try {
      // The library's M_W <= M_B rule.
      return memory_model(chunk_memory{v[0], v[1], 0.0, v.size() > 2 ? v[2] : 0.0});
    } catch (const pipesched::invalid_argument& e) {
      usage_error(std::string("--memory: ") + e.what());
    }
  }
  /// --memory-limit, per stage in the units of --memory; nullopt when not given.
  std::optional<double> memory_limit() const {
    if (!memory_limit_text) {
      return std::nullopt;
    }
    const std::optional<double> v = parse_number(*memory_limit_text);
    if (!v || *v <= 0.0) {
      usage_error("--memory-limit: must be a finite number > 0, got \"" + *memory_limit_text +
                  "\"");
    }
    return v;
  }
  generator_params params() const {
    generator_params p;
    p.costs = costs();
    p.memory = memory_sizes();
    p.memory_limit = memory_limit();
    return p;
  }
};

void add_model_options(CLI::App* cmd, model_options& o) {
  cmd->add_option("--cost", o.cost,
                  "Costs TF,TB,TW[,TC] of one stage's whole slice for one micro-batch (split "
                  "evenly over its v chunks; TC = latency of one transfer, not split)")
      ->capture_default_str();
  cmd->add_option("--memory", o.memory,
                  "Activation memory MB,MW of one stage's whole slice for one micro-batch (split "
                  "evenly over its v chunks); MIN: a chunk's input, what a recomputed F keeps")
      ->capture_default_str();
  cmd->add_option("--memory-limit", o.memory_limit_text,
                  "Per-stage memory limit, in the units of --memory (the same number for every "
                  "schedule)");
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

/// The output formats of generate and simulate.
constexpr const char* known_formats = "text, json, torch-csv, chrome, svg";

void check_format(const std::string& format) {
  if (format != "text" && format != "json" && format != "torch-csv" && format != "chrome" &&
      format != "svg") {
    usage_error("--format: unknown format \"" + format + "\" (known: " + known_formats + ")");
  }
}

bool is_stdout(const std::string& path) {
  return path.empty() || path == "-";
}

/// Writes a command's output to `path` (empty or -: stdout) through `write(std::ostream&)`, so
/// large outputs stream instead of being built as one string first.
template <class Write>
void write_output_with(const std::string& path, Write&& write) {
  if (is_stdout(path)) {
    write(std::cout);
    std::cout.flush();
    if (!std::cout) {
      usage_error("standard output: write failed");
    }
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    usage_error(path + ": cannot open for writing");
  }
  write(out);
  out.flush();
  if (!out) {
    usage_error(path + ": write failed");
  }
}

void write_output(const std::string& path, const std::string& text) {
  write_output_with(path, [&](std::ostream& os) { os << text; });
}

/// Writes a schedule with its report (report_schedule: timing and memory curves) as torch-csv,
/// chrome or svg to `path`; the Chrome trace streams event by event (a few dozen bytes per op
/// in memory).
void write_picture(const std::string& path,
                   const std::string& format,
                   const schedule& s,
                   const schedule_report& rep,
                   const torch_csv_options& csv) {
  if (format == "torch-csv") {
    write_output(path, to_torch_csv(s, csv));
    return;
  }
  if (rep.simulation.deadlock) {
    usage_error("--format " + format + ": the schedule cannot run to the end (" +
                rep.simulation.deadlock->describe() + ")");
  }
  if (format == "chrome") {
    write_output_with(path, [&](std::ostream& os) {
      write_chrome_trace(os, s, rep);
      os << '\n';
    });
    return;
  }
  write_output(path, to_svg(s, rep));
}

/// Rule violations, one per line: on stdout, or on stderr when stdout already carries the
/// command's output (a picture or JSON written to -), so that output stays well-formed.
void print_violations(const std::vector<std::string>& lines, bool stdout_has_output) {
  for (const auto& l : lines) {
    std::fprintf(stdout_has_output ? stderr : stdout, "%s\n", l.c_str());
  }
}

/// --search-budget / --search-evaluations as zb_auto_options; nullopt when neither is given.
/// Throws (exit 2) on a bad value.
std::optional<zb_auto_options> search_options(const schedule_source& src) {
  if (!src.search_budget && !src.search_evaluations) {
    return std::nullopt;
  }
  zb_auto_options o;
  if (src.search_budget) {
    const std::optional<double> ms = parse_number(*src.search_budget);
    if (!ms) {
      usage_error(
          "--search-budget: must be a finite number of milliseconds >= 0 (0: no cap), got \"" +
          *src.search_budget + "\"");
    }
    o.search_budget_ms = *ms;
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

/// --recompute / --recompute-policy: with_recompute on the compute-only schedule.
void apply_recompute(const schedule_source& src,
                     const generator_params& base,
                     generation_result& g) {
  const bool idle = src.recompute_policy == "idle-slot";
  if (!idle && src.recompute_policy != "before-backward") {
    usage_error("--recompute-policy: must be before-backward or idle-slot, not \"" +
                src.recompute_policy + "\"");
  }
  if (!src.recompute) {
    if (idle) {
      usage_error("--recompute-policy: only meaningful with --recompute");
    }
    return;
  }
  std::vector<global_chunk> chunks;
  if (*src.recompute == "all") {
    chunks = all_chunks(g.sched);
  } else {
    for (double v : parse_numbers(*src.recompute, "--recompute", 1, 1u << 20, "all or G1,G2,...")) {
      if (v != std::floor(v) || v >= static_cast<double>(g.sched.layout().total_chunks())) {
        usage_error("--recompute: " + fmt::format("{}", v) +
                    " is not a global chunk of the schedule (0 .. " +
                    std::to_string(g.sched.layout().total_chunks() - 1) + ")");
      }
      chunks.push_back(static_cast<global_chunk>(v));
    }
  }
  recompute_options ro;
  ro.placement = idle ? recompute_placement::idle_slot : recompute_placement::before_backward;
  ro.costs = base.costs;
  ro.memory = base.memory;
  if (base.memory_limit) {
    ro.limits = {*base.memory_limit};
  }
  g.sched = with_recompute(g.sched, chunks, ro);
}

/// The schedule a command works on, with what its generator knows about it (the search's lower
/// bound, memory violations): generated or read, then lowered when --with-comm asks.
generation_result load_schedule(const schedule_source& src, const generator_params& base) {
  if (src.recv != "eager" && src.recv != "late") {
    usage_error("--recv: must be eager or late, not \"" + src.recv + "\"");
  }
  if (src.recv != "eager" && !src.with_comm) {
    usage_error("--recv: only meaningful with --with-comm");
  }
  generation_result g = load_schedule_compute(src, base);
  apply_recompute(src, base, g);
  if (!src.with_comm) {
    return g;
  }
  lowering_options lo;
  lo.receives = src.recv == "late" ? receive_placement::late : receive_placement::eager;
  lo.costs = base.costs;
  // The search's figures describe the compute-only order, not the lowered one.
  generation_result lowered;
  lowered.sched = lower_communication(g.sched, lo);
  lowered.memory_violations = std::move(g.memory_violations);
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

/// A schedule file's text as pipesched JSON or PyTorch CSV: --input-format when given, else
/// by content (detect_input_format), never by the file name.
schedule read_schedule_file(const schedule_source& src) {
  const bool from_stdin = src.input == "-";
  const std::string text = read_text_file(from_stdin ? "/dev/stdin" : src.input);
  std::optional<input_format> requested;
  if (src.input_format) {
    requested = parse_input_format(*src.input_format);
    if (!requested) {
      usage_error("--input-format: must be json or torch-csv, not \"" + *src.input_format + "\"");
    }
  }
  const input_format format = requested.value_or(detect_input_format(text));
  try {
    // A CSV carries no name: the file's, without directory and extension.
    return read_schedule(text, format,
                         from_stdin ? "stdin" : std::filesystem::path(src.input).stem().string());
  } catch (const pipesched::invalid_argument& e) {
    usage_error((from_stdin ? std::string("standard input") : src.input) + " (read as " +
                std::string(to_string(format)) + "): " + e.what());
  }
}

generation_result load_schedule_compute(const schedule_source& src, const generator_params& base) {
  generation_options gen_opts;
  gen_opts.search = search_options(src);
  const char* search_flag = src.search_budget ? "--search-budget" : "--search-evaluations";
  if (src.input_format && src.input.empty()) {
    usage_error("--input-format: only meaningful with --input");
  }
  if (!src.input.empty()) {
    if (gen_opts.search) {
      usage_error(std::string(search_flag) + ": only meaningful when a schedule that searches (" +
                  searching_schedules() + ") is generated, not with --input");
    }
    if (src.chunks) {
      usage_error("--chunks: not allowed with --input (the file gives v)");
    }
    generation_result g;
    g.sched = read_schedule_file(src);
    return g;
  }
  if (src.schedule_name.empty()) {
    usage_error("give --schedule NAME --stages P --microbatches M, or --input FILE");
  }
  if (!src.stages && !src.microbatches) {
    usage_error("--stages and --microbatches are required with --schedule");
  }
  if (!src.stages) {
    usage_error("--stages is required with --schedule");
  }
  if (!src.microbatches) {
    usage_error("--microbatches is required with --schedule");
  }
  const auto& entry = default_registry().at(src.schedule_name);
  if (gen_opts.search && !entry.searches) {
    usage_error(std::string(search_flag) + ": only meaningful for schedules that search (" +
                searching_schedules() + "), not \"" + entry.name + "\"");
  }
  generator_params params = base;
  params.stages = *src.stages;
  params.microbatches = *src.microbatches;
  params.chunks = src.chunks.value_or(0);
  return entry.generate_result(params, gen_opts);
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
  bool json = false;
  std::string format = "text";
  std::string output;
  torch_csv_cli csv;
};

int cmd_simulate(const simulate_options_cli& o) {
  const torch_csv_options csv = o.csv.options(o.format);
  check_format(o.format);
  if (o.json && o.format != "text" && o.format != "json") {
    usage_error("--json: conflicts with --format " + o.format + " (use one)");
  }
  const bool json = o.json || o.format == "json";
  const generator_params params = o.model.params();
  const generation_result g = load_schedule(o.src, params);
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

struct whatif_options_cli {
  schedule_source src;
  model_options model;
  double cv = 0.0;
  double link_cv = 0.0;
  std::vector<std::string> stragglers;  // K:FACTOR
  std::optional<std::string> stalls;    // PROBABILITY:DURATION
  std::uint32_t samples = 100;
  std::uint64_t seed = 1;
  bool sensitivity = false;
  bool dynamic = false;
  std::uint32_t replicas = 1;      // --replicas D: data-parallel pipelines
  double gradient_bytes = 0.0;     // per stage
  double bandwidth = 1.0;          // bytes per time unit
  double allreduce_latency = 0.0;  // per ring step
  bool json = false;
  std::string format = "text";  // text, json, svg
  std::string output;
};

/// Progress on stderr for commands that run longer than a second (whatif, analyze). A
/// background thread prints the current status with the elapsed time, first after 1 s, then
/// about 4 times a second on a terminal (one line rewritten in place, cleared at the end) or
/// once a second otherwise (a line each). Never on stdout, so --json and pictures on stdout
/// stay as they are.
class progress_line {
 public:
  explicit progress_line(std::string status) : status_(std::move(status)) {
    tty_ = ::isatty(STDERR_FILENO) == 1;
    thread_ = std::jthread([this](std::stop_token stop) { loop(stop); });
  }
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;
  ~progress_line() {
    thread_.request_stop();
    thread_.join();
    if (printed_ && tty_) {
      std::fputs("\r\033[K", stderr);  // the output that follows starts on a clean line
      std::fflush(stderr);
    }
  }
  void set(std::string status) {
    const std::lock_guard<std::mutex> lock(m_);
    status_ = std::move(status);
  }

 private:
  void loop(const std::stop_token& stop) {
    using namespace std::chrono;
    const auto start = steady_clock::now();
    std::unique_lock<std::mutex> lock(m_);
    auto wait = milliseconds(1000);
    while (!cv_.wait_for(lock, stop, wait, [&] { return stop.stop_requested(); })) {
      const double s = duration<double>(steady_clock::now() - start).count();
      std::fprintf(stderr, tty_ ? "\r\033[K%s, %.0f s" : "%s, %.0f s\n", status_.c_str(), s);
      std::fflush(stderr);
      printed_ = true;
      wait = milliseconds(tty_ ? 250 : 1000);
    }
  }
  std::mutex m_;
  std::condition_variable_any cv_;
  std::string status_;
  bool tty_ = false;
  bool printed_ = false;  // written by the thread, read after join
  std::jthread thread_;   // last: started when the members above exist
};

/// "whatif: 120/1000 samples (12 %)".
std::string sample_status(std::uint64_t done, std::uint64_t total) {
  return fmt::format("whatif: {}/{} samples ({} %)", done, total, done * 100 / total);
}

/// monte_carlo (or monte_carlo_dynamic: `run`) in batches of consecutive sample indices
/// (robustness_options::first_sample), so `progress` can count samples. The result is the one
/// call's, bit for bit: the same samples in the same order (kept), their mean summed in sample
/// order as monte_carlo does, the same stats_of. With --sensitivity the library runs once (it
/// measures the stages under the same samples) and the progress line only shows the time.
template <class Run>
robustness_result sampled(const robustness_options& ro, progress_line& progress, Run&& run) {
  if (ro.sensitivity) {
    progress.set(fmt::format("whatif: {} samples, and {} per stage for the sensitivity", ro.samples,
                             ro.samples));
    robustness_options all = ro;
    all.keep_samples = true;
    return run(all);
  }
  using clock = std::chrono::steady_clock;
  robustness_result r;
  std::vector<double> samples;
  samples.reserve(ro.samples);
  std::uint32_t batch = 1;
  while (samples.size() < ro.samples) {
    robustness_options part = ro;
    part.first_sample = ro.first_sample + samples.size();
    part.samples =
        std::min<std::uint32_t>(batch, ro.samples - static_cast<std::uint32_t>(samples.size()));
    part.keep_samples = true;
    const auto t0 = clock::now();
    robustness_result b = run(part);
    const double secs = std::chrono::duration<double>(clock::now() - t0).count();
    r.clean = b.clean;
    samples.insert(samples.end(), b.samples.begin(), b.samples.end());
    progress.set(sample_status(samples.size(), ro.samples));
    // Batches of about 0.1 s: the progress moves and the clean run each batch repeats stays
    // a small share of the work.
    const double per_sample = secs / part.samples;
    batch =
        static_cast<std::uint32_t>(std::clamp(per_sample > 0.0 ? 0.1 / per_sample : 1e9, 1.0, 1e9));
  }
  double sum = 0.0;
  for (double x : samples) {
    sum += x;
  }
  r.iteration = stats_of(samples);
  r.iteration.mean = sum / ro.samples;
  r.samples = std::move(samples);
  return r;
}

/// "A:B" as two numbers >= 0; errors name the option.
std::pair<double, double> parse_pair(const std::string& text, const std::string& option) {
  const std::size_t colon = text.find(':');
  const std::optional<double> a =
      colon == std::string::npos ? std::nullopt : parse_number(text.substr(0, colon));
  const std::optional<double> b =
      colon == std::string::npos ? std::nullopt : parse_number(text.substr(colon + 1));
  if (!a || !b) {
    usage_error(option + ": expected two numbers A:B, got \"" + text + "\"");
  }
  return {*a, *b};
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

// The iteration-time distribution of a schedule (or of the dynamic policy on its placement)
// under sampled noise: monte_carlo / monte_carlo_dynamic (docs/robustness.md). No noise option:
// every sample equals simulate's makespan.
int cmd_whatif(const whatif_options_cli& o) {
  if (o.format != "text" && o.format != "json" && o.format != "svg") {
    usage_error("--format: unknown format \"" + o.format + "\" (whatif knows: text, json, svg)");
  }
  if (o.json && o.format == "svg") {
    usage_error("--json: conflicts with --format svg (use one)");
  }
  const bool json = o.json || o.format == "json";
  const bool svg = o.format == "svg";
  const generator_params params = o.model.params();
  const schedule s = load_schedule(o.src, params).sched;
  perturbation noise;
  noise.set_cv(o.cv).set_link_cv(o.link_cv).set_seed(o.seed);
  std::vector<double> slow(s.stages(), 1.0);
  for (const std::string& k : o.stragglers) {
    const auto [stage, factor] = parse_pair(k, "--straggler");
    if (stage != std::floor(stage) || stage >= s.stages()) {
      usage_error("--straggler: stage (" + k + ") must be a stage index < p");
    }
    slow[static_cast<std::size_t>(stage)] = factor;
  }
  noise.set_stage_slowdown(slow);
  if (o.stalls) {
    const auto [prob, dur] = parse_pair(*o.stalls, "--stalls");
    noise.set_stalls({prob, dur});
  }
  if (o.replicas > 1) {
    if (o.dynamic || o.sensitivity) {
      usage_error("--replicas: not with --dynamic or --sensitivity");
    }
    data_parallel_model dp;
    dp.replicas = o.replicas;
    dp.gradient_bytes = {o.gradient_bytes};
    dp.bandwidth = o.bandwidth;
    dp.latency = o.allreduce_latency;
    // monte_carlo_data_parallel's loop, which keeps no samples: the picture needs them and the
    // progress line counts them. Same calls, same order, same aggregation.
    std::vector<double> t;
    double share = 0.0;
    {
      progress_line progress(sample_status(0, o.samples));
      for (std::uint32_t i = 0; i < o.samples; ++i) {
        const data_parallel_result r = simulate_data_parallel(s, params.costs, noise, dp, i);
        t.push_back(r.iteration);
        share += r.slowest_replica_share;
        progress.set(sample_status(i + 1u, o.samples));
      }
    }
    data_parallel_stats d;
    d.iteration = stats_of(t);
    d.slowest_replica_share = share / o.samples;
    if (svg) {
      write_distribution(o.output, fmt::format("{}, D={} replicas", s.name(), o.replicas),
                         std::move(t), o.seed);
      return 0;
    }
    if (json) {
      const nlohmann::json j{
          {"schedule", s.name()},         {"replicas", o.replicas},
          {"samples", d.iteration.count}, {"mean", d.iteration.mean},
          {"p50", d.iteration.p50},       {"p99", d.iteration.p99},
          {"max", d.iteration.max},       {"slowest_replica_share", d.slowest_replica_share}};
      write_output(o.output, j.dump(2) + "\n");
      return 0;
    }
    write_output(
        o.output,
        fmt::format("{}  p={} m={} v={}  D={} replicas  {} iterations, seed {}\n", s.name(),
                    s.stages(), s.microbatches(), s.chunks(), o.replicas, d.iteration.count,
                    o.seed) +
            fmt::format("iteration time (pipeline + ring all-reduce): mean {:.6g}  p50 {:.6g}  "
                        "p99 {:.6g}  max {:.6g}; lost to the slowest replica {:.2f}%\n",
                        d.iteration.mean, d.iteration.p50, d.iteration.p99, d.iteration.max,
                        100 * d.slowest_replica_share));
    return 0;
  }
  robustness_options ro;
  ro.samples = o.samples;
  ro.sensitivity = o.sensitivity;
  dynamic_policy_options dyn;
  dyn.memory = params.memory;
  dyn.memory_limit = params.memory_limit;
  robustness_result r;
  {
    progress_line progress(sample_status(0, o.samples));
    r = sampled(ro, progress, [&](const robustness_options& part) {
      return o.dynamic
                 ? monte_carlo_dynamic(s.layout(), s.microbatches(), params.costs, noise, dyn, part)
                 : monte_carlo(s, params.costs, noise, part);
    });
  }
  const std::string name = o.dynamic ? "dynamic policy on " + s.name() + "'s placement" : s.name();
  if (svg) {
    write_distribution(o.output, name, std::move(r.samples), o.seed);
    return 0;
  }
  if (json) {
    nlohmann::json j{{"schedule", name},         {"samples", r.iteration.count},
                     {"seed", o.seed},           {"clean", r.clean},
                     {"mean", r.iteration.mean}, {"stddev", r.iteration.stddev},
                     {"min", r.iteration.min},   {"p50", r.iteration.p50},
                     {"p99", r.iteration.p99},   {"max", r.iteration.max}};
    if (o.sensitivity) {
      j["sensitivity"] = r.sensitivity;
    }
    write_output(o.output, j.dump(2) + "\n");
    return 0;
  }
  std::string text =
      fmt::format("{}  p={} m={} v={}  {} samples, seed {}\n", name, s.stages(), s.microbatches(),
                  s.chunks(), r.iteration.count, o.seed) +
      fmt::format(
          "iteration time: clean {:.6g}  mean {:.6g}  sd {:.3g}  min {:.6g}  p50 {:.6g}  "
          "p99 {:.6g}  max {:.6g}\n",
          r.clean, r.iteration.mean, r.iteration.stddev, r.iteration.min, r.iteration.p50,
          r.iteration.p99, r.iteration.max);
  if (o.sensitivity) {
    text += "sensitivity (mean increase per 1% slowdown of stage k):";
    for (double x : r.sensitivity) {
      text += fmt::format(" {:.4g}", x);
    }
    text += "\n";
  }
  write_output(o.output, text);
  return 0;
}

struct analyze_options_cli {
  std::string trace;
  double absolute = 0.0;
  double relative = 0.03;
  double comm = 0.0;
  std::vector<std::string> replan_with = {"zb-auto", "zb-v"};
  std::optional<double> memory_limit;
  bool json = false;
};

// Telemetry in, straggler out, plan back: estimate_costs, find_stragglers,
// measured_cost_model and replan on a measured run (a pipesched Chrome trace or a timing CSV).
int cmd_analyze(const analyze_options_cli& o) {
  measured_run run;
  std::vector<stage_estimate> est;
  std::vector<straggler> slow;
  replan_result plan;
  {
    // No count to show here: the phases, with the elapsed time.
    progress_line progress("analyze: reading " + o.trace);
    const std::string text = read_text_file(o.trace == "-" ? "/dev/stdin" : o.trace);
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    try {
      run = first != std::string::npos && text[first] == '{' ? read_chrome_trace_run(text)
                                                             : read_timing_csv(text);
    } catch (const pipesched::invalid_argument& e) {
      usage_error(o.trace + ": " + e.what());
    }
    progress.set(fmt::format("analyze: estimating the costs of {} ops", run.ops.size()));
    est = estimate_costs(run);
    slow = find_stragglers(est, {o.absolute, o.relative});
    const cost_model measured = measured_cost_model(est, run.layout.chunks(), o.comm);
    replan_options ro;
    ro.generators = o.replan_with;
    ro.memory_limit = o.memory_limit;
    std::string names;
    for (const std::string& g : o.replan_with) {
      names += (names.empty() ? "" : ", ") + g;
    }
    progress.set("analyze: re-planning with " + names);
    plan = replan(order_of(run), measured, ro);
  }
  auto med = [](const std::optional<duration_estimate>& d) {
    return d ? nlohmann::json{{"median", d->median}, {"mad", d->mad}, {"count", d->count}}
             : nlohmann::json(nullptr);
  };
  if (o.json) {
    nlohmann::json j{{"schedule", run.name},
                     {"stages", nlohmann::json::array()},
                     {"stragglers", nlohmann::json::array()},
                     {"current", plan.current},
                     {"replans", nlohmann::json::array()}};
    for (const stage_estimate& e : est) {
      j["stages"].push_back({{"F", med(e.forward)},
                             {"B", med(e.backward_input)},
                             {"W", med(e.backward_weight)},
                             {"BW", med(e.backward_full)},
                             {"per_microbatch", e.per_microbatch}});
    }
    for (const straggler& x : slow) {
      j["stragglers"].push_back({{"stage", x.stage},
                                 {"per_microbatch", x.per_microbatch},
                                 {"peers", x.peers},
                                 {"excess", x.excess},
                                 {"relative", x.relative}});
    }
    for (const replan_candidate& c : plan.candidates) {
      j["replans"].push_back({{"generator", c.generator},
                              {"makespan", c.makespan},
                              {"gain", c.gain},
                              {"relative_gain", c.relative_gain}});
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{}  p={} m={} v={}  {} ops measured\n", run.name.empty() ? "run" : run.name,
             run.layout.stages(), run.microbatches, run.layout.chunks(), run.ops.size());
  fmt::print("stage  F median (MAD)  B median (MAD)  W median (MAD)  BW median (MAD)  per mb\n");
  auto cell = [](const std::optional<duration_estimate>& d) {
    return d ? fmt::format("{:.4g} ({:.2g})", d->median, d->mad) : std::string("-");
  };
  for (stage_index s = 0; s < est.size(); ++s) {
    fmt::print("{:>5}  {:>14}  {:>14}  {:>14}  {:>15}  {:.4g}\n", s, cell(est[s].forward),
               cell(est[s].backward_input), cell(est[s].backward_weight),
               cell(est[s].backward_full), est[s].per_microbatch);
  }
  if (slow.empty()) {
    fmt::print("stragglers: none (thresholds: {:g} absolute, {:g}% relative)\n", o.absolute,
               100 * o.relative);
  }
  for (const straggler& x : slow) {
    fmt::print("straggler: stage {}: {:.4g} per micro-batch, {:.4g} ({:.1f}%) above its peers\n",
               x.stage, x.per_microbatch, x.excess, 100 * x.relative);
  }
  fmt::print("re-plan with the measured costs (the run's order predicts {:.6g}):\n", plan.current);
  for (const replan_candidate& c : plan.candidates) {
    fmt::print("  {:<10} {:.6g}  gain {:.4g} ({:.1f}%)\n", c.generator, c.makespan, c.gain,
               100 * c.relative_gain);
  }
  return 0;
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
                "Output: text (listing + timeline timed with --cost), json, torch-csv, chrome "
                "(trace), svg")
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
  sc->add_option("--output,-o", sim.output, "Write the report, JSON or picture to FILE");
  add_torch_csv_options(sc, sim.csv);

  whatif_options_cli wi;
  auto* w = app.add_subcommand("whatif",
                               "Iteration-time distribution under sampled noise and stragglers");
  add_schedule_source(w, wi.src, true);
  add_model_options(w, wi.model);
  w->add_option("--cv", wi.cv, "Per-op log-normal noise, coefficient of variation")
      ->check(CLI::NonNegativeNumber);
  w->add_option("--link-cv", wi.link_cv, "Noise of every cross-stage latency (cv)")
      ->check(CLI::NonNegativeNumber);
  w->add_option("--straggler", wi.stragglers, "Stage K runs FACTOR times slower: K:FACTOR");
  w->add_option("--stalls", wi.stalls, "Each op stalls with probability P for D: P:D");
  w->add_option("--samples,-n", wi.samples, "Sampled iterations")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  w->add_option("--seed", wi.seed, "Noise seed")->capture_default_str();
  w->add_flag("--sensitivity", wi.sensitivity, "Also each stage's sensitivity to a 1% slowdown");
  w->add_flag("--dynamic", wi.dynamic,
              "The dynamic policy (B, else F within --memory-limit, else W) on the schedule's "
              "placement instead of its order");
  w->add_option("--replicas", wi.replicas,
                "D data-parallel pipelines, each its own sample, then a ring all-reduce per stage")
      ->check(CLI::PositiveNumber);
  w->add_option("--gradient-bytes", wi.gradient_bytes, "With --replicas: gradient bytes per stage")
      ->check(CLI::NonNegativeNumber);
  w->add_option("--bandwidth", wi.bandwidth, "With --replicas: ring link bytes per time unit")
      ->check(CLI::PositiveNumber);
  w->add_option("--allreduce-latency", wi.allreduce_latency,
                "With --replicas: latency per ring step")
      ->check(CLI::NonNegativeNumber);
  w->add_flag("--json", wi.json, "Print one JSON object");
  w->add_option("--format,-f", wi.format,
                "Output: text, json, svg (histogram and CDF of the sampled iteration times)")
      ->capture_default_str();
  w->add_option("--output,-o", wi.output, "Write the report, JSON or picture to FILE");

  analyze_options_cli an;
  auto* a = app.add_subcommand(
      "analyze", "Measured timings in: per-stage costs, stragglers, re-plan and its gain");
  a->add_option("trace", an.trace,
                "A pipesched Chrome trace, or a CSV stage,kind,mb,chunk,start,end (- for stdin)")
      ->required();
  a->add_option("--abs-threshold", an.absolute,
                "Straggler: this much slower per micro-batch than its peers (trace units)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  a->add_option("--rel-threshold", an.relative, "Straggler: and this fraction slower")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  a->add_option("--comm", an.comm, "Transfer latency for the re-plan (trace units)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  a->add_option("--replan", an.replan_with, "Generators to re-plan with")
      ->delimiter(',')
      ->capture_default_str();
  a->add_option("--memory-limit", an.memory_limit, "Per-stage limit for the re-plan (M_B units)");
  a->add_flag("--json", an.json, "Print one JSON object");

  pipesched::cli::plan_cli pl;
  pipesched::cli::add_plan_command(app, pl);

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
    if (app.got_subcommand("whatif")) {
      return cmd_whatif(wi);
    }
    if (app.got_subcommand("analyze")) {
      return cmd_analyze(an);
    }
    if (app.got_subcommand("plan")) {
      return pipesched::cli::run_plan_command(pl);
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
