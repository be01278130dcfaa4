#include "cmd_plan.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/io/json.hpp>
#include <pipesched/io/memory_model_json.hpp>
#include <pipesched/io/plan_json.hpp>
#include <pipesched/io/plan_svg.hpp>
#include <pipesched/io/plan_text.hpp>
#include <pipesched/io/torch_csv.hpp>
#include <pipesched/plan/plan_request.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

namespace pipesched::cli {

namespace {

[[noreturn]] void bad(const std::string& msg) {
  throw pipesched::invalid_argument(msg);
}

/// A number in (0, 1] (the library checks the range), the whole text a finite number.
double parse_fraction(const std::string& text, const char* option) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v)) {
    bad(std::string(option) + ": must be a number in (0, 1], got \"" + text + "\"");
  }
  return v;
}

recompute_kind parse_recompute(const std::string& s, const char* option) {
  const auto k = parse_recompute_kind(s);
  if (!k) {
    bad(std::string(option) + ": must be none, selective or full, not \"" + s + "\"");
  }
  return *k;
}

optimizer_sharding parse_sharding(const std::string& s) {
  const auto k = parse_optimizer_sharding(s);
  if (!k) {
    bad("--optimizer-sharding: must be none, optimizer, gradients or weights, not \"" + s + "\"");
  }
  return *k;
}

partition_spec parse_partition_option(const std::string& s) {
  const auto p = parse_partition(s);
  if (!p) {
    bad("--partition: must be even, balanced or layers per chunk L1,L2,..., not \"" + s + "\"");
  }
  return *p;
}

/// --baseline "tp=8,pp=16,dp=128,schedule=interleaved-1f1b[,v=..,micro-batch=..,recompute=..,
/// sp=on|off,partition=even|balanced]": choices left out are searched.
plan_fixed parse_baseline(const std::string& text) {
  plan_fixed f;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find(',', pos);
    // A partition list is the last item: its commas are its own.
    if (text.compare(pos, 10, "partition=") == 0) {
      end = text.size();
    }
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string item = text.substr(pos, end - pos);
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      bad("--baseline: expected key=value items separated by commas, got \"" + item + "\"");
    }
    set_plan_choice(f, item.substr(0, eq), item.substr(eq + 1), "--baseline");
    pos = end + 1;
  }
  return f;
}

void write_file(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) {
      bad("standard output: write failed");
    }
    return;
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) {
    bad(path + ": cannot open for writing");
  }
  out << text;
  out.flush();
  if (!out) {
    bad(path + ": write failed");
  }
}

/// PREFIX.csv (PyTorch compute_comms CSV, the runtime's SEND/RECV in list order) and
/// PREFIX.compute.csv (compute actions only; PyTorch's loader adds the transfers), both without
/// R ops (PyTorch recomputes inside the stage module); PREFIX.schedule.json (pipesched's JSON,
/// R ops included), PREFIX.costs.json and PREFIX.memory.json (the op times in seconds and the
/// sizes in bytes the plan was timed and checked with); PREFIX.map.json (stage -> ranks and
/// layers).
std::vector<std::string> export_plan(const std::string& prefix,
                                     const training_job& job,
                                     const plan_entry& e) {
  const schedule torch_order = without_recompute(e.sched);
  lowering_options lo;
  lo.costs = e.costs;
  const schedule lowered = lower_communication(torch_order, lo);
  torch_csv_options list;
  list.alignment = torch_alignment::list_order;
  std::vector<std::string> files = {prefix + ".csv",           prefix + ".compute.csv",
                                    prefix + ".schedule.json", prefix + ".costs.json",
                                    prefix + ".memory.json",   prefix + ".map.json"};
  write_file(files[0], to_torch_csv(lowered, list));
  write_file(files[1], to_torch_csv(torch_order));
  write_file(files[2], write_schedule_json(e.sched) + "\n");
  write_file(files[3], write_cost_model(e.costs) + "\n");
  write_file(files[4], write_memory_model(e.memory) + "\n");
  write_file(files[5], plan_map_to_json(job, e).dump(2) + "\n");
  return files;
}

}  // namespace

