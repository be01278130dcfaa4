#pragma once

// What every `pipesched` subcommand shares: option parsing in the user's terms, the schedule
// options (a generator or a file, recompute, lowering: one schedule_request), the cost and
// memory options, output files, the progress line, and the subcommand registry.
//
// Adding a subcommand: write examples/cli/cmd_NAME.cpp (CMake picks up every cmd_*.cpp) with
//   namespace {
//   int run_my_command(const my_options& o) { ... }     // exit code; throw for exit 2
//   void declare_my_command(CLI::App* c, my_options& o) {
//     pipesched::cli::add_schedule_source(c, o.src, true);  // if it takes a schedule
//     ...                                                 // its own options
//   }
//   const pipesched::cli::registration reg = pipesched::cli::command<my_options>(
//       "NAME", ORDER, "What it does", declare_my_command, run_my_command);
//   }
// ORDER places it in `pipesched --help` (list 10, generate 20, validate 30, simulate 40, whatif
// 50, analyze 60). Nothing else changes: main.cpp parses and dispatches every registered one.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/gen/registry.hpp>
#include <pipesched/ir/schedule.hpp>
#include <pipesched/model/cost_model.hpp>
#include <pipesched/model/memory_model.hpp>
#include <pipesched/plan/job.hpp>

namespace pipesched {
// Declared here, defined by the headers of the commands that use them (and cli_support.cpp), so
// that every command does not compile what-if, the torch CSV writer and the schedule report.
struct schedule_report;
struct torch_csv_options;
struct whatif_request;
}  // namespace pipesched

namespace pipesched::cli {

// ---- the subcommand registry -----------------------------------------------------------------

/// One subcommand: `add` declares it and its options on the app and returns its action, run
/// when the command line names it (its exit code; what it throws is exit 2).
struct subcommand {
  std::string name;
  int order = 0;  ///< place in --help
  std::function<std::function<int()>(CLI::App&)> add;
};

/// Every registered subcommand (in registration order; main sorts by `order`).
std::vector<subcommand>& subcommands();

/// A namespace-scope `const registration r{...};` in a cmd_*.cpp registers its subcommand.
struct registration {
  explicit registration(subcommand c);
};

/// The registration of a subcommand with options: an `Options`, made when the command line is
/// parsed and kept as long as the action; `declare` adds them to the subcommand `name`, `run`
/// is the action.
template <class Options>
registration command(const std::string& name,
                     int order,
                     const std::string& description,
                     void (*declare)(CLI::App*, Options&),
                     int (*run)(const Options&)) {
  return registration{{name, order, [=](CLI::App& app) -> std::function<int()> {
                         auto o = std::make_shared<Options>();
                         declare(app.add_subcommand(name, description), *o);
                         return [o, run] { return run(*o); };
                       }}};
}

// ---- errors and numbers ----------------------------------------------------------------------

/// Unusable input: exit 2 with `error: <msg>`.
[[noreturn]] void usage_error(const std::string& msg);

/// One number of an option's value: the whole text must be a finite decimal number >= 0.
/// Subnormal numbers (5e-324) are numbers; values beyond the range of a double are errors.
std::optional<double> parse_number(const std::string& text);

/// Splits "a,b,c" into finite numbers; errors name the option and the expected shape.
std::vector<double> parse_numbers(const std::string& text,
                                  const std::string& option,
                                  std::size_t min_count,
                                  std::size_t max_count,
                                  const std::string& shape);

/// A whole number >= `min` of at most `max`: errors name the option, the value and the rule
/// (the range the option takes, so "-1" and "0" are refused in the same words).
std::uint64_t parse_count(const std::string& text,
                          const std::string& option,
                          std::uint64_t max,
                          std::uint64_t min = 0);

/// Any finite decimal number (negative too: the library says which range a field takes, in
/// the option's name); infinities, NaN, numbers beyond a double and other text are errors.
double parse_real(const std::string& text, const std::string& option);

/// The option a library field_error's field comes from in this command: `names` maps field
/// names to options; a field not listed is shown as --field with _ as -.
std::string option_for(const std::string& field,
                       const std::vector<std::pair<std::string, std::string>>& names);

/// A library field_error as the CLI says it: "--option: rule", with the other fields the rule
/// names (those in `fields`) spelled as their options too ("only meaningful with replicas" ->
/// "only meaningful with --replicas").
std::string in_option_terms(const field_error& e,
                            const std::vector<std::string>& fields,
                            const std::vector<std::pair<std::string, std::string>>& names);

// ---- the schedule a command works on ---------------------------------------------------------

/// Where a command's schedule comes from: a generator by name, or a file; then recompute and
/// lowering. Turned into one schedule_request (tools/request.hpp). Its functions are defined in
/// cli_source.cpp.
struct schedule_source {
  bool with_comm = false;
  std::string recv = "eager";
  std::string schedule_name;
  std::optional<std::uint32_t> stages;
  std::optional<std::uint32_t> microbatches;
  std::optional<std::uint32_t> chunks;      // --chunks; unset: the schedule's default
  std::optional<std::uint32_t> group_size;  // --group-size (interleaved-1f1b); unset: p
  std::string input;
  std::optional<std::string> input_format;        // --input-format json|torch-csv
  std::optional<std::string> search_budget;       // --search-budget MS
  std::optional<std::string> search_evaluations;  // --search-evaluations N
  std::optional<std::string> recompute;           // --recompute all|CHUNKS
  std::string recompute_policy = "before-backward";
};

void add_schedule_source(CLI::App* cmd, schedule_source& src, bool allow_input);

/// Options shared by the commands that need costs and memory.
struct model_options {
  std::string cost = "1,1,1,0";
  std::string memory = "1,0.5";
  std::optional<std::string> memory_limit_text;
  std::string costs_file;
  std::string memory_file;

