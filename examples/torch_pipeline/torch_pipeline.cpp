// Trains a small GPT-like model (libtorch, double precision) through any registered pipeline
// schedule, one thread per stage, with a real split backward: B is the input gradient
// (autograd::grad w.r.t. the chunk's input, graph kept), W the weight gradient (autograd::grad
// w.r.t. the chunk's parameters, graph released). Checks the accumulated gradients against an
// unpipelined step on the same mini-batch; can measure the real F/B/W costs, write them as a
// cost model and re-plan a schedule from them (docs/torch_pipeline.md).
//   torch_pipeline --schedule zb-h1 --stages 2 --microbatches 8
//   torch_pipeline --schedule all --stages 4 --microbatches 8 --lowered
//   torch_pipeline -s 1f1b -p 2 -m 8 --profile costs.json --replan zb-auto
// Last line: max_grad_rel_diff=<x>; exit status 1 when x > 1e-10, the loss did not fall over
// several --steps, or a run failed; 2 for bad input.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <torch/torch.h>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include <pipesched/analysis/timing_simulator.hpp>
#include <pipesched/exec/executor.hpp>
#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#if __has_include(<pipesched/io/cost_model_json.hpp>)
#include <pipesched/io/cost_model_json.hpp>
#else
#include <pipesched/io/model_json.hpp>
#endif
#include <pipesched/transform/comm_lowering.hpp>

#include "gpt.hpp"

namespace {

constexpr double tolerance = 1e-10;

using pipesched::global_chunk;
using pipesched::op;
using pipesched::op_kind;

/// The pipelined model: a pipesched executor of the context form. The op_context names the op's
/// global chunk g (model.chunks[g]) and whether it is the first (reads the tokens) or the last
/// (computes the loss), so the executor keeps no copy of the schedule or its placement. Each
/// stage touches only the state of its own chunks, so run() is safe to call concurrently for
/// different stages.
class pipelined_gpt {
 public:
  struct message {
    torch::Tensor t;  ///< an activation (F) or a gradient (B); undefined when empty
  };

  /// `perturb`: scale the loss by 1 + perturb (0: exact; a test that the check can fail).
  pipelined_gpt(gpt::model& m, const gpt::dataset& data, double perturb = 0.0)
      : model_(&m),
        data_(&data),
        chunks_(m.chunks.size()),
        scale_((1.0 + perturb) / static_cast<double>(static_cast<std::int64_t>(data.inputs.size()) *
                                                     m.cfg.batch * m.cfg.seq)) {
    for (std::size_t g = 0; g < chunks_.size(); ++g) {
      chunks_[g].params = m.chunks[g]->parameters();
    }
    zero_grad();
  }

  message run(const pipesched::op_context& ctx, message&& in) {
    if (ctx.chunk >= chunks_.size()) {
      throw std::invalid_argument("global chunk " + std::to_string(ctx.chunk) +
                                  " is outside the model (" + std::to_string(chunks_.size()) +
                                  " chunks)");
    }
    return run_chunk(ctx.chunk, ctx.first_chunk, ctx.last_chunk, ctx.o, std::move(in));
  }

  /// Zeroes the accumulated gradients and the loss (the start of a training step).
  void zero_grad() {
    torch::NoGradGuard no_grad;
    for (auto& c : chunks_) {
      c.grads.clear();
      for (const auto& p : c.params) {
        c.grads.push_back(torch::zeros_like(p));
      }
      c.loss = 0.0;
      c.bw_input_seconds.clear();
    }
  }
  /// Loss summed over the micro-batches since zero_grad() (kept by the last chunk).
  double loss() const { return chunks_.back().loss; }
  /// Accumulated weight gradients of global chunk g, in chunk->parameters() order.
  const std::vector<torch::Tensor>& grads(global_chunk g) const { return chunks_.at(g).grads; }
  /// Graphs still held for a B or W that never ran (0 after a complete iteration).
  std::size_t stashed() const {
    std::size_t n = 0;
    for (const auto& c : chunks_) {
      n += c.after_f.size() + c.after_b.size();
    }
    return n;
  }
  /// How long the B half of the BW op of (g, mb) took, in seconds (for profiles of schedules
  /// that fuse B and W); nullopt when that op did not run since zero_grad().
  std::optional<double> bw_input_seconds(global_chunk g, std::uint32_t mb) const {
    const auto& m = chunks_.at(g).bw_input_seconds;
    const auto it = m.find(mb);
    return it == m.end() ? std::nullopt : std::optional<double>(it->second);
  }