CLI::App* add_plan_command(CLI::App& app, plan_cli& o) {
  CLI::App* c = app.add_subcommand(
      "plan", "Model + cluster + batch in: the fastest layout and schedule that fit in memory");
  c->add_option("--model", o.model,
                "llama3-8b, llama3-70b, llama3-405b, gpt3-175b, or a model "
                "JSON file (docs/formats.md)")
      ->required();
  c->add_option("--gpu", o.gpu, "h100-sxm-80gb, a100-sxm-80gb, or a cluster JSON file")->required();
  c->add_option("--gpus", o.gpus, "GPUs in the job (default TP*PP*DP when all three are given)");
  c->add_option("--tp", o.tp, "Tensor parallelism (default: searched)");
  c->add_option("--pp", o.pp, "Pipeline stages (default: searched)");
  c->add_option("--dp", o.dp, "Data parallelism (default: GPUs / (TP*PP))");
  c->add_option("--chunks,-v", o.chunks, "Model chunks per stage (default: searched)");
  c->add_option("--schedule,-s", o.schedule, "A schedule of `pipesched list` (default: all)");
  c->add_option("--seq", o.sequence, "Tokens per sequence")->required();
  c->add_option("--micro-batch", o.micro_batch, "Sequences per micro-batch (default: searched)");
  auto* m = c->add_option("--microbatches,-m", o.microbatches,
                          "Micro-batches per pipeline (with --tp --pp --micro-batch)");
  auto* g = c->add_option("--global-batch", o.global_batch, "Sequences per optimizer step");
  auto* k = c->add_option("--global-batch-tokens", o.global_batch_tokens,
                          "Tokens per optimizer step (a multiple of --seq)");
  g->excludes(k);
  (void)m;
  auto* sp = c->add_flag("--sequence-parallel", o.sequence_parallel,
                         "Sequence parallelism on (default: searched when TP > 1)");
  auto* nsp =
      c->add_flag("--no-sequence-parallel", o.no_sequence_parallel, "Sequence parallelism off");
  sp->excludes(nsp);
  c->add_option("--recompute", o.recompute, "none, selective or full (default: searched)");
  c->add_option("--optimizer-sharding", o.optimizer_sharding,
                "none (18 bytes/parameter), optimizer (Megatron's distributed optimizer), "
                "gradients (ZeRO-2), weights (ZeRO-3 / FSDP)")
      ->capture_default_str();
  c->add_option("--partition", o.partition,
                "Layers to chunks: even, balanced, or L1,L2,... per global chunk")
      ->capture_default_str();
  c->add_option("--top", o.top, "Plans shown")->capture_default_str();
  c->add_flag("--json", o.json, "Print the plan JSON (docs/formats.md)");
  c->add_option("--format,-f", o.format, "text, json, or svg (the Pareto frontier)")
      ->capture_default_str();
  c->add_option("--output,-o", o.output, "Write the report, JSON or picture to FILE");
  c->add_option("--baseline", o.baseline,
                "A layout to compare with, e.g. tp=8,pp=16,dp=128,schedule=interleaved-1f1b "
                "(also v, micro-batch, recompute, sp=on|off, partition; others searched)");
  c->add_option("--export", o.export_prefix,
                "Write the best plan as PREFIX.csv (PyTorch compute_comms), PREFIX.compute.csv, "
                "PREFIX.schedule.json, PREFIX.costs.json, PREFIX.memory.json and PREFIX.map.json "
                "(stage -> ranks, layers)");
  c->add_option("--vocab-multiple", o.vocab_multiple,
                "Pad the vocabulary to a multiple of this times TP (Megatron's 128; 1: TP only)");
  c->add_option("--achieved-fraction", o.achieved_fraction,
                "Share of the GPU's peak the layers achieve (default the --gpu's)");
  c->add_option("--usable-fraction", o.usable_fraction,
                "Share of GPU memory a job can fill (default the --gpu's)");
  c->add_option("--search-evaluations", o.search_evaluations,
                "zb-auto / zb-v local search budget per candidate (candidate orders timed)");
  c->add_option("--threads", o.threads, "Threads evaluating candidates (default: all cores)");
  return c;
}

