// Trains a small GPT-like model (libtorch, double precision) through any registered pipeline
// schedule, one thread per stage (torch_pipeline) or one MPI rank per stage
// (torch_pipeline_mpi: this file is compiled once for both, each program adding its transport,
// transport.hpp), with a real split
// backward (--split: fused, autograd, or store, the default: B leaves each linear layer's input
// and output gradient, W runs only the weight-gradient products). Checks the accumulated
// gradients against an unpipelined step on the same mini-batch; can measure the real F/B/W
// costs, write them as a cost model, re-plan schedules from them and time them against the
// measured one in alternating runs (docs/torch_pipeline.md).
//   torch_pipeline --schedule zb-h1 --stages 2 --microbatches 8
//   torch_pipeline --schedule all --stages 4 --microbatches 8 --lowered
//   torch_pipeline -s 1f1b -p 2 -m 8 --profile costs.json --replan zb-h1,zb-v --layers 4
//   mpirun -np 2 torch_pipeline_mpi -s 1f1b -m 8 --profile costs.json --replan zb-h1
// Last line: max_grad_rel_diff=<x>; exit status 1 when x > 1e-10, the loss did not fall over
// several --steps, the W store's size is not the memory model's M_W, or a run failed; 2 for bad
// input.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <torch/torch.h>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/io/cost_model_json.hpp>
#include <pipesched/model/transformer_costs.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "gpt.hpp"
#include "pipelined_gpt.hpp"
#include "training_schedules.hpp"
#include "transport.hpp"

