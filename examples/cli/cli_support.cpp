// The shared part of the `pipesched` CLI (cli_support.hpp).

#include "cli_support.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <mutex>
#include <stop_token>
#include <thread>
#include <unistd.h>

#include <fmt/core.h>

#include <pipesched/analysis/schedule_report.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/job_spec_json.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/memory_model_json.hpp>
#include <pipesched/io/schedule_export.hpp>
#include <pipesched/io/svg.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/tools/request.hpp>
#include <pipesched/tools/whatif.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

namespace pipesched::cli {

std::vector<subcommand>& subcommands() {
  static std::vector<subcommand> all;
  return all;
}

registration::registration(subcommand c) {
  subcommands().push_back(std::move(c));
}

void usage_error(const std::string& msg) {
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

std::uint64_t parse_count(const std::string& text,
                          const std::string& option,
                          std::uint64_t max,
                          std::uint64_t min) {
  const std::string rule = option + ": must be a whole number >= " + std::to_string(min);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    usage_error(rule + ", got \"" + text + "\"");
  }
  unsigned long long n = 0;
  try {
    n = std::stoull(text);
  } catch (const std::out_of_range&) {
    n = std::numeric_limits<unsigned long long>::max();
  }
  if (n < min) {
    usage_error(rule + ", got " + text);
  }
  if (n > max) {
    usage_error(option + ": must be at most " + std::to_string(max) + ", got " + text);
  }
  return n;
}

double parse_real(const std::string& text, const std::string& option) {
  char* end = nullptr;
  errno = 0;
  const double v = text.empty() || std::isspace(static_cast<unsigned char>(text.front())) != 0
                       ? std::nan("")
                       : std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || text.empty()) {
    usage_error(option + ": expected a number, got \"" + text + "\"");
  }
  if (!std::isfinite(v) || (errno == ERANGE && std::fabs(v) >= 1.0)) {
    usage_error(option + ": must be a finite number, got \"" + text + "\"");
  }
  return v;
}

std::string option_for(const std::string& field,
                       const std::vector<std::pair<std::string, std::string>>& names) {
  for (const auto& [f, option] : names) {
    if (f == field) {
      return option;
    }
  }
  std::string option = "--" + field;
  std::replace(option.begin(), option.end(), '_', '-');
  return option;
}

