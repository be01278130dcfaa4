// `pipesched pack`: the sequences of one global batch packed into micro-batches, and the
// packing and the order chosen by simulating them (docs/model.md §10.1). The command only
// parses and prints: pack_request holds the rules, pipesched::pack() decides, io/pack_io.hpp
// prints.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/io/json.hpp>
#include <pipesched/io/lengths.hpp>
#include <pipesched/io/pack_io.hpp>
#include <pipesched/io/plan_json.hpp>
#include <pipesched/io/schedule_export.hpp>
#include <pipesched/plan/pack.hpp>

#include "cli_support.hpp"

namespace pipesched::cli {

namespace {

/// The options of `pipesched pack`, as text: each number is read by parse_count / parse_bytes
/// (plan/pack.hpp) so that its error names the option.
struct pack_cli {
  std::string model;
  std::string gpu = "h100-sxm-80gb";
  std::string lengths;
  std::optional<std::string> tokens_per_microbatch, microbatches, stages, chunks, tp;
  std::string schedule = "1f1b";
  bool sequence_parallel = false;
  std::string recompute = "selective";
  std::optional<std::string> memory_limit;
  std::optional<std::string> search_evaluations, search_budget;
  report_output_cli out;
  std::optional<std::string> export_prefix;
};

// The library's field names as this command's options.
const std::vector<std::pair<std::string, std::string>> pack_options = {
    {"lengths", "--lengths"},
    {"lines", "--lengths"},
    {"tokens_per_microbatch", "--tokens-per-microbatch"},
    {"microbatches", "--microbatches"},
    {"stages", "--stages"},
    {"chunks", "--chunks"},
    {"tp", "--tp"},
    {"sequence_parallel", "--sequence-parallel"},
    {"memory_limit", "--memory-limit"},
    {"search_budget_ms", "--search-budget"},
};

int cmd_pack(const pack_cli& o) {
  const bool json = o.out.chosen("pack", {"text", "json"}) == "json";
  if (o.export_prefix) {
    export_prefix_or_exit(*o.export_prefix);  // before the search, which can take a while
  }
  pack_request req;
  std::tie(req.model, req.cluster) = load_model_and_gpu(o.model, o.gpu);
  try {
    sequence_lengths l = read_lengths(read_text_file(o.lengths), o.lengths);
    req.lengths = std::move(l.lengths);
    req.lines = std::move(l.lines);
  } catch (const pipesched::invalid_argument& e) {
    usage_error(std::string("--lengths: ") + e.what());
  }
  constexpr std::uint64_t u32_max = 0xffffffffu;
  if (o.tokens_per_microbatch) {
    req.tokens_per_microbatch = parse_count(*o.tokens_per_microbatch, "--tokens-per-microbatch",
                                            max_sequence_length * 4096);
  }
  if (o.microbatches) {
    req.microbatches =
        static_cast<std::uint32_t>(parse_count(*o.microbatches, "--microbatches", u32_max));
  }
  req.stages = static_cast<std::uint32_t>(parse_count(o.stages.value_or(""), "--stages", 4096));
  if (o.chunks) {
    req.chunks = static_cast<std::uint32_t>(parse_count(*o.chunks, "--chunks", 64));
  }
  if (o.tp) {
    req.tp = static_cast<std::uint32_t>(parse_count(*o.tp, "--tp", 1024));
  }
  req.schedule = o.schedule;
  req.sequence_parallel = o.sequence_parallel;
  req.recompute = recompute_kind_named(o.recompute, "--recompute:");
  if (o.memory_limit) {
    const std::optional<double> bytes = parse_bytes(*o.memory_limit);
    if (!bytes) {
      usage_error(
          "--memory-limit: must be a number of bytes > 0 with an optional unit (B, kB, "
          "MB, GB, TB, KiB, MiB, GiB, TiB), not \"" +
          *o.memory_limit + "\"");
    }
    req.memory_limit = *bytes;
  }
  if (o.search_evaluations) {
    req.search_evaluations = parse_count(*o.search_evaluations, "--search-evaluations", 1000000);
  }
  if (o.search_budget) {
    req.search_budget_ms = parse_real(*o.search_budget, "--search-budget");
  }
  pack_result r;
  try {
    r = pack(req);
  } catch (const field_error& e) {
    usage_error("pack: " +
                in_option_terms(e, {"tokens_per_microbatch", "microbatches"}, pack_options));
  }
  // Nothing fitting is an answer (exit 1 with the report), also with --export: it writes
  // nothing and says so.
  if (o.export_prefix && r.chosen.fits) {
    try {
      for (const std::string& file :
           write_export(schedule_export(*o.export_prefix, r.sched, r.costs, r.memory),
                        {{o.lengths, "--lengths"},
                         {o.model, "--model"},
                         {o.gpu, "--gpu"},
                         {is_stdout(o.out.output) ? std::string() : o.out.output, "--output"}})) {
        std::fprintf(stderr, "wrote %s\n", file.c_str());
      }
    } catch (const field_error& e) {
      usage_error("--export: " + e.rule());
    }
  }
  if (json) {
    write_output(o.out.output, pack_to_json(req, r).dump(2) + "\n");
  } else {
    write_output(o.out.output, pack_text(req, r));
  }
  if (!r.chosen.fits) {
    constexpr double gib = 1024.0 * 1024.0 * 1024.0;
    std::fprintf(stderr,
                 "error: no packing and order fits the memory limit: the smallest peak found is "
                 "%.4g GiB per GPU, the limit %.4g GiB\n",
                 r.chosen.max_peak() / gib, r.memory_limit_bytes / gib);
    if (o.export_prefix) {
      std::fprintf(stderr, "--export: nothing written: no packing fits\n");
    }
    return 1;
  }
  return 0;
}

void declare_pack(CLI::App* c, pack_cli& o) {
  c->add_option("--model", o.model, model_preset_names() + ", or a model JSON file")->required();
  c->add_option("--gpu", o.gpu, cluster_preset_names() + ", or a cluster JSON file")
      ->capture_default_str();
  c->add_option("--lengths", o.lengths,
                "File of sequence lengths, one whole number of tokens per line (blank "
                "lines and lines starting with # are skipped)")
      ->required();
  auto* t = c->add_option("--tokens-per-microbatch", o.tokens_per_microbatch,
                          "Token budget per micro-batch");
  auto* m = c->add_option("--microbatches,-m", o.microbatches, "Micro-batches m");
  t->excludes(m);
  c->add_option("--stages,-p", o.stages, "Pipeline stages p")->required();
  c->add_option("--schedule,-s", o.schedule, "A schedule of `pipesched list`")
      ->capture_default_str();
  c->add_option("--chunks,-v", o.chunks, "Model chunks per stage (default: the schedule's)");
  c->add_option("--tp", o.tp, "Tensor parallelism (default 1)");
  c->add_flag("--sequence-parallel", o.sequence_parallel, "Sequence parallelism (with --tp > 1)");
  c->add_option("--recompute", o.recompute,
                "none, selective (the attention core, as flash attention) or full")
      ->capture_default_str();
  c->add_option("--memory-limit", o.memory_limit,
                "Bytes per GPU, e.g. 72GiB (default: the GPU's usable memory)");
  c->add_option("--search-evaluations", o.search_evaluations,
                "Packings and orders the local search simulates (default: sized from the "
                "problem; 0: heuristics only)");
  c->add_option("--search-budget", o.search_budget,
                "Wall-clock cap on the local search in ms (0: none)");
  o.out.add(c, "Print the packing JSON (docs/formats.md)", "text or json",
            "Write the report or JSON to FILE");
  c->add_option("--export", o.export_prefix,
                "Write the chosen schedule as PREFIX.csv, PREFIX.compute.csv, "
                "PREFIX.schedule.json, PREFIX.costs.json and PREFIX.memory.json");
}

const registration pack_cmd = command<pack_cli>(
    "pack",
    75,
    "Sequence lengths in: the packing into micro-batches and their order that simulate "
    "fastest within memory",
    declare_pack,
    cmd_pack);

}  // namespace

}  // namespace pipesched::cli
