// The schedule a subcommand works on (cli_support.hpp's schedule_source): its options, and
// their respelling into the library's request (tools/request.hpp), which holds the rules.

#include <cmath>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <fmt/core.h>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/io/schedule_input.hpp>
#include <pipesched/tools/request.hpp>

#include "cli_support.hpp"

namespace pipesched::cli {

void add_schedule_source(CLI::App* cmd, schedule_source& src, bool allow_input) {
  auto* name =
      cmd->add_option("--schedule,-s", src.schedule_name, "Schedule name (see `pipesched list`)");
  auto* p = cmd->add_option("--stages,-p", src.stages, "Pipeline stages p (>= 1)");
  auto* m = cmd->add_option("--microbatches,-m", src.microbatches, "Micro-batches m (>= 1)");
  cmd->add_option("--chunks,-v", src.chunks, "Model chunks per stage v (default: the schedule's)");
  auto* n = cmd->add_option("--group-size", src.group_size,
                            "interleaved-1f1b: micro-batches per round of the virtual stages N, "
                            "p <= N <= m (Megatron's --microbatch-group-size-per-virtual-"
                            "pipeline-stage; default p)");
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
    in->excludes(n);
    cmd->add_option("--input-format", src.input_format,
                    "With --input: json or torch-csv instead of recognising the content");
  }
}

namespace {

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

}  // namespace

generation_result load_schedule(const schedule_source& src, const generator_params& base) {
  request_options opts;
  opts.search = search_options(src);
  opts.recompute_policy = src.recompute_policy;
  opts.with_comm = src.with_comm;
  opts.recv = src.recv;
  if (src.recompute) {
    opts.recompute_all = *src.recompute == "all";
    if (!opts.recompute_all) {
      for (double v :
           parse_numbers(*src.recompute, "--recompute", 1, 1u << 20, "all or G1,G2,...")) {
        if (v != std::floor(v) || v > std::numeric_limits<global_chunk>::max()) {
          usage_error("--recompute: " + fmt::format("{}", v) +
                      " is not a global chunk of the schedule (a whole number)");
        }
        opts.recompute_chunks.push_back(static_cast<global_chunk>(v));
      }
    }
  }
  if (src.input_format && src.input.empty()) {
    usage_error("--input-format: only meaningful with --input");
  }
  generator_params params = base;
  params.chunks = src.chunks.value_or(0);
  if (src.group_size) {
    if (src.schedule_name != "interleaved-1f1b") {
      usage_error("--group-size: only interleaved-1f1b takes a group size, not \"" +
                  src.schedule_name + "\"");
    }
    params.group_size = *src.group_size;
    if (params.group_size == 0) {
      usage_error("--group-size: must be at least 1");
    }
  }
  std::variant<generated_source, given_source> source;
  if (src.input.empty()) {
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
    params.stages = *src.stages;
    params.microbatches = *src.microbatches;
    source = generated_source{src.schedule_name};
  } else {
    source = given_source{read_schedule_file(src)};
  }
  try {
    const schedule_request req =
        make_request(std::move(source), std::move(params), opts, default_registry());
    return build_schedule(req, default_registry());
  } catch (const field_error& e) {
    const std::vector<std::pair<std::string, std::string>> names = {
        {"search", src.search_budget ? "--search-budget" : "--search-evaluations"},
        {"recompute.chunks", "--recompute"},
        {"generator", "--schedule"}};
    // Respelled in a rule: the options it names, not "search" ("schedules that search").
    usage_error(in_option_terms(e, {"with_comm", "recompute"}, names));
  }
}

}  // namespace pipesched::cli
