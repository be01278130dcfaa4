#pragma once

// `pipesched plan`: from a model, a cluster and a batch to the fastest plan that fits in GPU
// memory (docs/model.md §10). The command only parses and prints; pipesched::plan() decides.

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace pipesched::cli {

/// The options of `pipesched plan`, as parsed.
struct plan_cli {
  std::string model;
  std::string gpu;
  std::optional<std::uint64_t> gpus;
  std::optional<std::uint32_t> tp, pp, chunks, micro_batch, microbatches;
  std::optional<std::uint64_t> dp;
  std::optional<std::string> schedule;
  std::optional<std::uint64_t> sequence;
  std::optional<std::uint64_t> global_batch, global_batch_tokens;
  bool sequence_parallel = false;
  bool no_sequence_parallel = false;
  std::optional<std::string> recompute;
  std::string optimizer_sharding = "optimizer";
  std::string partition = "balanced";
  std::size_t top = 5;
  bool json = false;
  std::string format = "text";
  std::string output;
  std::optional<std::string> baseline;
  std::optional<std::string> export_prefix;
  std::optional<std::uint32_t> vocab_multiple;
  std::optional<std::string> achieved_fraction;
  std::optional<std::string> usable_fraction;
  std::optional<std::size_t> search_evaluations;
  std::optional<unsigned> threads;
};

/// Registers the `plan` subcommand on `app`, parsing into `o`.
CLI::App* add_plan_command(CLI::App& app, plan_cli& o);

/// Runs it: 0 a plan that fits, 1 nothing fits (or the one layout asked for does not), 2 bad
/// input (throws pipesched::invalid_argument, which main prints).
int run_plan_command(const plan_cli& o);

}  // namespace pipesched::cli