 private:
  /// What F keeps for B (input leaf and output), and B for W (output and its gradient): the
  /// autograd graph between them stays alive through `output`.
  struct saved {
    torch::Tensor input;     ///< F's input as a leaf requiring grad (undefined for chunk 0)
    torch::Tensor output;    ///< F's output, or the micro-batch's loss for the last chunk
    torch::Tensor grad_out;  ///< dL/d(output), set by B
  };
  struct chunk_state {
    std::vector<torch::Tensor> params;
    std::vector<torch::Tensor> grads;
    std::map<std::uint32_t, saved> after_f;  ///< per micro-batch, between F and B
    std::map<std::uint32_t, saved> after_b;  ///< per micro-batch, between B and W
    std::map<std::uint32_t, double> bw_input_seconds;
    double loss = 0.0;
  };

  message run_chunk(global_chunk g, bool first, bool last, const op& o, message&& in) {
    chunk_state& c = chunks_[g];
    switch (o.kind) {
      case op_kind::forward:
        return forward(g, c, first, last, o.mb, std::move(in));
      case op_kind::backward_input:
        return backward_input(c, first, last, o.mb, std::move(in));
      case op_kind::backward_weight:
        backward_weight(c, o.mb);
        return {};
      case op_kind::backward_full: {
        const auto t0 = std::chrono::steady_clock::now();
        message gx = backward_input(c, first, last, o.mb, std::move(in));
        const auto t1 = std::chrono::steady_clock::now();
        backward_weight(c, o.mb);
        c.bw_input_seconds[o.mb] = std::chrono::duration<double>(t1 - t0).count();
        return gx;
      }
      default:
        return std::move(in);  // SEND/RECV: the driver's transport moves the data
    }
  }

  message forward(
      global_chunk g, chunk_state& c, bool first, bool last, std::uint32_t mb, message&& in) {
    saved sv;
    torch::Tensor x;
    if (first) {
      x = data_->inputs.at(mb);
    } else {
      if (!in.t.defined()) {
        throw std::logic_error("F" + std::to_string(mb) + ": no input activation");
      }
      sv.input = in.t.detach().requires_grad_(true);
      x = sv.input;
    }
    const torch::Tensor y = model_->chunks[g]->forward(x);
    message out;
    if (last) {
      sv.output = gpt::loss(y, data_->targets.at(mb), scale_);
      c.loss += sv.output.item<double>();
    } else {
      sv.output = y;
      out.t = y.detach();  // the next chunk starts a graph of its own
    }
    if (!c.after_f.emplace(mb, std::move(sv)).second) {
      throw std::logic_error("F" + std::to_string(mb) + " ran twice");
    }
    return out;
  }

  message backward_input(chunk_state& c, bool first, bool last, std::uint32_t mb, message&& in) {
    const auto it = c.after_f.find(mb);
    if (it == c.after_f.end()) {
      throw std::logic_error("B" + std::to_string(mb) + " before its F");
    }
    saved sv = std::move(it->second);
    c.after_f.erase(it);
    if (last) {
      sv.grad_out = torch::ones_like(sv.output);
    } else {
      if (!in.t.defined()) {
        throw std::logic_error("B" + std::to_string(mb) + ": no output gradient");
      }
      sv.grad_out = std::move(in.t);
    }
    message gx;
    if (!first) {
      gx.t = torch::autograd::grad({sv.output}, {sv.input}, {sv.grad_out},
                                   /*retain_graph=*/true)[0];
    }
    sv.input = torch::Tensor();  // the graph keeps what W needs
    c.after_b.emplace(mb, std::move(sv));
    return gx;
  }