namespace torch_pipeline {
namespace {

constexpr double tolerance = 1e-10;

using gpt::pipelined_gpt;
using gpt::split_mode;
using pipesched::global_chunk;
using pipesched::op_kind;

bool root() {
  return rank() == 0;
}

template <class... A>
void say(const char* format, A... args) {
  if (root()) {
    std::printf(format, args...);
  }
}

struct options {
  std::string schedule;
  std::uint32_t stages = 2;
  std::uint32_t microbatches = 8;
  bool lowered = false;
  int steps = 1;
  double lr = 0.05;
  gpt::config cfg;
  std::size_t layers = 0;  ///< 0: blocks_per_chunk per chunk
  split_mode split = split_mode::store;
  std::string profile;
  std::vector<std::string> replan;
  bool fused_baseline = false;  ///< also time the profiled schedule with --split fused
  int warmup = 1;
  int repeat = 5;
  double perturb = 0.0;  ///< the pipelined loss is scaled by 1 + perturb (checks the check)
};

/// The model for `sched`: --layers split evenly over its p·v chunks (one route's, with several),
/// or --blocks-per-chunk each.
gpt::config config_for(const pipesched::schedule& sched, const options& opt) {
  gpt::config c = opt.cfg;
  // Each route holds a copy of the whole model (route_copies.hpp).
  const pipesched::placement& pl = sched.layout();
  const std::size_t total = pl.route_length();
  if (opt.layers != 0) {
    if (opt.layers % total != 0) {
      throw pipesched::invalid_argument(
          "--layers (" + std::to_string(opt.layers) + ") must be a multiple of the schedule's " +
          (pl.routes() > 1 ? "chunks along a route (" : "p*v chunks (") + std::to_string(total) +
          ")");
    }
    c.blocks_per_chunk = opt.layers / total;
  }
  return c;
}

// --- Checks ----------------------------------------------------------------------------------

/// One gradient check (after combine): the executor's accumulated gradients against the
/// reference step, computed on rank 0; the difference on every rank.
double check_gradients(gpt::model& m,
                       const gpt::dataset& data,
                       const pipelined_gpt& exec,
                       double& ref_loss) {
  double diff = 0.0;
  ref_loss = 0.0;
  if (root()) {
    const auto ref = gpt::reference_gradients(m, data, ref_loss);
    diff = gpt::max_rel_diff(exec, ref);
  }
  return shared_value(diff);
}

/// `store` mode: each chunk's store of one micro-batch against the memory model. Its blocks
/// hold M_W = 16·s·b·h elements each (transformer_costs, at 8-byte elements); the LM head adds
/// its input and output gradient, s·b·(h + vocab). False when they differ.
bool check_store_bytes(const pipelined_gpt& exec, const gpt::model& m) {
  const gpt::config& c = m.cfg;
  std::vector<double> got(m.chunks.size());
  for (std::size_t g = 0; g < got.size(); ++g) {
    got[g] = static_cast<double>(exec.store_bytes(static_cast<global_chunk>(g)));
  }
  share_max(got);
  pipesched::transformer_dims dims;
  dims.hidden = static_cast<std::uint64_t>(c.d_model);
  dims.heads = static_cast<std::uint64_t>(c.heads);
  dims.sequence = static_cast<std::uint64_t>(c.seq);
  dims.microbatch = static_cast<std::uint64_t>(c.batch);
  dims.layers = static_cast<std::uint32_t>(c.blocks_per_chunk);
  dims.activation_bytes = sizeof(double);
  const double m_w = pipesched::transformer_costs(dims).memory.weight_grad_input;
  const double head = static_cast<double>(c.seq * c.batch * (c.d_model + c.vocab)) * 8.0;
  bool ok = true;
  std::string line = "  W store of one micro-batch, bytes (M_W: transformer_costs at 8 bytes):";
  for (std::size_t g = 0; g < got.size(); ++g) {
    const bool last = m.chunks[g]->head != nullptr;  // each route's last chunk
    const double want = m_w + (last ? head : 0.0);
    ok = ok && got[g] == want;
    char buf[160];
    std::snprintf(buf, sizeof buf, " chunk %zu %.0f (M_W %.0f", g, got[g], m_w);
    line += buf;
    if (last) {
      std::snprintf(buf, sizeof buf, " + head %.0f", head);
      line += buf;
    }
    line += got[g] == want ? ")" : ", MISMATCH)";
  }
  say("%s\n", line.c_str());
  return ok;
}

struct outcome {
  double max_diff = 0.0;
  bool ok = false;
};

/// Trains `opt.steps` steps of `sched` (gradients checked every step) with a model built for it.
outcome train(const pipesched::schedule& sched, const options& opt, split_mode split) {
  const gpt::config cfg = config_for(sched, opt);
  const pipesched::placement& pl = sched.layout();
  gpt::model m(cfg, pl.route_length(), pl.routes());
  const gpt::dataset data = gpt::make_dataset(cfg, sched.microbatches());
  say("%s%s: p=%u m=%u v=%u, %zu blocks (d_model %lld, %lld heads, seq %lld, vocab %lld), "
      "%lld parameters, micro-batch %lld, --split %s\n",
      sched.name().c_str(), sched.has_comm() ? " (lowered)" : "", sched.stages(),
      sched.microbatches(), sched.chunks(), m.blocks(), static_cast<long long>(cfg.d_model),
      static_cast<long long>(cfg.heads), static_cast<long long>(cfg.seq),
      static_cast<long long>(cfg.vocab), static_cast<long long>(m.parameter_count()),
      static_cast<long long>(cfg.batch), gpt::to_string(split));
  if (pl.routes() > 1) {
    say("  %u routes, each through its own copy of the model; each copy applies a block's "
        "gradient summed over the copies\n",
        pl.routes());
  }
  outcome out;
  bool store_ok = true;
  std::vector<double> losses;
  for (int step = 0; step < opt.steps; ++step) {
    pipelined_gpt exec(m, data, split, opt.perturb);
    execute(exec, sched, /*validate=*/true);
    double loss = 0.0;
    double stashed = 0.0;
    combine(exec, pl, loss, stashed);
    double ref_loss = 0.0;
    const double diff = check_gradients(m, data, exec, ref_loss);
    out.max_diff = std::max(out.max_diff, stashed == 0.0 ? diff : HUGE_VAL);
    losses.push_back(loss);
    say("  step %d  loss=%.12f  (reference %.12f)  grad_rel_diff=%.3g%s\n", step, loss, ref_loss,
        diff, stashed == 0.0 ? "" : "  (graphs or stores left stashed!)");
    if (step == 0 && split == split_mode::store) {
      store_ok = check_store_bytes(exec, m);
    }
    gpt::sgd_step(m, exec, opt.lr);
  }
  const bool fell = losses.size() < 2 || losses.back() < losses.front();
  if (!fell) {
    say("  FAIL: the loss did not fall\n");
  }
  if (!store_ok) {
    say("  FAIL: the W store is not the memory model's M_W\n");
  }
  const bool match = out.max_diff <= tolerance;
  if (!match) {
    say("  FAIL: gradients differ from the reference by %.3g\n", out.max_diff);
  }
  out.ok = fell && match && store_ok;
  return out;
}

// --- Timing ----------------------------------------------------------------------------------

/// What timed runs of one schedule measured: per-run makespans and the per-stage costs.
struct measurement {
  std::vector<double> makespans_ms;
  std::vector<pipesched::op_costs> stage_ms;  ///< median over micro-batches and runs
  pipesched::cost_model costs;                ///< the same as a cost model
  double simulated_ms = 0.0;                  ///< simulate(sched, costs).makespan
  double grad_diff = 0.0;  ///< of the last timed run, against the unpipelined step
};

/// Timed runs of one schedule on its own copy of the model (built from the seed). Two timers
/// can take turns, so that both schedules see the same load.
class timer {
 public:
  timer(const pipesched::schedule& sched, const options& opt, split_mode split, std::string label)
      : sched_(&sched),
        label_(std::move(label)),
        cfg_(config_for(sched, opt)),
        model_(cfg_, sched.layout().route_length(), sched.layout().routes()),
        data_(gpt::make_dataset(cfg_, sched.microbatches())),
        exec_(model_, data_, split, opt.perturb),
        samples_(sched.stages(), sched.chunks()) {
    for (int i = 0; i < opt.warmup; ++i) {
      exec_.zero_grad();
      execute(exec_, sched, /*validate=*/false);
    }
  }