cost_model model_options::costs() const {
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
memory_model model_options::memory_sizes() const {
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
memory_limits model_options::memory_limit() const {
  if (!memory_limit_text) {
    return {};
  }
  // One number for every stage, or one per stage separated by commas (the library checks the
  // count against the schedule's p).
  std::vector<double> out;
  const std::string& text = *memory_limit_text;
  for (std::size_t pos = 0;;) {
    const std::size_t comma = text.find(',', pos);
    const std::optional<double> v =
        parse_number(text.substr(pos, comma == std::string::npos ? comma : comma - pos));
    if (!v || *v <= 0.0) {
      usage_error(
          "--memory-limit: must be a finite number > 0, or one per stage separated by "
          "commas, got \"" +
          text + "\"");
    }
    out.push_back(*v);
    if (comma == std::string::npos) {
      break;
    }
    pos = comma + 1;
  }
  return out;
}
generator_params model_options::params() const {
  generator_params p;
  p.costs = costs();
  p.memory = memory_sizes();
  p.memory_limit = memory_limit();
  return p;
}

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
                  "schedule): one for every stage, or L0,L1,... one per stage");
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

torch_csv_options torch_csv_cli::options(const std::string& format) const {
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

namespace {
std::vector<std::string>& command_words() {
  static std::vector<std::string> words;
  return words;
}
}  // namespace

void remember_arguments(int argc, const char* const* argv) {
  command_words().assign(argv + 1, argv + argc);
}

void write_output_with(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (!is_stdout(path) && std::filesystem::exists(path)) {
    // The output names itself once (-o PATH); any other word naming the same file is an input.
    int named = 0;
    for (const std::string& w : command_words()) {
      const std::size_t eq = w.find('=');
      const std::string value =
          w.starts_with("-") && eq != std::string::npos ? w.substr(eq + 1) : w;
      if (!value.empty() && std::filesystem::exists(value) && detail::same_file(value, path)) {
        ++named;
      }
    }
    if (named >= 2) {
      usage_error("--output " + path +
                  ": is also an input of this command: the output would replace it (choose another "
                  "output file)");
    }
  }
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

void report_output_cli::add(CLI::App* cmd,
                            const std::string& json_help,
                            const std::string& format_help,
                            const std::string& output_help) {
  cmd->add_flag("--json", json, json_help);
  cmd->add_option("--format,-f", format, format_help)
      ->capture_default_str()
      ->each([this](const std::string&) { format_given = true; });
  cmd->add_option("--output,-o", output, output_help);
}

std::string report_output_cli::chosen(const std::string& command,
                                      const std::vector<std::string>& known) const {
  if (std::find(known.begin(), known.end(), format) == known.end()) {
    std::string names;
    for (const std::string& k : known) {
      names += (names.empty() ? "" : ", ") + k;
    }
    usage_error("--format: unknown format \"" + format + "\" (" + command + " knows: " + names +
                ")");
  }
  if (json && format_given && format != "json") {
    usage_error("--json: conflicts with --format " + format + " (use one)");
  }
  return json ? "json" : format;
}

void export_prefix_or_exit(const std::string& prefix) {
  try {
    check_export_prefix(prefix);
  } catch (const field_error& e) {
    usage_error("--export: " + e.rule());
  }
}

std::pair<transformer_spec, cluster_spec> load_model_and_gpu(const std::string& model,
                                                             const std::string& gpu) {
  std::pair<transformer_spec, cluster_spec> out;
  try {
    out.first = load_transformer_spec(model);
  } catch (const pipesched::invalid_argument& e) {
    usage_error(std::string("--model: ") + e.what());
  }
  try {
    out.second = load_cluster_spec(gpu);
  } catch (const pipesched::invalid_argument& e) {
    usage_error(std::string("--gpu: ") + e.what());
  }
  return out;
}

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

void print_violations(const std::vector<std::string>& lines, bool stdout_has_output) {
  for (const auto& l : lines) {
    std::fprintf(stdout_has_output ? stderr : stdout, "%s\n", l.c_str());
  }
}

std::string in_option_terms(const field_error& e,
                            const std::vector<std::string>& fields,
                            const std::vector<std::pair<std::string, std::string>>& names) {
  const std::string& rule = e.rule();
  std::string out;
  std::size_t i = 0;
  auto word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  };
  while (i < rule.size()) {
    if (!word_char(rule[i])) {
      out += rule[i++];
      continue;
    }
    std::size_t j = i;
    while (j < rule.size() && word_char(rule[j])) {
      ++j;
    }
    const std::string word = rule.substr(i, j - i);
    const bool field = std::find(fields.begin(), fields.end(), word) != fields.end();
    out += field ? option_for(word, names) : word;
    i = j;
  }
  return option_for(e.field(), names) + ": " + out;
}

void links_cli::add(CLI::App* cmd) {
  cmd->add_option("--replicas", replicas,
                  "D >= 2 data-parallel pipelines, each its own sample, then a ring all-reduce per "
                  "stage (needs --gradient-bytes)");
  cmd->add_option("--gradient-bytes", gradient_bytes,
                  "With --replicas: gradient bytes per stage (>= 0)");
  cmd->add_option("--allreduce-latency", allreduce_latency,
                  "With --replicas: latency per ring step, in --cost time units (default 0)");
  cmd->add_option("--link-bandwidth", link_bandwidth,
                  "Links with bandwidth: each stage's link sends B bytes per --cost time unit "
                  "(one value, or B0,B1,... per stage; inf: no serialization); with --replicas "
                  "the all-reduce shares the links (docs/robustness.md section 8)");
  cmd->add_option("--message-bytes", message_bytes,
                  "With --link-bandwidth: bytes of an activation and of an input-gradient "
                  "message A[,G] (one value: both)");
  cmd->add_option("--traffic", traffic,
                  "With --link-bandwidth: fifo (one queue) or priority (pipeline sends before "
                  "all-reduce traffic); default fifo");
  cmd->add_option("--buckets", buckets,
                  "With --link-bandwidth and --replicas: gradient buckets per chunk (default 1)");
}

void links_cli::fill(whatif_request& req) const {
  constexpr auto max32 = std::numeric_limits<std::uint32_t>::max();
  if (replicas) {
    req.replicas = static_cast<std::uint32_t>(parse_count(*replicas, "--replicas", max32));
  }
  if (gradient_bytes) {
    req.gradient_bytes = parse_real(*gradient_bytes, "--gradient-bytes");
  }
  if (allreduce_latency) {
    req.allreduce_latency = parse_real(*allreduce_latency, "--allreduce-latency");
  }
  if (link_bandwidth) {
    // "inf" is a bandwidth (no serialization), so not parse_real's finite numbers.
    std::vector<double> b;
    std::size_t pos = 0;
    while (true) {
      const std::size_t comma = link_bandwidth->find(',', pos);
      const std::string piece =
          link_bandwidth->substr(pos, comma == std::string::npos ? comma : comma - pos);
      b.push_back(piece == "inf" ? std::numeric_limits<double>::infinity()
                                 : parse_real(piece, "--link-bandwidth"));
      if (comma == std::string::npos) {
        break;
      }
      pos = comma + 1;
    }
    req.link_bandwidth = std::move(b);
  }
  if (message_bytes) {
    req.message_bytes =
        parse_numbers(*message_bytes, "--message-bytes", 1, 2, "ACTIVATION[,GRADIENT] bytes");
  }
  req.traffic = traffic;
  if (buckets) {
    req.buckets = static_cast<std::uint32_t>(parse_count(*buckets, "--buckets", max32));
  }
}

void whatif_usage_error(const field_error& e) {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"stragglers", "--straggler"},
      {"straggler", "--straggler"},
      {"stage_slowdown", "--straggler"},
      {"stalls.probability", "--stalls (P)"},
      {"stalls.duration", "--stalls (D)"},
      {"latency", "--allreduce-latency"},
      {"allreduce_latency", "--allreduce-latency"},
      {"memory", "--memory / --memory-file"}};
  usage_error(in_option_terms(
      e,
      {"replicas", "gradient_bytes", "bandwidth", "allreduce_latency", "link_bandwidth",
       "message_bytes", "traffic", "buckets", "dynamic", "sensitivity", "memory_limit", "seed"},
      names));
}