  void backward_weight(chunk_state& c, std::uint32_t mb) {
    const auto it = c.after_b.find(mb);
    if (it == c.after_b.end()) {
      throw std::logic_error("W" + std::to_string(mb) + " before its B");
    }
    const std::vector<torch::Tensor> g = torch::autograd::grad(
        {it->second.output}, c.params, {it->second.grad_out}, /*retain_graph=*/false);
    c.after_b.erase(it);  // the graph is released with the last reference to `output`
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < g.size(); ++i) {
      c.grads[i].add_(g[i]);
    }
  }

  gpt::model* model_;
  const gpt::dataset* data_;
  std::vector<chunk_state> chunks_;
  double scale_;
};

static_assert(pipesched::executor<pipelined_gpt>);

/// The unpipelined step: for each micro-batch in order, the whole model's forward, the loss and
/// one autograd::grad over every parameter, accumulated. Per global chunk, parameters() order.
std::vector<std::vector<torch::Tensor>> reference_gradients(gpt::model& m,
                                                            const gpt::dataset& data,
                                                            double& loss) {
  std::vector<torch::Tensor> params;
  for (const auto& ch : m.chunks) {
    const auto ps = ch->parameters();
    params.insert(params.end(), ps.begin(), ps.end());
  }
  std::vector<torch::Tensor> acc;
  for (const auto& p : params) {
    acc.push_back(torch::zeros_like(p));
  }
  const double scale = 1.0 / static_cast<double>(static_cast<std::int64_t>(data.inputs.size()) *
                                                 m.cfg.batch * m.cfg.seq);
  loss = 0.0;
  for (std::size_t j = 0; j < data.inputs.size(); ++j) {
    torch::Tensor x = data.inputs[j];
    for (const auto& ch : m.chunks) {
      x = ch->forward(x);
    }
    const torch::Tensor l = gpt::loss(x, data.targets[j], scale);
    loss += l.item<double>();
    const auto g = torch::autograd::grad({l}, params);
    torch::NoGradGuard no_grad;
    for (std::size_t i = 0; i < g.size(); ++i) {
      acc[i].add_(g[i]);
    }
  }
  std::vector<std::vector<torch::Tensor>> out;
  std::size_t at = 0;
  for (const auto& ch : m.chunks) {
    const std::size_t n = ch->parameters().size();
    out.emplace_back(acc.begin() + static_cast<std::ptrdiff_t>(at),
                     acc.begin() + static_cast<std::ptrdiff_t>(at + n));
    at += n;
  }
  return out;
}

/// max over parameter tensors of max|a − b| / max|b| (normwise relative difference); a NaN or
/// an infinity anywhere gives +inf.
double max_rel_diff(const pipelined_gpt& got, const std::vector<std::vector<torch::Tensor>>& ref) {
  double worst = 0.0;
  for (std::size_t g = 0; g < ref.size(); ++g) {
    const auto& a = got.grads(static_cast<global_chunk>(g));
    for (std::size_t i = 0; i < ref[g].size(); ++i) {
      const double diff = (a[i] - ref[g][i]).abs().max().item<double>();
      const double norm = ref[g][i].abs().max().item<double>();
      if (!std::isfinite(diff)) {
        return HUGE_VAL;
      }
      worst = std::max(worst, norm > 0.0 ? diff / norm : diff);
    }
  }
  return worst;
}

void sgd_step(gpt::model& m, const pipelined_gpt& exec, double lr) {
  torch::NoGradGuard no_grad;
  for (std::size_t g = 0; g < m.chunks.size(); ++g) {
    auto params = m.chunks[g]->parameters();
    const auto& grads = exec.grads(static_cast<global_chunk>(g));
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].sub_(grads[i] * lr);
    }
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
  std::string profile;
  std::string replan;
  int warmup = 1;
  int repeat = 5;
  double perturb = 0.0;  ///< the pipelined loss is scaled by 1 + perturb (checks the check)
};

/// The model for `sched`: --layers split evenly over its p·v chunks, or --blocks-per-chunk each.
gpt::config config_for(const pipesched::schedule& sched, const options& opt) {
  gpt::config c = opt.cfg;
  const std::size_t total = sched.layout().total_chunks();
  if (opt.layers != 0) {
    if (opt.layers % total != 0) {
      throw pipesched::invalid_argument("--layers (" + std::to_string(opt.layers) +
                                        ") must be a multiple of the schedule's p*v chunks (" +
                                        std::to_string(total) + ")");
    }
    c.blocks_per_chunk = opt.layers / total;
  }
  return c;
}