  /// One timed run (validated by the untimed runs; kept out of the makespan).
  void run() {
    exec_.zero_grad();
    makespans_ms_.push_back(execute(exec_, *sched_, /*validate=*/false, &samples_) * 1e3);
  }

  /// The runs so far, checked against the unpipelined step; then forgets them.
  measurement take() {
    measurement out;
    out.makespans_ms = std::move(makespans_ms_);
    makespans_ms_.clear();
    double loss = 0.0;
    double stashed = 0.0;
    combine(exec_, sched_->layout(), loss, stashed);
    double ref_loss = 0.0;
    out.grad_diff = check_gradients(model_, data_, exec_, ref_loss);
    if (stashed != 0.0) {
      out.grad_diff = HUGE_VAL;
    }
    out.stage_ms = stage_costs(samples_);
    samples_.clear();
    out.costs = pipesched::cost_model::uniform(1, 1, 1, 0).set_stage_costs(out.stage_ms);
    out.simulated_ms = pipesched::simulate(*sched_, out.costs).makespan;
    return out;
  }
  const pipesched::schedule& sched() const { return *sched_; }
  const std::string& label() const { return label_; }

 private:
  const pipesched::schedule* sched_;
  std::string label_;
  gpt::config cfg_;
  gpt::model model_;
  gpt::dataset data_;
  pipelined_gpt exec_;
  gpt::cost_samples samples_;
  std::vector<double> makespans_ms_;
};

/// One line per run: measured makespan (median, min, max over the timed runs), the simulated
/// makespan from `plan_costs` (the costs the schedule is judged by) and their ratio; and the
/// simulation from the run's own measured costs.
void print_measurement(const char* prefix,
                       const std::string& label,
                       const pipesched::schedule& sched,
                       const measurement& r,
                       const pipesched::cost_model& plan_costs) {
  const double measured = gpt::median(r.makespans_ms);
  const double simulated = pipesched::simulate(sched, plan_costs).makespan;
  const auto [lo, hi] = std::minmax_element(r.makespans_ms.begin(), r.makespans_ms.end());
  say("%s %s: measured makespan %.3f ms (median of %zu runs, min %.3f, max %.3f), "
      "simulated from the measured costs %.3f ms, measured/simulated %.3f "
      "(simulated from this run's own op times %.3f ms), grad_rel_diff=%.3g\n",
      prefix, label.c_str(), measured, r.makespans_ms.size(), *lo, *hi, simulated,
      simulated > 0.0 ? measured / simulated : 0.0, r.simulated_ms, r.grad_diff);
}

void print_costs(const std::string& label, const measurement& r, int repeat) {
  say("%s: measured costs (ms per stage, median over micro-batches and %d runs):\n", label.c_str(),
      repeat);
  double sum_bw = 0.0;
  for (std::size_t s = 0; s < r.stage_ms.size(); ++s) {
    const auto& c = r.stage_ms[s];
    say("  stage %zu: T_F %.4f  T_B %.4f  T_W %.4f  (T_B + T_W %.4f)\n", s, c.forward,
        c.backward_input, c.backward_weight, c.backward_input + c.backward_weight);
    sum_bw += c.backward_input + c.backward_weight;
  }
  say("  sum over stages of T_B + T_W: %.4f ms\n", sum_bw);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// The schedule as run: lowered with --lowered (under MPI its SEND ops are then synchronous).
pipesched::schedule maybe_lower(pipesched::schedule s,
                                bool lowered,
                                const pipesched::cost_model& costs) {
  if (!lowered) {
    return s;
  }
  pipesched::lowering_options lo;
  lo.costs = costs;
  return pipesched::lower_communication(s, lo);
}

/// --profile / --replan: measure `sched`, write its costs, re-plan each of `opt.replan` from
/// the file, check it, and time them all in turns. Returns the worst gradient difference seen.
double profile_and_replan(const pipesched::schedule& sched, const options& opt, bool& ok) {
  const std::string base_label = sched.name() + (sched.has_comm() ? " (lowered)" : "");
  timer before_timer(sched, opt, opt.split, base_label);
  for (int r = 0; r < opt.repeat; ++r) {
    before_timer.run();
  }
  const measurement profile = before_timer.take();
  if (root()) {
    std::ofstream out(opt.profile, std::ios::binary);
    out << pipesched::write_cost_model(profile.costs) << "\n";
    if (!out) {
      throw std::runtime_error("cannot write " + opt.profile);
    }
  }
  print_costs(base_label, profile, opt.repeat);
  say("wrote %s\n", opt.profile.c_str());
  print_measurement("profile:", base_label, sched, profile, profile.costs);
  double worst = profile.grad_diff;
  if (opt.replan.empty()) {
    return worst;
  }
  // The loop: each re-planned schedule is generated from the cost model as written to the file
  // (read by rank 0, which wrote it; every rank generates the same schedules from its text).
  const pipesched::cost_model costs =
      pipesched::read_cost_model(shared_text(root() ? read_file(opt.profile) : std::string()));
  std::vector<std::unique_ptr<pipesched::schedule>> planned;
  for (const std::string& name : opt.replan) {
    const auto& entry = pipesched::default_registry().at(name);
    pipesched::generator_params params;
    params.stages = sched.stages();
    params.microbatches = sched.microbatches();
    params.chunks = entry.default_chunks;
    params.costs = costs;
    pipesched::schedule next = entry.generate_result(params).sched;
    next.set_name(entry.name);
    planned.push_back(
        std::make_unique<pipesched::schedule>(maybe_lower(std::move(next), opt.lowered, costs)));
    const outcome checked = train(*planned.back(), opt, opt.split);
    ok = ok && checked.ok;
    worst = std::max(worst, checked.max_diff);
  }
  // All take turns, so that a change of the machine's load hits each alike.
  std::unique_ptr<timer> fused_timer;
  if (opt.fused_baseline && opt.split != split_mode::fused) {
    fused_timer = std::make_unique<timer>(sched, opt, split_mode::fused, base_label + " (fused)");
  }
  std::vector<std::unique_ptr<timer>> timers;
  for (const auto& p : planned) {
    timers.push_back(std::make_unique<timer>(*p, opt, opt.split,
                                             p->name() + (p->has_comm() ? " (lowered)" : "")));
  }
  for (int r = 0; r < opt.repeat; ++r) {
    before_timer.run();
    if (fused_timer) {
      fused_timer->run();
    }
    for (auto& t : timers) {
      t->run();
    }
  }
  const measurement before = before_timer.take();
  worst = std::max(worst, before.grad_diff);
  std::vector<measurement> after;
  for (auto& t : timers) {
    after.push_back(t->take());
    worst = std::max(worst, after.back().grad_diff);
  }
  for (std::size_t i = 0; i < timers.size(); ++i) {
    print_costs(timers[i]->label(), after[i], opt.repeat);
  }
  std::optional<measurement> fused;
  if (fused_timer) {
    fused = fused_timer->take();
    worst = std::max(worst, fused->grad_diff);
    print_costs(fused_timer->label(), *fused, opt.repeat);
  }
  say("alternating runs, %d each:\n", opt.repeat);
  print_measurement("before:", base_label, sched, before, costs);
  if (fused) {
    print_measurement("before:", fused_timer->label(), sched, *fused, costs);
  }
  // Each re-planned schedule's prediction from the costs it was planned with (the file).
  for (std::size_t i = 0; i < timers.size(); ++i) {
    print_measurement("after: ", timers[i]->label(), timers[i]->sched(), after[i], costs);
  }
  // Gains against the profiled schedule (and its fused form), measured and predicted by the
  // simulator from the profile; the prediction for the fused form is the same.
  const double sb = pipesched::simulate(sched, costs).makespan;
  for (std::size_t i = 0; i < timers.size(); ++i) {
    const double ma = gpt::median(after[i].makespans_ms);
    const double sa = pipesched::simulate(timers[i]->sched(), costs).makespan;
    const double predicted_gain = sb > 0.0 ? 1.0 - sa / sb : 0.0;
    auto gain_line = [&](const std::string& from, const measurement& base) {
      const double mb = gpt::median(base.makespans_ms);
      const double measured_gain = mb > 0.0 ? 1.0 - ma / mb : 0.0;
      say("replan %s -> %s: measured makespan x%.3f, simulated x%.3f\n", from.c_str(),
          timers[i]->label().c_str(), mb > 0.0 ? ma / mb : 0.0, sb > 0.0 ? sa / sb : 0.0);
      say("gain %s -> %s: measured %.1f %%, predicted %.1f %%, measured/predicted %.2f\n",
          from.c_str(), timers[i]->label().c_str(), 100.0 * measured_gain, 100.0 * predicted_gain,
          predicted_gain != 0.0 ? measured_gain / predicted_gain : 0.0);
    };
    gain_line(base_label, before);
    if (fused) {
      gain_line(fused_timer->label(), *fused);
    }
  }
  return worst;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) {
      out.push_back(item);
    }
  }
  return out;
}

}  // namespace

