// Trains a small MLP through any registered pipeline schedule, one thread per stage, and checks
// the accumulated gradients against an unpipelined reference.
//   mlp_pipeline --schedule zb-h1 --stages 4 --microbatches 8
//   mlp_pipeline --schedule all --stages 4 --microbatches 2
//   mlp_pipeline --schedule zb-v --stages 4 --microbatches 8 --recompute all
// Last line: max_grad_rel_diff=<x>; exit status 1 when x > 1e-12, the loss did not fall, or a
// run failed.

#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/transform/recompute.hpp>

#include "mlp.hpp"
#include "route_copies.hpp"
#include "training_schedules.hpp"

namespace {

constexpr double tolerance = 1e-12;

struct options {
  std::string schedule;
  std::uint32_t stages = 4;
  std::uint32_t microbatches = 8;
  int steps = 5;
  mlp::settings model;
  bool serial = false;
  std::string recompute;  // "", "all" or global chunks "0,2"
  std::string recompute_policy = "before-backward";
};

struct outcome {
  double max_diff = 0.0;
  bool ok = false;
};

outcome train(const pipesched::schedule& sched, const options& opt) {
  const auto& pl = sched.layout();
  const mlp::settings& ms = opt.model;
  const mlp::dataset data = mlp::make_dataset(sched.microbatches(), ms.batch, ms.width);
  std::vector<mlp::layer> layers = mlp::replicate(
      mlp::make_layers(pl.route_length(), ms.layers_per_chunk, ms.width), pl.routes());
  std::printf("%s: p=%u m=%u chunks/stage=%u, %zu layers of %zux%zu, batch %zu per micro-batch\n",
              sched.name().c_str(), sched.stages(), sched.microbatches(), sched.chunks(),
              layers.size(), ms.width, ms.width, ms.batch);
  if (pl.routes() > 1) {
    std::printf(
        "  %u routes, each through its own copy of the model's %zu layers; each copy "
        "applies a block's gradient summed over the copies\n",
        pl.routes(), layers.size() / pl.routes());
  }
  outcome out;
  std::vector<double> losses;
  const double lr = mlp::step_size(ms.lr, pl);
  for (int step = 0; step < opt.steps; ++step) {
    mlp::zero_grads(layers);
    mlp::pipelined_mlp model(layers, ms.layers_per_chunk, data);
    if (opt.serial) {
      pipesched::run_serial(model, sched);
    } else {
      pipesched::run_threaded(model, sched);
    }
    route_copies::sum_all_copies(pl, model);
    double ref_loss = 0.0;
    const auto ref = mlp::reference_gradients(mlp::one_copy(layers, pl.routes()), data, ref_loss);
    const double diff = mlp::max_rel_diff(layers, ref);
    out.max_diff = std::max(out.max_diff, diff);
    losses.push_back(model.loss());
    std::printf("  step %d  loss=%.10f  (reference %.10f)  grad_rel_diff=%.3g%s\n", step,
                model.loss(), ref_loss, diff,
                model.stashed() == 0 ? "" : "  (tensors left stashed!)");
    if (model.stashed() != 0) {
      out.max_diff = HUGE_VAL;
    }
    mlp::sgd_step(layers, lr);
  }
  const bool fell = losses.size() < 2 || losses.back() < losses.front();
  if (!fell) {
    std::printf("  FAIL: the loss did not fall\n");
  }
  const bool match = out.max_diff <= tolerance;
  if (!match) {
    std::printf("  FAIL: gradients differ from the reference by %.3g\n", out.max_diff);
  }
  out.ok = fell && match;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{"Train a small MLP through a pipeline schedule and check its gradients"};
  app.add_option("--schedule", opt.schedule, "registered schedule name, or 'all'")->required();
  app.add_option("--stages,-p", opt.stages, "pipeline stages")->check(CLI::Range(1u, 64u));
  app.add_option("--microbatches,-m", opt.microbatches, "micro-batches")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--steps", opt.steps, "optimizer steps")->check(CLI::Range(1, 1000));
  app.add_option("--lr", opt.model.lr, "SGD learning rate")->check(CLI::Range(0.0, 10.0));
  app.add_flag("--serial", opt.serial, "single-threaded driver instead of one thread per stage");
  app.add_option("--recompute", opt.recompute,
                 "activation recomputation: all, or global chunks G1,G2,... (with_recompute)");
  app.add_option("--recompute-policy", opt.recompute_policy, "before-backward or idle-slot")
      ->check(CLI::IsMember({"before-backward", "idle-slot"}));
  CLI11_PARSE(app, argc, argv);

  std::vector<const pipesched::generator_entry*> entries;
  try {
    entries = training_schedules::named(opt.schedule);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_pipeline: %s\n", e.what());
    return 2;
  }

  training_schedules::tally t;
  for (const auto* entry : entries) {
    pipesched::schedule sched;
    try {
      sched = training_schedules::generate(*entry, opt.stages, opt.microbatches);
    } catch (const pipesched::invalid_argument& e) {
      if (entries.size() == 1) {
        std::fprintf(stderr, "mlp_pipeline: %s\n", e.what());
        return 2;
      }
      std::printf("skip %s: %s\n", entry->name.c_str(), e.what());
      continue;
    }
    try {
      if (!opt.recompute.empty()) {
        std::vector<pipesched::global_chunk> chunks;
        if (opt.recompute == "all") {
          chunks = pipesched::all_chunks(sched);
        } else {
          std::size_t pos = 0;
          while (pos <= opt.recompute.size()) {
            const std::size_t comma = std::min(opt.recompute.find(',', pos), opt.recompute.size());
            chunks.push_back(static_cast<pipesched::global_chunk>(
                std::stoul(opt.recompute.substr(pos, comma - pos))));
            pos = comma + 1;
          }
        }
        pipesched::recompute_options ro;
        ro.placement = opt.recompute_policy == "idle-slot"
                           ? pipesched::recompute_placement::idle_slot
                           : pipesched::recompute_placement::before_backward;
        sched = pipesched::with_recompute(sched, chunks, ro);
        sched.set_name(entry->name + " +recompute " + opt.recompute_policy);
      }
      const outcome o = train(sched, opt);
      t.worst = std::max(t.worst, o.max_diff);
      t.failed += o.ok ? 0 : 1;
    } catch (const std::exception& e) {
      t.threw(entry->name, e);
    }
    ++t.trained;
  }
  return t.report(true, opt.stages, opt.microbatches, "the reference") ? 0 : 1;
}
