// `pipesched plan`: from a model, a cluster and a batch to the fastest plan that fits in GPU
// memory (docs/model.md §10). The command only parses and prints: plan_request (job_of) holds
// the rules, pipesched::plan() decides, the io/plan_* writers print.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/io/framework_export.hpp>
#include <pipesched/io/plan_json.hpp>
#include <pipesched/io/plan_svg.hpp>
#include <pipesched/io/plan_text.hpp>
#include <pipesched/io/schedule_export.hpp>
#include <pipesched/plan/plan_request.hpp>

#include "cli_support.hpp"

namespace pipesched::cli {

namespace {

/// The options of `pipesched plan`, as text: each number is read by parse_count / parse_real
/// so that its error names the option.
struct plan_cli {
  std::string model;
  std::string gpu;
  std::optional<std::string> gpus, tp, cp, pp, dp, ep, chunks, micro_batch, microbatches;
  std::optional<std::string> moe_imbalance;
  std::optional<std::string> schedule;
  std::optional<std::string> group_size;
  std::optional<std::string> sequence;
  std::optional<std::string> global_batch, global_batch_tokens;
  bool sequence_parallel = false;
  bool no_sequence_parallel = false;
  std::optional<std::string> recompute;
  std::string optimizer_sharding = "optimizer";
  std::string partition = "balanced";
  std::string top = "5";
  report_output_cli out;
  std::vector<std::string> baselines;  // --baseline, repeatable
  std::optional<std::string> export_prefix;
  std::optional<std::string> vocab_multiple;
  std::optional<std::string> achieved_fraction;
  std::optional<std::string> usable_fraction;
  std::optional<std::string> search_evaluations;
  std::optional<std::string> threads;
  std::optional<std::string> attention;
  bool memory_efficient_norm = false;
  std::string activation_model = "tensors";
  std::string overlap_grad_reduce = "on";
  std::string p2p = "overlapped";
  std::string grad_reduce_dtype = "fp32";
  std::string tp_comm_overlap = "none";
  std::string gradient_accumulation_fusion = "on";
  bool layer_times = false;
};

constexpr std::uint64_t u32_max = 0xffffffffu;

std::optional<std::uint32_t> count32(const std::optional<std::string>& text, const char* option) {
  if (!text) {
    return std::nullopt;
  }
  return static_cast<std::uint32_t>(parse_count(*text, option, u32_max, 1));
}

std::optional<std::uint64_t> count64(const std::optional<std::string>& text, const char* option) {
  if (!text) {
    return std::nullopt;
  }
  return parse_count(*text, option, std::uint64_t{1} << 62, 1);
}

/// A fraction option: job_of's (0, 1] rule, checked here first so that the message names the
/// option the user typed rather than the library's field.
double fraction_option(const std::string& text, const char* option) {
  const double v = parse_real(text, option);
  if (!(v > 0.0 && v <= 1.0)) {
    usage_error(std::string(option) + ": must be in (0, 1], got " + text);
  }
  return v;
}

/// Whether `text` is one shell word as it stands: `$(cat PREFIX.torchtitan.args)` splits on
/// whitespace and nothing else, so a path with a space, quote or glob character would not
/// reach torchtitan whole.
bool plain_word(const std::string& text) {
  for (char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    std::string_view("._/+-,=@%:").find(c) != std::string_view::npos;
    if (!ok) {
      return false;
    }
  }
  return !text.empty();
}

/// The schedule's five files (schedule_export: op times in seconds, sizes in bytes),
/// PREFIX.map.json (stage -> ranks and layers) and the frameworks' files where they can run the
/// plan (io/framework_export.hpp): PREFIX.megatron.args, PREFIX.torchtitan.args and
/// PREFIX.torchtitan.py; for each one not written, why, on stderr. The inputs and the -o file
/// are never overwritten.
std::vector<std::string> export_plan(const plan_cli& o,
                                     const training_job& job,
                                     const plan_entry& e) {
  const std::string& prefix = *o.export_prefix;
  std::vector<export_file> files = schedule_export(prefix, e.sched, e.costs, e.memory);
  files.push_back({prefix + ".map.json", plan_map_to_json(job, e).dump(2) + "\n"});
  // Printed after the files: an export refused writes nothing, and says only why.
  std::vector<std::string> notes;
  const auto not_written = [&prefix, &notes](const std::string& file, const std::string& why) {
    notes.push_back(prefix + file + " not written: " + why);
  };
  if (const std::string why = megatron_unsupported(job, e); why.empty()) {
    files.push_back({prefix + ".megatron.args", megatron_args(job, e)});
  } else {
    not_written(".megatron.args", why);
  }
  if (const std::string why = torchtitan_unsupported(job, e); why.empty()) {
    // torchtitan runs from its own directory: the exported order by its absolute path.
    const std::string csv = std::filesystem::absolute(prefix + ".compute.csv").string();
    const torchtitan_settings t = torchtitan_settings_of(job, e, csv);
    const bool reads_csv = std::any_of(
        t.options.begin(), t.options.end(),
        [](const torchtitan_option& opt) { return opt.field == "pipeline_parallel_schedule_csv"; });
    if (!reads_csv || plain_word(csv)) {
      files.push_back({prefix + ".torchtitan.args", torchtitan_args(t)});
    } else {
      not_written(".torchtitan.args",
                  "the path " + csv + " is not one shell word (the .py names it quoted)");
    }
    if (!t.base_config.empty()) {
      const plan_layout& l = e.choice.layout;
      const std::string summary = job.model.name + " on " + std::to_string(job.gpus) + " " +
                                  job.cluster.name + " GPUs, " + detail::plan_label(e.choice) +
                                  " DP" + std::to_string(l.dp) +
                                  (l.cp > 1 ? " CP" + std::to_string(l.cp) : "") + " " +
                                  std::string(to_string(job.sharding)) + " sharding";
      files.push_back({prefix + ".torchtitan.py", torchtitan_config(job, t, summary)});
    } else {
      not_written(".torchtitan.py", "torchtitan ships no config of " + job.model.name +
                                        " to derive from (it has Llama 3 8B, 70B and 405B); "
                                        "PREFIX.torchtitan.args applies to a config of your own");
    }
  } else {
    notes.push_back(prefix + ".torchtitan.args and " + prefix +
                    ".torchtitan.py not written: " + why);
  }
  std::vector<std::string> written =
      write_export(files, {{o.model, "--model"},
                           {o.gpu, "--gpu"},
                           {is_stdout(o.out.output) ? std::string() : o.out.output, "--output"}});
  for (const std::string& note : notes) {
    std::fprintf(stderr, "note: %s\n", note.c_str());
  }
  return written;
}

int cmd_plan(const plan_cli& o) {
  const std::string format = o.out.chosen("plan", {"text", "json", "svg"});
  const bool json = format == "json";
  if (o.export_prefix) {
    export_prefix_or_exit(*o.export_prefix);  // before the search, which can take a while
  }
  plan_request req;
  std::tie(req.model, req.cluster) = load_model_and_gpu(o.model, o.gpu);
  if (o.achieved_fraction) {
    req.achieved_fraction = fraction_option(*o.achieved_fraction, "--achieved-fraction");
  }
  if (o.usable_fraction) {
    req.usable_fraction = fraction_option(*o.usable_fraction, "--usable-fraction");
  }
  req.gpus = count64(o.gpus, "--gpus");
  if (o.layer_times) {
    // One layer on TP·CP GPUs (--gpus and the batch are refused: its times take neither).
    if (o.out.format_given && o.out.format != "json") {
      usage_error("--format: --layer-times prints JSON, not " + o.out.format);
    }
    req.gpus = std::uint64_t{count32(o.tp, "--tp").value_or(1)} * count32(o.cp, "--cp").value_or(1);
  }
  req.sequence = count64(o.sequence, "--seq").value_or(0);
  req.global_batch = count64(o.global_batch, "--global-batch");
  req.global_batch_tokens = count64(o.global_batch_tokens, "--global-batch-tokens");
  const auto sharding = parse_optimizer_sharding(o.optimizer_sharding);
  if (!sharding) {
    usage_error("--optimizer-sharding: must be none, optimizer, gradients or weights, not \"" +
                o.optimizer_sharding + "\"");
  }
  req.sharding = *sharding;
  if (o.attention) {
    const auto a = parse_attention_kind(*o.attention);
    if (!a) {
      usage_error("--attention: must be flash or materialized, not \"" + *o.attention + "\"");
    }
    req.attention = *a;
  }
  req.memory_efficient_norm = o.memory_efficient_norm;
  const auto am = parse_activation_model(o.activation_model);
  if (!am) {
    usage_error("--activation-model: must be tensors or megatron, not \"" + o.activation_model +
                "\"");
  }
  req.activations = *am;
  // The job check refuses the pair too (for a model file's key); here it is named by its flags.
  if (o.memory_efficient_norm && *am == activation_model::megatron) {
    usage_error(
        "--memory-efficient-norm needs --activation-model tensors (Megatron's estimator "
        "counts every norm's input)");
  }
  if (o.overlap_grad_reduce != "on" && o.overlap_grad_reduce != "off") {
    usage_error("--overlap-grad-reduce: must be on or off, not \"" + o.overlap_grad_reduce + "\"");
  }
  req.overlap_grad_reduce = o.overlap_grad_reduce == "on";
  if (o.p2p != "blocking" && o.p2p != "overlapped") {
    usage_error("--p2p: must be blocking or overlapped, not \"" + o.p2p + "\"");
  }
  req.blocking_p2p = o.p2p == "blocking";
  if (o.grad_reduce_dtype != "fp32" && o.grad_reduce_dtype != "bf16") {
    usage_error("--grad-reduce-dtype: must be fp32 or bf16, not \"" + o.grad_reduce_dtype + "\"");
  }
  req.gradient_reduce_bytes = o.grad_reduce_dtype == "fp32" ? 4 : 2;
  const auto tpo = parse_tp_overlap(o.tp_comm_overlap);
  if (!tpo) {
    usage_error("--tp-comm-overlap: must be none, backward or all, not \"" + o.tp_comm_overlap +
                "\"");
  }
  req.tp_comm_overlap = *tpo;
  if (o.gradient_accumulation_fusion != "on" && o.gradient_accumulation_fusion != "off") {
    usage_error("--gradient-accumulation-fusion: must be on or off, not \"" +
                o.gradient_accumulation_fusion + "\"");
  }
  req.gradient_accumulation_fusion = o.gradient_accumulation_fusion == "on";
  req.vocab_multiple = count32(o.vocab_multiple, "--vocab-multiple");
  if (o.moe_imbalance) {
    req.moe_imbalance = parse_real(*o.moe_imbalance, "--moe-imbalance");
    if (!(req.moe_imbalance >= 1.0)) {
      usage_error("--moe-imbalance: " + *o.moe_imbalance +
                  " must be at least 1 (the busiest expert-parallel rank's routed tokens over "
                  "the mean)");
    }
    if (req.moe_imbalance != 1.0 && !req.model.is_moe()) {
      usage_error("--moe-imbalance: " + *o.moe_imbalance + " needs a model with experts; \"" +
                  req.model.name + "\" is dense");
    }
  }
  plan_options& opts = req.options;
  plan_fixed& f = opts.fixed;
  f.tp = count32(o.tp, "--tp");
  f.cp = count32(o.cp, "--cp");
  f.pp = count32(o.pp, "--pp");
  f.dp = count64(o.dp, "--dp");
  f.ep = count32(o.ep, "--ep");
  f.chunks = count32(o.chunks, "--chunks");
  f.micro_batch = count32(o.micro_batch, "--micro-batch");
  f.microbatches = count32(o.microbatches, "--microbatches");
  f.schedule = o.schedule;
  if (o.group_size) {
    if (o.schedule != "interleaved-1f1b") {
      usage_error(
          "--group-size: only with --schedule interleaved-1f1b (the group size is its "
          "micro-batches per round of the virtual stages)");
    }
    f.group_size = count32(o.group_size, "--group-size");
    if (*f.group_size == 0 || (f.microbatches && *f.group_size > *f.microbatches)) {
      usage_error("--group-size: " + *o.group_size +
                  " must be between 1 and the micro-batches per pipeline (--microbatches)");
    }
  }
  if (o.recompute) {
    f.recompute = recompute_kind_named(*o.recompute, "--recompute:");
  }
  if (o.sequence_parallel) {
    f.sequence_parallel = true;
  } else if (o.no_sequence_parallel) {
    f.sequence_parallel = false;
  }
  const auto part = parse_partition(o.partition);
  if (!part) {
    usage_error("--partition: must be even, balanced or layers per chunk L1,L2,..., not \"" +
                o.partition + "\"");
  }
  f.partition = *part;
  opts.top = parse_count(o.top, "--top", 1000, 1);
  // "tp=8,pp=16,dp=128,schedule=interleaved-1f1b[,v=..,...]": choices left out are searched.
  // The first is the baseline; more compare the same way (e.g. one layout, several schedules).
  for (const std::string& b : o.baselines) {
    plan_fixed base = parse_plan_choices(b, "--baseline");
    if (!opts.baseline) {
      opts.baseline = std::move(base);
    } else {
      opts.other_baselines.push_back(std::move(base));
    }
  }
  if (o.search_evaluations) {
    opts.search_evaluations = parse_count(*o.search_evaluations, "--search-evaluations", 100000);
    check_search_evaluations_apply(opts, default_registry());
  }
  if (o.threads) {
    opts.threads = static_cast<unsigned>(parse_count(*o.threads, "--threads", 1024));
  }
  const training_job job = job_of(req);
  // A pipeline runs at most the whole batch as micro-batches of one sequence: a larger group
  // can never be taken, whatever the layout (not "no plan fits").
  if (f.group_size && job.global_batch != 0 && *f.group_size > job.global_batch) {
    usage_error("--group-size: " + *o.group_size +
                " must be between 1 and the micro-batches per pipeline, at most the global "
                "batch (" +
                std::to_string(job.global_batch) + " sequences)");
  }
  if (o.layer_times) {
    // One layer's ops for the layout given: no search.
    plan_layout lay;
    lay.tp = f.tp.value_or(1);
    lay.cp = f.cp.value_or(1);
    lay.micro_batch = f.micro_batch.value_or(1);
    lay.sequence_parallel = f.sequence_parallel.value_or(false) && lay.tp > 1;
    lay.ep = f.ep.value_or(1);
    if (lay.ep > 1 && (!job.model.is_moe() || job.model.experts % lay.ep != 0)) {
      usage_error("--ep: " + std::to_string(lay.ep) +
                  (job.model.is_moe() ? " must divide the routed experts (" +
                                            std::to_string(job.model.experts) + ")"
                                      : " needs a model with experts"));
    }
    if (!job.model.tp_splits_heads(lay.tp)) {
      usage_error("--tp: " + std::to_string(lay.tp) + " must divide the heads (" +
                  std::to_string(job.model.heads) + ") and the KV heads (" +
                  std::to_string(job.model.kv()) + ")");
    }
    if (lay.cp > 1 && job.sequence % (2 * std::uint64_t{lay.cp}) != 0) {
      usage_error("--cp: " + std::to_string(lay.cp) + " cuts each sequence into " +
                  std::to_string(2 * std::uint64_t{lay.cp}) +
                  " pieces (2·CP), which must divide the sequence (" +
                  std::to_string(job.sequence) + " tokens)");
    }
    write_output(
        o.out.output,
        layer_times_to_json(job, lay, f.recompute.value_or(recompute_kind::none)).dump(2) + "\n");
    return 0;
  }
  const plan_result r = plan(job, opts);
  const bool fits = !r.plans.empty() && r.plans.front().fits;
  // Nothing fitting is an answer (exit 1 with the report), also with --export: it writes
  // nothing and says so.
  if (o.export_prefix && fits) {
    try {
      for (const std::string& file : export_plan(o, job, r.plans.front())) {
        std::fprintf(stderr, "wrote %s\n", file.c_str());
      }
    } catch (const field_error& e) {
      usage_error("--export: " + e.rule());
    }
  }
  if (json) {
    write_output(o.out.output, plan_to_json(job, r).dump(2) + "\n");
  } else if (format == "svg") {
    write_output(o.out.output, plan_frontier_svg(job, r));
  } else {
    write_output(o.out.output, plan_text(job, r));
  }
  if (!fits) {
    // The reason on stderr too, so a script reading the JSON on stdout still sees it.
    std::fprintf(stderr, "error: %s\n", plan_misfit_text(job, r).c_str());
    if (o.export_prefix) {
      std::fprintf(stderr, "--export: nothing written: no plan fits\n");
    }
    return 1;
  }
  return 0;
}

void declare_plan(CLI::App* c, plan_cli& o) {
  c->add_option("--model", o.model,
                model_preset_names() + ", or a model JSON file (docs/formats.md)")
      ->required();
  c->add_option("--gpu", o.gpu, cluster_preset_names() + ", or a cluster JSON file")->required();
  auto* gpus = c->add_option(
      "--gpus", o.gpus, "GPUs in the job, at most 16777216 (default TP*PP*DP when all are given)");
  c->add_option("--tp", o.tp, "Tensor parallelism (default: searched)");
  c->add_option("--cp", o.cp,
                "Context parallelism: each sequence over CP ranks (default 1; searched from "
                "32768 tokens per sequence)");
  auto* pp = c->add_option("--pp", o.pp, "Pipeline stages (default: searched)");
  auto* dp = c->add_option("--dp", o.dp, "Data parallelism (default: GPUs / (TP*CP*PP))");
  c->add_option("--ep", o.ep,
                "Expert parallelism, out of the DP*CP ranks: routed experts split over EP "
                "ranks (default: searched for a model with experts, else 1)");
  c->add_option("--moe-imbalance", o.moe_imbalance,
                "The busiest expert-parallel rank's routed tokens over the mean, >= 1 "
                "(scales its expert GEMMs and their activations; default 1)");
  auto* chunks =
      c->add_option("--chunks,-v", o.chunks, "Model chunks per stage (default: searched)");
  auto* schedule =
      c->add_option("--schedule,-s", o.schedule, "A schedule of `pipesched list` (default: all)");
  auto* group =
      c->add_option("--group-size", o.group_size,
                    "With --schedule interleaved-1f1b: micro-batches per round of the virtual "
                    "stages, at most the micro-batches (default --pp; below it when --pp does "
                    "not fit)");
  c->add_option("--seq", o.sequence, "Tokens per sequence")->required();
  c->add_option("--micro-batch", o.micro_batch, "Sequences per micro-batch (default: searched)");
  auto* microbatches = c->add_option("--microbatches,-m", o.microbatches,
                                     "Micro-batches per pipeline (with --tp --pp --micro-batch)");
  auto* g = c->add_option("--global-batch", o.global_batch,
                          "Sequences per optimizer step (at most 2^32 tokens, 65536 "
                          "sequences per pipeline: docs/errors.md, Limits)");
  auto* k = c->add_option("--global-batch-tokens", o.global_batch_tokens,
                          "Tokens per optimizer step (a multiple of --seq)");
  g->excludes(k);
  auto* sp = c->add_flag("--sequence-parallel", o.sequence_parallel,
                         "Sequence parallelism on (default: searched when TP > 1)");
  auto* nsp =
      c->add_flag("--no-sequence-parallel", o.no_sequence_parallel, "Sequence parallelism off");
  sp->excludes(nsp);
  c->add_option("--recompute", o.recompute, "none, selective or full (default: searched)");
  auto* sharding =
      c->add_option("--optimizer-sharding", o.optimizer_sharding,
                    "none (18 bytes/parameter), optimizer (Megatron's distributed optimizer), "
                    "gradients (ZeRO-2), weights (ZeRO-3 / FSDP)")
          ->capture_default_str();
  auto* partition = c->add_option("--partition", o.partition,
                                  "Layers to chunks: even, balanced, or L1,L2,... per global chunk")
                        ->capture_default_str();
  auto* top = c->add_option("--top", o.top, "Plans shown")->capture_default_str();
  o.out.add(c, "Print the plan JSON (docs/formats.md)", "text, json, or svg (the Pareto frontier)",
            "Write the report, JSON or picture to FILE");
  auto* baseline = c->add_option(
      "--baseline", o.baselines,
      "A layout to compare with, e.g. tp=8,pp=16,dp=128,schedule=interleaved-1f1b "
      "(also cp, ep, v, micro-batch, recompute, sp=on|off, partition; others searched; "
      "shown even when it does not fit); repeat it to compare several");
  auto* export_prefix =
      c->add_option("--export", o.export_prefix,
                    "Write the best plan as PREFIX.csv (PyTorch compute_comms), "
                    "PREFIX.compute.csv, PREFIX.schedule.json, PREFIX.costs.json, "
                    "PREFIX.memory.json, PREFIX.map.json (stage -> ranks, layers) and "
                    "PREFIX.megatron.args (Megatron-LM's arguments, when it runs the plan)");
  c->add_option("--vocab-multiple", o.vocab_multiple,
                "Pad the vocabulary to a multiple of this times TP (Megatron's 128; 1: TP "
                "only)");
  c->add_option("--attention", o.attention,
                "flash or materialized (default: the model's; flash in a model file)");
  c->add_flag(
      "--memory-efficient-norm", o.memory_efficient_norm,
      "Norms whose backward reads their output, not their input (apex's, Megatron's "
      "--memory-efficient-layer-norm; a stack that frees each stage's input, as Llama 3's): "
      "no layer keeps its norms' inputs (default: the model's; false in a model file)");
  c->add_option("--activation-model", o.activation_model,
                "tensors (each tensor a layer keeps) or megatron (Megatron-LM's estimator)")
      ->capture_default_str();
  c->add_option("--overlap-grad-reduce", o.overlap_grad_reduce,
                "on: gradients reduce bucket by bucket during the backward; off: after it")
      ->capture_default_str();
  c->add_option("--p2p", o.p2p,
                "Pipeline sends: overlapped (beside the compute) or blocking (the sending op "
                "waits for them, Megatron-LM's default)")
      ->capture_default_str();
  c->add_option("--grad-reduce-dtype", o.grad_reduce_dtype,
                "The data-parallel reduction's precision: fp32 or bf16")
      ->capture_default_str();
  c->add_option("--tp-comm-overlap", o.tp_comm_overlap,
                "Tensor parallelism's collectives beside GEMMs: none; backward (the input "
                "gradients' reduces beside the weight gradients, Megatron's default); all "
                "(every one beside its GEMM, Megatron's --tp-comm-overlap)")
      ->capture_default_str();
  c->add_option("--gradient-accumulation-fusion", o.gradient_accumulation_fusion,
                "on: each micro-batch's weight gradients are added inside their GEMM "
                "(Megatron's default since 2022); off: by an elementwise add after it")
      ->capture_default_str();
  auto* layer_times =
      c->add_flag("--layer-times", o.layer_times,
                  "Print one layer's op times and kernels for --tp, --micro-batch, "
                  "--sequence-parallel and --recompute as JSON, instead of planning");
  c->add_option("--achieved-fraction", o.achieved_fraction,
                "Share of the GPU's peak the layers achieve (default the --gpu's)");
  c->add_option("--usable-fraction", o.usable_fraction,
                "Share of GPU memory a job can fill (default the --gpu's)");
  auto* evaluations =
      c->add_option("--search-evaluations", o.search_evaluations,
                    "zb-auto / zb-v local search budget per candidate (candidate orders timed)");
  auto* threads =
      c->add_option("--threads", o.threads, "Threads evaluating candidates (default: all)");
  // One layer's times take no pipeline, batch split or search: an option that would shape
  // them is refused rather than ignored.
  for (CLI::Option* x : {gpus, g, k, pp, dp, chunks, schedule, group, microbatches, sharding,
                         partition, top, baseline, export_prefix, evaluations, threads}) {
    layer_times->excludes(x);
  }
}

const registration plan_cmd = command<plan_cli>(
    "plan",
    70,
    "Model + cluster + batch in: the fastest layout and schedule that fit in memory",
    declare_plan,
    cmd_plan);

}  // namespace

}  // namespace pipesched::cli