struct outcome {
  double max_diff = 0.0;
  bool ok = false;
};

/// One gradient check: the executor's accumulated gradients against the reference step.
double check_gradients(gpt::model& m,
                       const gpt::dataset& data,
                       const pipelined_gpt& exec,
                       double& ref_loss) {
  const auto ref = reference_gradients(m, data, ref_loss);
  return max_rel_diff(exec, ref);
}

/// Trains `opt.steps` steps of `sched` under run_threaded, checking every step's gradients.
outcome train(const pipesched::schedule& sched, const options& opt) {
  const gpt::config cfg = config_for(sched, opt);
  gpt::model m(cfg, sched.layout().total_chunks());
  const gpt::dataset data = gpt::make_dataset(cfg, sched.microbatches());
  std::printf(
      "%s%s: p=%u m=%u v=%u, %zu blocks (d_model %lld, %lld heads, seq %lld, vocab %lld), "
      "%lld parameters, micro-batch %lld\n",
      sched.name().c_str(), sched.has_comm() ? " (lowered)" : "", sched.stages(),
      sched.microbatches(), sched.chunks(), m.blocks(), static_cast<long long>(cfg.d_model),
      static_cast<long long>(cfg.heads), static_cast<long long>(cfg.seq),
      static_cast<long long>(cfg.vocab), static_cast<long long>(m.parameter_count()),
      static_cast<long long>(cfg.batch));
  outcome out;
  std::vector<double> losses;
  for (int step = 0; step < opt.steps; ++step) {
    pipelined_gpt exec(m, data, opt.perturb);
    pipesched::run_threaded(exec, sched);
    double ref_loss = 0.0;
    const double diff = check_gradients(m, data, exec, ref_loss);
    out.max_diff = std::max(out.max_diff, diff);
    losses.push_back(exec.loss());
    std::printf("  step %d  loss=%.12f  (reference %.12f)  grad_rel_diff=%.3g%s\n", step,
                exec.loss(), ref_loss, diff, exec.stashed() == 0 ? "" : "  (graphs left stashed!)");
    if (exec.stashed() != 0) {
      out.max_diff = HUGE_VAL;
    }
    sgd_step(m, exec, opt.lr);
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

double median(std::vector<double> v) {
  if (v.empty()) {
    return 0.0;
  }
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// What timed runs of one schedule measured: per-run makespans and the per-stage costs.
struct measurement {
  std::vector<double> makespans_ms;
  pipesched::cost_model costs;  ///< per stage, in ms (median over micro-batches and runs)
  double simulated_ms = 0.0;    ///< simulate(sched, costs).makespan
  double grad_diff = 0.0;       ///< of the last timed run, against the unpipelined step
};

/// Timed runs of one schedule on its own copy of the model (built from the seed), through
/// instrumented_executor. A stage's T_F is the sum over its chunks of the median F time over
/// micro-batches and runs (likewise T_B, T_W); the B and W halves of a fused BW are timed
/// inside the executor. Two timers can take turns, so that both schedules see the same load.
class timer {
 public:
  timer(const pipesched::schedule& sched, const options& opt)
      : sched_(&sched),
        cfg_(config_for(sched, opt)),
        model_(cfg_, sched.layout().total_chunks()),
        data_(gpt::make_dataset(cfg_, sched.microbatches())),
        exec_(model_, data_, opt.perturb),
        timed_(exec_, sched.stages()),
        samples_(std::size_t{sched.stages()} * sched.chunks() * 3) {
    no_validate_.validate = false;  // checked by the untimed runs; keep it out of the makespan
    for (int i = 0; i < opt.warmup; ++i) {
      exec_.zero_grad();
      pipesched::run_threaded(exec_, sched);
    }
  }

  /// One timed run: its makespan and op times are added to the measurement.
  void run() {
    exec_.zero_grad();
    timed_.restart();
    pipesched::run_threaded(timed_, *sched_, no_validate_);
    makespans_ms_.push_back(timed_.makespan() * 1e3);
    const auto& pl = sched_->layout();
    for (pipesched::stage_index s = 0; s < sched_->stages(); ++s) {
      for (const auto& t : timed_.timings(s)) {
        const std::size_t base = (std::size_t{s} * sched_->chunks() + t.o.chunk) * 3;
        const double d = t.end - t.start;
        switch (t.o.kind) {
          case op_kind::forward:
            samples_[base].push_back(d);
            break;
          case op_kind::backward_input:
            samples_[base + 1].push_back(d);
            break;
          case op_kind::backward_weight:
            samples_[base + 2].push_back(d);
            break;
          case op_kind::backward_full: {
            const double b = exec_.bw_input_seconds(pl.global(s, t.o.chunk), t.o.mb).value_or(0.0);
            samples_[base + 1].push_back(b);
            samples_[base + 2].push_back(std::max(0.0, d - b));
            break;
          }
          default:
            break;
        }
      }
    }
  }

  /// The runs so far, checked against the unpipelined step; then forgets them.
  measurement take() {
    measurement out;
    out.makespans_ms = std::move(makespans_ms_);
    makespans_ms_.clear();
    double ref_loss = 0.0;
    out.grad_diff = check_gradients(model_, data_, exec_, ref_loss);
    const std::uint32_t v = sched_->chunks();
    std::vector<pipesched::op_costs> per_stage(sched_->stages(),
                                               pipesched::op_costs{0.0, 0.0, 0.0});
    for (pipesched::stage_index s = 0; s < sched_->stages(); ++s) {
      for (std::uint32_t c = 0; c < v; ++c) {
        const std::size_t base = (std::size_t{s} * v + c) * 3;
        per_stage[s].forward += median(samples_[base]) * 1e3;
        per_stage[s].backward_input += median(samples_[base + 1]) * 1e3;
        per_stage[s].backward_weight += median(samples_[base + 2]) * 1e3;
      }
    }
    for (auto& list : samples_) {
      list.clear();
    }
    out.costs = pipesched::cost_model::uniform(1, 1, 1, 0).set_stage_costs(per_stage);
    out.simulated_ms = pipesched::simulate(*sched_, out.costs).makespan;
    return out;
  }

 private:
  const pipesched::schedule* sched_;
  gpt::config cfg_;
  gpt::model model_;
  gpt::dataset data_;
  pipelined_gpt exec_;
  pipesched::instrumented_executor<pipelined_gpt> timed_;
  pipesched::thread_driver_options no_validate_;
  std::vector<std::vector<double>> samples_;  ///< [(s*v + c)*3 + k], k: F, B, W; seconds
  std::vector<double> makespans_ms_;
};

/// One line per run: measured makespan (median, min, max over the timed runs), the simulated
/// makespan from `plan_costs` (the costs the schedule is judged by) and their ratio; and the
/// simulation from the run's own measured costs.
void print_measurement(const char* label,
                       const pipesched::schedule& sched,
                       const measurement& r,
                       const pipesched::cost_model& plan_costs) {
  const double measured = median(r.makespans_ms);
  const double simulated = pipesched::simulate(sched, plan_costs).makespan;
  const auto [lo, hi] = std::minmax_element(r.makespans_ms.begin(), r.makespans_ms.end());
  std::printf(
      "%s %s%s: measured makespan %.3f ms (median of %zu runs, min %.3f, max %.3f), "
      "simulated from the measured costs %.3f ms, measured/simulated %.3f "
      "(simulated from this run's own op times %.3f ms), grad_rel_diff=%.3g\n",
      label, sched.name().c_str(), sched.has_comm() ? " (lowered)" : "", measured,
      r.makespans_ms.size(), *lo, *hi, simulated, simulated > 0.0 ? measured / simulated : 0.0,
      r.simulated_ms, r.grad_diff);
}

void print_costs(const pipesched::schedule& sched, const measurement& r, int repeat) {
  std::printf("%s: measured costs (ms per stage, median over micro-batches and %d runs):\n",
              sched.name().c_str(), repeat);
  for (pipesched::stage_index s = 0; s < sched.stages(); ++s) {
    const auto c = r.costs.at(s);
    std::printf("  stage %u: T_F %.4f  T_B %.4f  T_W %.4f\n", s, c.forward, c.backward_input,
                c.backward_weight);
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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

/// --profile / --replan: measure `sched`, write its costs, re-plan `opt.replan` from the file
/// and measure that too. Returns the worst gradient difference seen (checked by the caller).
double profile_and_replan(const pipesched::schedule& sched, const options& opt, bool& ok) {
  timer before_timer(sched, opt);
  for (int r = 0; r < opt.repeat; ++r) {
    before_timer.run();
  }
  const measurement profile = before_timer.take();
  {
    std::ofstream out(opt.profile, std::ios::binary);
    out << pipesched::write_cost_model(profile.costs) << "\n";
    if (!out) {
      throw std::runtime_error("cannot write " + opt.profile);
    }
  }
  print_costs(sched, profile, opt.repeat);
  std::printf("wrote %s\n", opt.profile.c_str());
  print_measurement("profile:", sched, profile, profile.costs);
  double worst = profile.grad_diff;
  if (opt.replan.empty()) {
    return worst;
  }
  // The loop: the re-planned schedule is generated from the cost model as written to the file.
  const pipesched::cost_model costs = pipesched::read_cost_model(read_file(opt.profile));
  const auto& entry = pipesched::default_registry().at(opt.replan);
  pipesched::generator_params params;
  params.stages = sched.stages();
  params.microbatches = sched.microbatches();
  params.chunks = entry.default_chunks;
  params.costs = costs;
  pipesched::schedule next = entry.generate_result(params).sched;
  next.set_name(entry.name);
  next = maybe_lower(std::move(next), opt.lowered, costs);
  const outcome checked = train(next, opt);
  ok = ok && checked.ok;
  worst = std::max(worst, checked.max_diff);
  // Before and after take turns, so that a change of the machine's load hits both alike.
  timer after_timer(next, opt);
  for (int r = 0; r < opt.repeat; ++r) {
    before_timer.run();
    after_timer.run();
  }
  const measurement before = before_timer.take();
  const measurement after = after_timer.take();
  worst = std::max({worst, before.grad_diff, after.grad_diff});
  print_costs(next, after, opt.repeat);
  std::printf("alternating runs, %d each:\n", opt.repeat);
  print_measurement("before:", sched, before, costs);
  // The re-planned schedule's prediction from the costs it was planned with (the file).
  print_measurement("after: ", next, after, costs);
  const double mb = median(before.makespans_ms);
  const double ma = median(after.makespans_ms);
  const double sb = pipesched::simulate(sched, costs).makespan;
  const double sa = pipesched::simulate(next, costs).makespan;
  std::printf("replan %s -> %s: measured makespan x%.3f, simulated x%.3f\n", sched.name().c_str(),
              next.name().c_str(), mb > 0.0 ? ma / mb : 0.0, sb > 0.0 ? sa / sb : 0.0);
  return worst;
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{"Train a small GPT-like model (libtorch) through a pipeline schedule"};
  app.add_option("--schedule,-s", opt.schedule, "registered schedule name, or 'all'")->required();
  app.add_option("--stages,-p", opt.stages, "pipeline stages")->check(CLI::Range(1u, 64u));
  app.add_option("--microbatches,-m", opt.microbatches, "micro-batches")
      ->check(CLI::Range(1u, 4096u));
  app.add_flag("--lowered", opt.lowered,
               "run the communication-lowered schedule (explicit SEND/RECV ops)");
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
                 "time the schedule through instrumented_executor and write the measured "
                 "per-stage costs (ms) as a cost-model JSON file");
  app.add_option("--replan", opt.replan,
                 "with --profile: generate this schedule from the measured costs and run it");
  app.add_option("--repeat", opt.repeat, "timed runs for --profile / --replan")
      ->check(CLI::Range(1, 10000));
  app.add_option("--warmup", opt.warmup, "untimed runs before them")->check(CLI::Range(0, 10000));
  app.add_option("--perturb", opt.perturb,
                 "scale the pipelined loss by 1+X: the gradient check must then fail (a test)")
      ->check(CLI::Range(-0.5, 0.5));
  CLI11_PARSE(app, argc, argv);

  if (opt.cfg.d_model % opt.cfg.heads != 0) {
    std::fprintf(stderr, "torch_pipeline: --heads (%lld) must divide --d-model (%lld)\n",
                 static_cast<long long>(opt.cfg.heads), static_cast<long long>(opt.cfg.d_model));
    return 2;
  }
  if (!opt.replan.empty() && opt.profile.empty()) {
    std::fprintf(stderr, "torch_pipeline: --replan needs --profile FILE (the measured costs)\n");
    return 2;
  }
  if (!opt.profile.empty() && opt.schedule == "all") {
    std::fprintf(stderr, "torch_pipeline: --profile needs one schedule, not 'all'\n");
    return 2;
  }
  if (!opt.replan.empty() && opt.layers == 0) {
    const auto* from = pipesched::default_registry().find(opt.schedule);
    const auto* to = pipesched::default_registry().find(opt.replan);
    if (from && to && from->default_chunks != to->default_chunks) {
      std::fprintf(stderr,
                   "torch_pipeline: %s has %u chunks per stage and %s %u: give --layers (a "
                   "multiple of both p*v) so that both run the same model\n",
                   opt.schedule.c_str(), from->default_chunks, opt.replan.c_str(),
                   to->default_chunks);
      return 2;
    }
  }
  // One thread per stage, each running its ops alone: no intra-op or inter-op pools.
  torch::set_num_threads(1);
  torch::set_num_interop_threads(1);

  const auto& registry = pipesched::default_registry();
  std::vector<const pipesched::generator_entry*> entries;
  try {
    if (opt.schedule == "all") {
      for (const auto& e : registry.entries()) {
        entries.push_back(&e);
      }
    } else {
      entries.push_back(&registry.at(opt.schedule));
    }
    if (!opt.replan.empty()) {
      registry.at(opt.replan);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "torch_pipeline: %s\n", e.what());
    return 2;
  }

  double worst = 0.0;
  int trained = 0;
  int failed = 0;
  for (const auto* entry : entries) {
    pipesched::generator_params params;
    params.stages = opt.stages;
    params.microbatches = opt.microbatches;
    params.chunks = entry->default_chunks;
    pipesched::schedule sched;
    try {
      sched = entry->generate(params);
      sched.set_name(entry->name);
      sched = maybe_lower(std::move(sched), opt.lowered, params.costs);
      config_for(sched, opt);  // --layers fits
    } catch (const pipesched::invalid_argument& e) {
      if (entries.size() == 1) {
        std::fprintf(stderr, "torch_pipeline: %s\n", e.what());
        return 2;
      }
      std::printf("skip %s: %s\n", entry->name.c_str(), e.what());
      continue;
    }
    try {
      const outcome o = train(sched, opt);
      worst = std::max(worst, o.max_diff);
      failed += o.ok ? 0 : 1;
      if (!opt.profile.empty()) {
        bool ok = true;
        const double d = profile_and_replan(sched, opt, ok);
        worst = std::max(worst, d);
        if (!ok || d > tolerance) {
          std::printf("  FAIL: profile / replan: gradients differ by %.3g\n", d);
          ++failed;
        }
      }
    } catch (const std::exception& e) {
      std::printf("  FAIL: %s: %s\n", entry->name.c_str(), e.what());
      worst = HUGE_VAL;
      ++failed;
    }
    ++trained;
  }
  if (trained == 0) {
    std::printf("FAIL: no schedule could be built for p=%u m=%u\n", opt.stages, opt.microbatches);
    failed = 1;
  } else if (failed == 0) {
    std::printf("ok: %d schedule(s) trained, gradients match the unpipelined step\n", trained);
  } else {
    std::printf("FAIL: %d of %d schedule(s)\n", failed, trained);
  }
  std::printf("max_grad_rel_diff=%.3g\n", worst);
  return failed == 0 && worst <= tolerance ? 0 : 1;
}