int run_plan_command(const plan_cli& o) {
  if (o.format != "text" && o.format != "json" && o.format != "svg") {
    bad("--format: unknown format \"" + o.format + "\" (plan knows: text, json, svg)");
  }
  if (o.json && o.format == "svg") {
    bad("--json: conflicts with --format svg (use one)");
  }
  const bool json = o.json || o.format == "json";
  plan_request req;
  try {
    req.model = load_transformer_spec(o.model);
  } catch (const pipesched::invalid_argument& e) {
    bad(std::string("--model: ") + e.what());
  }
  try {
    req.cluster = load_cluster_spec(o.gpu);
  } catch (const pipesched::invalid_argument& e) {
    bad(std::string("--gpu: ") + e.what());
  }
  if (o.achieved_fraction) {
    req.achieved_fraction = parse_fraction(*o.achieved_fraction, "--achieved-fraction");
  }
  if (o.usable_fraction) {
    req.usable_fraction = parse_fraction(*o.usable_fraction, "--usable-fraction");
  }
  req.gpus = o.gpus;
  req.sequence = *o.sequence;
  req.global_batch = o.global_batch;
  req.global_batch_tokens = o.global_batch_tokens;
  req.sharding = parse_sharding(o.optimizer_sharding);
  req.vocab_multiple = o.vocab_multiple;
  plan_options& opts = req.options;
  plan_fixed& f = opts.fixed;
  f.tp = o.tp;
  f.pp = o.pp;
  f.dp = o.dp;
  f.chunks = o.chunks;
  f.micro_batch = o.micro_batch;
  f.microbatches = o.microbatches;
  f.schedule = o.schedule;
  if (o.recompute) {
    f.recompute = parse_recompute(*o.recompute, "--recompute");
  }
  if (o.sequence_parallel) {
    f.sequence_parallel = true;
  } else if (o.no_sequence_parallel) {
    f.sequence_parallel = false;
  }
  f.partition = parse_partition_option(o.partition);
  opts.top = o.top;
  if (o.baseline) {
    opts.baseline = parse_baseline(*o.baseline);
  }
  if (o.search_evaluations) {
    opts.search_evaluations = *o.search_evaluations;
  }
  if (o.threads) {
    opts.threads = *o.threads;
  }
  const training_job job = job_of(req);
  const plan_result r = plan(job, opts);
  const bool fits = !r.plans.empty() && r.plans.front().fits;
  if (o.export_prefix) {
    if (!fits) {
      bad("--export: no plan fits, nothing to export");
    }
    for (const std::string& file : export_plan(*o.export_prefix, job, r.plans.front())) {
      std::fprintf(stderr, "wrote %s\n", file.c_str());
    }
  }
  if (json) {
    write_file(o.output, plan_to_json(job, r).dump(2) + "\n");
  } else if (o.format == "svg") {
    write_file(o.output, plan_frontier_svg(job, r));
  } else {
    write_file(o.output, plan_text(job, r));
  }
  if (!fits) {
    // The reason on stderr too, so a script reading the JSON on stdout still sees it.
    if (r.plans.empty()) {
      std::fprintf(stderr,
                   "error: no plan fits: the smallest need found is %.4g GiB per GPU, %.4g GiB "
                   "usable\n",
                   r.smallest_need_bytes / (1024.0 * 1024.0 * 1024.0),
                   job.cluster.usable_memory() / (1024.0 * 1024.0 * 1024.0));
    } else {
      std::fprintf(stderr,
                   "error: the plan does not fit: it needs %.4g GiB per GPU, %.4g GiB "
                   "usable\n",
                   r.plans.front().peak_memory_bytes / (1024.0 * 1024.0 * 1024.0),
                   job.cluster.usable_memory() / (1024.0 * 1024.0 * 1024.0));
    }
    return 1;
  }
  return 0;
}

}  // namespace pipesched::cli