  cost_model costs() const;
  memory_model memory_sizes() const;
  /// --memory-limit, per stage in the units of --memory; nullopt when not given.
  memory_limits memory_limit() const;
  generator_params params() const;
};

void add_model_options(CLI::App* cmd, model_options& o);

/// The schedule a command works on, with what its generator knows about it (the search's lower
/// bound, memory violations): build_schedule of the request the options describe. The
/// library's field errors come back naming the option (--chunks, --recompute, ...).
generation_result load_schedule(const schedule_source& src, const generator_params& base);

/// --replicas, --gradient-bytes, --allreduce-latency and the links (--link-bandwidth,
/// --message-bytes, --traffic, --buckets) of whatif and simulate: read as text, checked by
/// whatif_request's rules (tools/whatif.hpp).
struct links_cli {
  std::optional<std::string> replicas, gradient_bytes, allreduce_latency;
  std::optional<std::string> link_bandwidth, message_bytes, traffic, buckets;

  void add(CLI::App* cmd);
  /// Parses the given options into `req`'s fields; bad text is exit 2 naming the option.
  void fill(whatif_request& req) const;
};

/// A whatif_request's field_error in option terms (in_option_terms with whatif's options).
[[noreturn]] void whatif_usage_error(const field_error& e);

// ---- output ----------------------------------------------------------------------------------

bool stdout_is_terminal();
bool is_stdout(const std::string& path);

/// The command line's words, kept so that no output overwrites a file the command reads.
void remember_arguments(int argc, const char* const* argv);
/// Writes a command's output to `path` (empty or -: stdout) through `write(std::ostream&)`, so
/// large outputs stream instead of being built as one string first. Exit 2, before writing,
/// when `path` is a file another word of the command line also names: an input (--model, -i,
/// --costs, --lengths, ...) the output would replace.
void write_output_with(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_output(const std::string& path, const std::string& text);

/// --json, --format,-f and --output,-o of plan, pack and whatif: one report, which --json and
/// -f json both ask for as JSON.
struct report_output_cli {
  bool json = false;
  std::string format = "text";
  bool format_given = false;  // -f text and --json together contradict each other
  std::string output;

  void add(CLI::App* cmd,
           const std::string& json_help,
           const std::string& format_help,
           const std::string& output_help);
  /// The format to write: one `command` knows (`known`, in the words of its error), "json" for
  /// --json. Exit 2 for another, or for --json with a --format other than json.
  std::string chosen(const std::string& command, const std::vector<std::string>& known) const;
};

/// --export PREFIX of plan and pack: exit 2 naming the option when the prefix names no file
/// (check_export_prefix, io/schedule_export.hpp).
void export_prefix_or_exit(const std::string& prefix);

/// --model and --gpu of plan and pack: a preset name or a JSON file each; errors name the option.
std::pair<transformer_spec, cluster_spec> load_model_and_gpu(const std::string& model,
                                                             const std::string& gpu);

/// --csv-layout / --csv-spelling: how --format torch-csv writes (docs/formats.md).
struct torch_csv_cli {
  std::optional<std::string> layout;    // steps | list; unset: list with SEND/RECV ops, else steps
  std::optional<std::string> spelling;  // current | legacy; unset: current

  /// The writer options; throws (exit 2) on a bad value or when `format` is not torch-csv.
  torch_csv_options options(const std::string& format) const;
};

void add_torch_csv_options(CLI::App* cmd, torch_csv_cli& o);

/// The output formats of generate and simulate; throws (exit 2) for another.
void check_format(const std::string& format);

/// Writes a schedule with its report as torch-csv, chrome or svg to `path`.
void write_picture(const std::string& path,
                   const std::string& format,
                   const schedule& s,
                   const schedule_report& rep,
                   const torch_csv_options& csv);

/// Rule violations, one per line: on stdout, or on stderr when stdout already carries the
/// command's output (a picture or JSON written to -), so that output stays well-formed.
void print_violations(const std::vector<std::string>& lines, bool stdout_has_output);

/// Progress on stderr for commands that run longer than a second (whatif, analyze). A
/// background thread prints the current status with the elapsed time, first after 1 s, then
/// about 4 times a second on a terminal (one line rewritten in place, cleared at the end) or
/// once a second otherwise (a line each). Never on stdout, so --json and pictures on stdout
/// stay as they are.
class progress_line {
 public:
  explicit progress_line(std::string status);
  progress_line(const progress_line&) = delete;
  progress_line& operator=(const progress_line&) = delete;
  ~progress_line();
  /// A phase's words.
  void set(std::string status);
  /// A count: "<what>: done/total samples (P %)"; cheap (no lock, no formatting), so a
  /// progress_observer may call it after every sample.
  void set_count(std::uint64_t done, std::uint64_t total) noexcept;

 private:
  struct state;  // the thread and what it shares with the caller (cli_support.cpp)
  std::unique_ptr<state> state_;
};

}  // namespace pipesched::cli
