// The job planner: pipesched.plan(model, gpu, ...) with the `pipesched plan` options as keywords;
// the request goes through the library's plan_request (job_of: the same rules and messages as
// the CLI) and comes back as the plan JSON (a dict), its text report or its frontier SVG.

#include <cstdint>
#include <optional>
#include <string>

#include <pipesched/io/plan_json.hpp>
#include <pipesched/io/plan_svg.hpp>
#include <pipesched/io/plan_text.hpp>
#include <pipesched/plan/plan_request.hpp>

#include "bindings.hpp"

namespace pipesched::python {

namespace {

/// baseline=: a dict of choices (tp, pp, dp, v, micro_batch, schedule, recompute, sp,
/// partition) or the CLI's "tp=8,pp=16,..." text.
plan_fixed baseline_arg(const py::object& b) {
  plan_fixed f;
  if (py::isinstance<py::str>(b)) {
    return parse_plan_choices(b.cast<std::string>(), "baseline");
  }
  if (!py::isinstance<py::dict>(b)) {
    detail::fail("baseline: expected a dict of choices or \"tp=8,pp=16,...\" text");
  }
  if (b.cast<py::dict>().empty()) {
    detail::fail(
        "baseline: give at least one choice (e.g. {'tp': 8, 'pp': 16}), not an empty dict");
  }
  for (const auto& [key, value] : b.cast<py::dict>()) {
    std::string v;
    if (py::isinstance<py::bool_>(value)) {
      v = value.cast<bool>() ? "on" : "off";
    } else {
      v = py::str(value).cast<std::string>();
    }
    set_plan_choice(f, py::str(key).cast<std::string>(), v, "baseline");
  }
  return f;
}

}  // namespace

void bind_planner(py::module_& m) {
  m.def(
      "model_presets",
      [] {
        py::list out;
        for (const transformer_spec& t : model_presets()) {
          out.append(t.name);
        }
        return out;
      },
      "Names of the built-in models (pipesched.plan's model=).");
  m.def(
      "gpu_presets",
      [] {
        py::list out;
        for (const cluster_spec& c : cluster_presets()) {
          out.append(c.name);
        }
        return out;
      },
      "Names of the built-in GPUs (pipesched.plan's gpu=).");
  m.def(
      "plan",
      [](const std::string& model, const std::string& gpu, std::optional<std::uint64_t> gpus,
         std::optional<std::uint64_t> seq, std::optional<std::uint32_t> tp,
         std::optional<std::uint32_t> cp, std::optional<std::uint32_t> pp,
         std::optional<std::uint64_t> dp, std::optional<std::uint32_t> chunks,
         std::optional<std::string> schedule, std::optional<std::uint32_t> micro_batch,
         std::optional<std::uint32_t> microbatches, std::optional<std::uint64_t> global_batch,
         std::optional<std::uint64_t> global_batch_tokens, std::optional<bool> sequence_parallel,
         std::optional<std::string> recompute, const std::string& optimizer_sharding,
         const std::string& partition, std::size_t top, const py::object& baseline,
         std::optional<std::uint32_t> vocab_multiple, std::optional<double> achieved_fraction,
         std::optional<double> usable_fraction, std::optional<std::size_t> search_evaluations,
         std::optional<unsigned> threads, const std::string& format,
         std::optional<std::uint32_t> ep, std::optional<double> moe_imbalance,
         bool memory_efficient_norm) -> py::object {
        format_arg(format, {"json", "text", "svg"});
        if (!seq) {
          detail::fail("seq: tokens per sequence must be given");
        }
        plan_request req;
        req.model = load_transformer_spec(model);
        req.cluster = load_cluster_spec(gpu);
        req.gpus = gpus;
        req.sequence = *seq;
        req.global_batch = global_batch;
        req.global_batch_tokens = global_batch_tokens;
        const auto sharding = parse_optimizer_sharding(optimizer_sharding);
        if (!sharding) {
          detail::fail("optimizer_sharding: must be none, optimizer, gradients or weights, not \"",
                       optimizer_sharding, "\"");
        }
        req.sharding = *sharding;
        req.vocab_multiple = vocab_multiple;
        req.achieved_fraction = achieved_fraction;
        req.usable_fraction = usable_fraction;
        req.moe_imbalance = moe_imbalance.value_or(1.0);
        req.memory_efficient_norm = memory_efficient_norm;
        plan_fixed& f = req.options.fixed;
        f.tp = tp;
        f.cp = cp;
        f.pp = pp;
        f.dp = dp;
        f.ep = ep;
        f.chunks = chunks;
        f.schedule = schedule;
        f.micro_batch = micro_batch;
        f.microbatches = microbatches;
        f.sequence_parallel = sequence_parallel;
        if (recompute) {
          set_plan_choice(f, "recompute", *recompute, "plan");
        }
        set_plan_choice(f, "partition", partition, "plan");
        req.options.top = top;
        if (py::isinstance<py::list>(baseline)) {
          // Several: the first is the baseline, the others compare the same way.
          for (const py::handle b : baseline.cast<py::list>()) {
            plan_fixed base = baseline_arg(py::reinterpret_borrow<py::object>(b));
            if (!req.options.baseline) {
              req.options.baseline = std::move(base);
            } else {
              req.options.other_baselines.push_back(std::move(base));
            }
          }
        } else if (!baseline.is_none()) {
          req.options.baseline = baseline_arg(baseline);
        }
        if (search_evaluations) {
          req.options.search_evaluations = *search_evaluations;
          check_search_evaluations_apply(req.options, default_registry());
        }
        if (threads) {
          req.options.threads = *threads;
        }
        const training_job job = job_of(req);
        plan_result r;
        {
          py::gil_scoped_release unlocked;  // a search can take a second; other threads may run
          r = plan(job, req.options);
        }
        if (format == "text") {
          return py::str(plan_text(job, r));
        }
        if (format == "svg") {
          return py::str(plan_frontier_svg(job, r));
        }
        return python_json(plan_to_json(job, r));
      },
      py::arg("model"), py::arg("gpu"), py::kw_only(), py::arg("gpus") = py::none(),
      py::arg("seq") = py::none(), py::arg("tp") = py::none(), py::arg("cp") = py::none(),
      py::arg("pp") = py::none(), py::arg("dp") = py::none(), py::arg("chunks") = py::none(),
      py::arg("schedule") = py::none(), py::arg("micro_batch") = py::none(),
      py::arg("microbatches") = py::none(), py::arg("global_batch") = py::none(),
      py::arg("global_batch_tokens") = py::none(), py::arg("sequence_parallel") = py::none(),
      py::arg("recompute") = py::none(), py::arg("optimizer_sharding") = "optimizer",
      py::arg("partition") = "balanced", py::arg("top") = 5, py::arg("baseline") = py::none(),
      py::arg("vocab_multiple") = py::none(), py::arg("achieved_fraction") = py::none(),
      py::arg("usable_fraction") = py::none(), py::arg("search_evaluations") = py::none(),
      py::arg("threads") = py::none(), py::arg("format") = "json", py::arg("ep") = py::none(),
      py::arg("moe_imbalance") = py::none(), py::arg("memory_efficient_norm") = false,
      R"(The fastest plans for a model on a cluster (docs/model.md section 10): `pipesched plan`.

model: a preset (model_presets()) or a model JSON file; gpu: a preset (gpu_presets()) or a
cluster JSON file. Keywords are the CLI's long options: gpus, seq (tokens per sequence), tp,
cp, pp, dp, ep (expert parallelism), chunks (v), schedule, micro_batch, microbatches, global_batch or global_batch_tokens,
sequence_parallel (True, False, or None: searched), recompute ('none', 'selective', 'full';
None: searched), optimizer_sharding, partition ('even', 'balanced', or 'L1,L2,...'), top,
baseline (a dict such as {'tp': 8, 'pp': 16, 'schedule': 'interleaved-1f1b'}, or the CLI's
text, or a list of them: the first the baseline, the others in "other_baselines"), vocab_multiple, achieved_fraction, usable_fraction, search_evaluations, threads,
moe_imbalance (the busiest expert-parallel rank's routed tokens over the mean, >= 1),
memory_efficient_norm (True: norms whose backward reads their output keep no input, as a stack
that frees each stage's input runs them; docs/model.md section 10.3).
Returns the plan JSON as a dict (format='json'), the CLI's report ('text') or the Pareto
frontier ('svg'). Nothing fitting is no error: the dict's "plans" is empty and
"smallest_need_bytes" says how much one GPU would need.)");
}

}  // namespace pipesched::python