// What the progress thread shares with the caller. The thread is the last member: it starts
// when the others exist and is joined before they go.
struct progress_line::state {
  std::mutex m;
  std::condition_variable_any cv;
  std::string status;
  std::atomic<std::uint64_t> done{0};
  std::atomic<std::uint64_t> total{0};  // 0: show status
  bool tty = false;
  bool printed = false;  // written by the thread, read after join
  std::jthread thread;

  // Called with m held.
  std::string text() const {
    const std::uint64_t t = total.load(std::memory_order_relaxed);
    if (t == 0) {
      return status;
    }
    const std::uint64_t d = std::min(done.load(std::memory_order_relaxed), t);
    return fmt::format("{}: {}/{} samples ({} %)", status, d, t, d * 100 / t);
  }

  void loop(const std::stop_token& stop) {
    using namespace std::chrono;
    const auto start = steady_clock::now();
    std::unique_lock<std::mutex> lock(m);
    auto wait = milliseconds(1000);
    while (!cv.wait_for(lock, stop, wait, [&] { return stop.stop_requested(); })) {
      const double s = duration<double>(steady_clock::now() - start).count();
      std::fprintf(stderr, tty ? "\r\033[K%s, %.0f s" : "%s, %.0f s\n", text().c_str(), s);
      std::fflush(stderr);
      printed = true;
      wait = milliseconds(tty ? 250 : 1000);
    }
  }
};

progress_line::progress_line(std::string status) : state_(std::make_unique<state>()) {
  state_->status = std::move(status);
  state_->tty = ::isatty(STDERR_FILENO) == 1;
  state* st = state_.get();
  state_->thread = std::jthread([st](const std::stop_token& stop) { st->loop(stop); });
}

progress_line::~progress_line() {
  state_->thread.request_stop();
  state_->thread.join();
  if (state_->printed && state_->tty) {
    std::fputs("\r\033[K", stderr);  // the output that follows starts on a clean line
    std::fflush(stderr);
  }
}

void progress_line::set(std::string status) {
  const std::lock_guard<std::mutex> lock(state_->m);
  state_->status = std::move(status);
  state_->total.store(0, std::memory_order_relaxed);
}

void progress_line::set_count(std::uint64_t done, std::uint64_t total) noexcept {
  state_->done.store(done, std::memory_order_relaxed);
  state_->total.store(total, std::memory_order_relaxed);
}

}  // namespace pipesched::cli