int run(int argc, char** argv) {
  options opt;
  std::string split = "store";
  std::string replan;
  CLI::App app{"Train a small GPT-like model (libtorch) through a pipeline schedule"};
  app.add_option("--schedule,-s", opt.schedule, "registered schedule name, or 'all'")->required();
  if (const std::optional<std::uint32_t> fixed = fixed_stages()) {
    opt.stages = *fixed;
  } else {
    app.add_option("--stages,-p", opt.stages, "pipeline stages")->check(CLI::Range(1u, 64u));
  }
  app.add_option("--microbatches,-m", opt.microbatches, "micro-batches")
      ->check(CLI::Range(1u, 4096u));
  app.add_flag("--lowered", opt.lowered,
               "run the communication-lowered schedule (explicit SEND/RECV ops; under MPI "
               "synchronous sends, otherwise MPI_Isend as each F and B ends)");
  app.add_option("--split", split,
                 "how the backward is split: fused (BW as one autograd::grad), autograd (W a "
                 "second autograd::grad over the kept graph) or store (W from each linear "
                 "layer's stored input and output gradient)")
      ->check(CLI::IsMember({"fused", "autograd", "store"}));
  app.add_option("--steps", opt.steps, "training steps (SGD), each checked")
      ->check(CLI::Range(1, 1000));
  app.add_option("--lr", opt.lr, "SGD learning rate")->check(CLI::Range(0.0, 10.0));
  app.add_option("--layers", opt.layers,
                 "transformer blocks in all, split evenly over the p*v chunks "
                 "(default: --blocks-per-chunk per chunk)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{4096}));
  app.add_option("--blocks-per-chunk", opt.cfg.blocks_per_chunk, "blocks per chunk")
      ->check(CLI::Range(std::size_t{1}, std::size_t{64}));
  app.add_option("--vocab", opt.cfg.vocab, "vocabulary size")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 20));
  app.add_option("--d-model", opt.cfg.d_model, "hidden size")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 14));
  app.add_option("--heads", opt.cfg.heads, "attention heads (divides --d-model)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1024}));
  app.add_option("--seq", opt.cfg.seq, "tokens per sequence")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 14));
  app.add_option("--batch", opt.cfg.batch, "sequences per micro-batch")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 14));
  app.add_option("--seed", opt.cfg.seed, "seed of the weights and the data");
  app.add_option("--profile", opt.profile,
                 "time the schedule and write the measured per-stage costs (ms) as a "
                 "cost-model JSON file");
  app.add_option("--replan", replan,
                 "with --profile: generate these schedules (comma-separated) from the measured "
                 "costs, check them and time them against the profiled one in turns");
  app.add_flag("--fused-baseline", opt.fused_baseline,
               "with --replan: also time the profiled schedule with --split fused");
  app.add_option("--repeat", opt.repeat, "timed runs for --profile / --replan")
      ->check(CLI::Range(1, 10000));
  app.add_option("--warmup", opt.warmup, "untimed runs before them")->check(CLI::Range(0, 10000));
  app.add_option("--perturb", opt.perturb,
                 "scale the pipelined loss by 1+X: the gradient check must then fail (a test)")
      ->check(CLI::Range(-0.5, 0.5));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (root()) {
      return app.exit(e);
    }
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  opt.split = split == "fused"      ? split_mode::fused
              : split == "autograd" ? split_mode::autograd
                                    : split_mode::store;
  opt.replan = split_list(replan);

  auto refuse = [&](const std::string& why) {
    if (root()) {
      std::fprintf(stderr, "%s: %s\n", program, why.c_str());
    }
    return 2;
  };
  if (opt.cfg.d_model % opt.cfg.heads != 0) {
    return refuse("--heads (" + std::to_string(opt.cfg.heads) + ") must divide --d-model (" +
                  std::to_string(opt.cfg.d_model) + ")");
  }
  if (!opt.replan.empty() && opt.profile.empty()) {
    return refuse("--replan needs --profile FILE (the measured costs)");
  }
  if (!opt.profile.empty() && opt.schedule == "all") {
    return refuse("--profile needs one schedule, not 'all'");
  }
  const auto& registry = pipesched::default_registry();
  for (const std::string& name : opt.replan) {
    const auto* from = registry.find(opt.schedule);
    const auto* to = registry.find(name);
    if (to == nullptr) {
      return refuse("--replan: unknown schedule \"" + name + "\"");
    }
    if (opt.layers == 0 && from && from->default_chunks != to->default_chunks) {
      return refuse(opt.schedule + " has " + std::to_string(from->default_chunks) +
                    " chunks per stage and " + name + " " + std::to_string(to->default_chunks) +
                    ": give --layers (a multiple of both p*v) so that both run the same model");
    }
  }
  // One thread per stage, each running its ops alone: no intra-op or inter-op pools.
  torch::set_num_threads(1);
  torch::set_num_interop_threads(1);

  std::vector<const pipesched::generator_entry*> entries;
  try {
    entries = training_schedules::named(opt.schedule);
  } catch (const std::exception& e) {
    return refuse(e.what());
  }

  training_schedules::tally t;
  for (const auto* entry : entries) {
    pipesched::schedule sched;
    try {
      sched = training_schedules::generate(*entry, opt.stages, opt.microbatches);
      sched = maybe_lower(std::move(sched), opt.lowered, pipesched::cost_model{});
      config_for(sched, opt);  // --layers fits
    } catch (const pipesched::invalid_argument& e) {
      if (entries.size() == 1) {
        return refuse(e.what());
      }
      say("skip %s: %s\n", entry->name.c_str(), e.what());
      continue;
    }
    try {
      const outcome o = train(sched, opt, opt.split);
      t.worst = std::max(t.worst, o.max_diff);
      t.failed += o.ok ? 0 : 1;
      if (!opt.profile.empty()) {
        bool ok = true;
        const double d = profile_and_replan(sched, opt, ok);
        t.worst = std::max(t.worst, d);
        if (!ok || d > tolerance) {
          say("  FAIL: profile / replan: gradients differ by %.3g\n", d);
          ++t.failed;
        }
      }
    } catch (const std::exception& e) {
      t.threw(entry->name, e);
    }
    ++t.trained;
  }
  const bool ok = t.report(root(), opt.stages, opt.microbatches, "the unpipelined step");
  return ok && t.worst <= tolerance ? 0 : 1;
}

}  // namespace torch_pipeline
