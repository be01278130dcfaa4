// Trains the MLP of examples/mlp_pipeline across MPI ranks, one rank per pipeline stage, with the
// communication-lowered schedule (SEND ops are MPI_Ssend, RECV ops matched receives), and checks
// the gradients against the unpipelined reference computed on rank 0.
//   mpirun -np 4 mlp_pipeline_mpi --schedule zb-h1 --microbatches 8
//   mpirun -np 4 mlp_pipeline_mpi --schedule 1f1b --microbatches 8 --trace run.json --trace-sim
//   sim.json
//   mpirun -np 4 mlp_pipeline_mpi --schedule zb-v --microbatches 8 --dynamic --memory-limit 4
// With --dynamic the schedule only gives the placement: each rank picks its next op at run time
// (run_mpi_dynamic: B, else an F the memory limit admits, else W, among the ops whose input has
// arrived), and rank 0 checks that the order that ran validates and fits the limit.
// Rank 0 prints, as its last line, max_grad_rel_diff=<x>; every rank exits with status 1 when
// x > 1e-12 or the loss did not fall, 2 on bad arguments.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <mpi.h>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/exec/mpi.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/io/chrome_trace.hpp>
#include <pipesched/io/timeline.hpp>
#include <pipesched/model/cost_model.hpp>
#include <pipesched/transform/comm_lowering.hpp>
#include <pipesched/transform/recompute.hpp>

#include "mlp.hpp"
#include "route_copies_mpi.hpp"

/// An activation or gradient crosses ranks as doubles: [rows, cols, values...].
template <>
struct pipesched::mpi_codec<mlp::matrix> {
  static void encode(const mlp::matrix& m, std::vector<std::byte>& out) {
    std::vector<double> flat{static_cast<double>(m.rows), static_cast<double>(m.cols)};
    flat.insert(flat.end(), m.v.begin(), m.v.end());
    mpi_codec<std::vector<double>>::encode(flat, out);
  }
  static mlp::matrix decode(std::span<const std::byte> bytes) {
    const std::vector<double> flat = mpi_codec<std::vector<double>>::decode(bytes);
    if (flat.size() < 2) {
      throw std::runtime_error("mpi_codec<matrix>: message of " + std::to_string(flat.size()) +
                               " doubles has no shape");
    }
    mlp::matrix m(static_cast<std::size_t>(flat[0]), static_cast<std::size_t>(flat[1]));
    if (m.v.size() != flat.size() - 2) {
      throw std::runtime_error("mpi_codec<matrix>: shape and payload size disagree");
    }
    std::copy(flat.begin() + 2, flat.end(), m.v.begin());
    return m;
  }
};
static_assert(pipesched::mpi_message<mlp::matrix>);

namespace {

constexpr double tolerance = 1e-12;

struct options {
  std::string schedule;
  std::uint32_t microbatches = 8;
  int steps = 3;
  mlp::settings model;
  std::string recv = "eager";
  std::string trace;
  std::string trace_sim;
  std::string inject_failure;          // "S:I": stage S throws at op I of the first step
  bool recompute = false;              // every chunk recomputed, R before its backward
  bool dynamic = false;                // run_mpi_dynamic on the schedule's placement
  std::optional<double> memory_limit;  // with --dynamic: per stage, in M_B units
};

/// The MLP with an optional injected failure (tests the abort path); the op_context's list
/// index says which op it is.
struct failing_mlp {
  using message = mlp::matrix;
  mlp::pipelined_mlp* inner;
  long fail_stage = -1;
  std::size_t fail_op = 0;

  message run(const pipesched::op_context& c, message&& in) {
    if (static_cast<long>(c.stage) == fail_stage && c.index == fail_op) {
      throw std::runtime_error("injected failure");
    }
    return inner->run(c, std::move(in));
  }
};

/// Mean measured duration of each compute kind, as the simulator's costs: the prediction then
/// differs from the measurement only by the schedule's dependencies and the transfers. The
/// means are per chunk; cost_model takes a stage's whole slice, so they are scaled by the
/// schedule's `chunks` per stage (and split back by the simulator).
pipesched::cost_model calibrated_costs(std::span<const pipesched::timed_op> timings,
                                       std::uint32_t chunks) {
  double sum[pipesched::op_kind_count] = {};
  double n[pipesched::op_kind_count] = {};
  for (const auto& t : timings) {
    if (pipesched::is_compute(t.o.kind)) {
      const auto k = static_cast<std::size_t>(t.o.kind);
      sum[k] += t.end - t.start;
      n[k] += 1;
    }
  }
  auto mean = [&](pipesched::op_kind k) {
    const auto i = static_cast<std::size_t>(k);
    return n[i] > 0 ? sum[i] / n[i] : 0.0;
  };
  const double f = mean(pipesched::op_kind::forward);
  double b = mean(pipesched::op_kind::backward_input);
  double w = mean(pipesched::op_kind::backward_weight);
  if (n[static_cast<std::size_t>(pipesched::op_kind::backward_full)] > 0 && b == 0.0 && w == 0.0) {
    // Only fused backwards ran: split them evenly (B and W do the same matrix work here).
    b = w = mean(pipesched::op_kind::backward_full) / 2;
  }
  const double v = chunks;
  return pipesched::cost_model::uniform(v * f, v * b, v * w);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text << '\n';
  if (!out) {
    throw std::runtime_error("cannot write " + path);
  }
}

/// Rank 0: the measured run (pid 0) and the simulator's prediction (its own file) as Chrome
/// traces, both in microseconds.
void write_traces(const pipesched::schedule& lowered,
                  std::span<const pipesched::timed_op> timings,
                  const options& opt) {
  const pipesched::timeline real = pipesched::timeline_from_measured(lowered, timings);
  const pipesched::cost_model costs = calibrated_costs(timings, lowered.chunks());
  const pipesched::timeline sim = pipesched::cost_timeline(lowered, costs);
  pipesched::chrome_trace_options copts;
  copts.time_scale = 1e6;  // seconds -> microseconds
  if (!opt.trace.empty()) {
    write_file(opt.trace, pipesched::to_chrome_trace(lowered, real, copts));
  }
  if (!opt.trace_sim.empty()) {
    pipesched::schedule named = lowered;
    named.set_name(lowered.name() + " (simulated)");
    write_file(opt.trace_sim, pipesched::to_chrome_trace(named, sim, copts));
  }
  const pipesched::op_costs c =
      costs.for_shape(lowered.stages(), lowered.chunks(), "mlp_pipeline_mpi").at(0, 0);
  std::printf(
      "timeline: measured makespan %.3f ms, simulated %.3f ms (mean F %.1f us, B %.1f us, "
      "W %.1f us, T_comm 0), %zu ops\n",
      real.makespan() * 1e3, sim.makespan() * 1e3, c.forward * 1e6, c.backward_input * 1e6,
      c.backward_weight * 1e6, real.size());
}

/// A number as %g.
std::string fmt_number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

/// Rank 0, --dynamic: the order run_mpi_dynamic ran must be a valid schedule of every op that
/// fits the memory limit (default memory model: M_B = 1, M_W = 0.5 per stage slice).
bool check_dynamic_order(const pipesched::schedule& ran, const options& opt) {
  const pipesched::validation_report v = pipesched::validate(ran);
  pipesched::memory_options mo;
  if (opt.memory_limit) {
    mo = pipesched::memory_options::with_limit(*opt.memory_limit);
  }
  const pipesched::memory_report m = pipesched::check_memory(ran, pipesched::memory_model{}, mo);
  const double peak = m.max_peak();
  std::printf("  dynamic order: %zu ops, %s, peak memory %.3g (limit %s)%s\n", ran.size(),
              v.ok() ? "valid" : "INVALID", peak,
              opt.memory_limit ? fmt_number(*opt.memory_limit).c_str() : "none",
              m.ok() ? "" : ", OVER THE LIMIT");
  for (const auto& x : v.violations) {
    std::printf("    %s\n", x.message.c_str());
  }
  return v.ok() && m.ok();
}

/// All ranks: trains for opt.steps steps. Returns rank 0's verdict (broadcast to every rank).
bool train(const pipesched::schedule& lowered, const options& opt, int rank, double& worst) {
  const auto& pl = lowered.layout();
  const mlp::settings& ms = opt.model;
  const mlp::dataset data = mlp::make_dataset(lowered.microbatches(), ms.batch, ms.width);
  // One copy of the model per route (route_copies.hpp), all equal at the start.
  std::vector<mlp::layer> layers = mlp::replicate(
      mlp::make_layers(pl.route_length(), ms.layers_per_chunk, ms.width), pl.routes());
  if (rank == 0 && opt.dynamic) {
    std::printf(
        "%s placement, dynamic order: %u ranks, m=%u chunks/rank=%u, %zu layers of %zux%zu, "
        "batch %zu per micro-batch, memory limit %s\n",
        lowered.name().c_str(), lowered.stages(), lowered.microbatches(), lowered.chunks(),
        layers.size(), ms.width, ms.width, ms.batch,
        opt.memory_limit ? fmt_number(*opt.memory_limit).c_str() : "none");
  } else if (rank == 0) {
    std::printf(
        "%s: %u ranks, m=%u chunks/rank=%u, %zu layers of %zux%zu, batch %zu per micro-batch, "
        "%zu ops after lowering (%s receives)\n",
        lowered.name().c_str(), lowered.stages(), lowered.microbatches(), lowered.chunks(),
        layers.size(), ms.width, ms.width, ms.batch, lowered.size(), opt.recv.c_str());
  }
  if (rank == 0 && pl.routes() > 1) {
    std::printf(
        "  %u routes, each through its own copy of the model's %zu layers; the ranks "
        "holding a block's copies sum their gradients (MPI_Allreduce), each applies "
        "the sum\n",
        pl.routes(), layers.size() / pl.routes());
  }
  failing_mlp wrapper;
  if (!opt.inject_failure.empty()) {
    const auto colon = opt.inject_failure.find(':');
    wrapper.fail_stage = std::stol(opt.inject_failure.substr(0, colon));
    wrapper.fail_op = std::stoul(opt.inject_failure.substr(colon + 1));
  }
  std::vector<double> losses;
  worst = 0.0;
  bool dynamic_ok = true;
  const double lr = mlp::step_size(ms.lr, pl);
  pipesched::mpi_run_result last;
  for (int step = 0; step < opt.steps; ++step) {
    mlp::zero_grads(layers);
    mlp::pipelined_mlp model(layers, ms.layers_per_chunk, data);
    wrapper.inner = &model;
    if (opt.dynamic) {
      pipesched::dynamic_run_options dyn;
      dyn.memory_limit = opt.memory_limit;
      last = pipesched::run_mpi_dynamic(wrapper, lowered.layout(), lowered.microbatches(), dyn);
      if (rank == 0 && !check_dynamic_order(last.ran, opt)) {
        dynamic_ok = false;
      }
    } else {
      last = pipesched::run_mpi(wrapper, lowered);
    }
    if (step == 0) {
      wrapper.fail_stage = -1;
    }
    route_copies::sum_copies_mpi(pl, static_cast<pipesched::stage_index>(rank), model);
    // Each rank holds the gradients of its own chunks (zeros elsewhere): the sum is exact.
    std::vector<double> grads = mlp::flatten_gradients(layers);
    MPI_Allreduce(MPI_IN_PLACE, grads.data(), static_cast<int>(grads.size()), MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    mlp::assign_gradients(layers, grads);
    double local[2] = {model.loss(), static_cast<double>(model.stashed())};
    double total[2] = {0.0, 0.0};
    MPI_Allreduce(local, total, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
      double ref_loss = 0.0;
      const auto ref = mlp::reference_gradients(mlp::one_copy(layers, pl.routes()), data, ref_loss);
      const double diff = total[1] == 0.0 ? mlp::max_rel_diff(layers, ref) : HUGE_VAL;
      worst = std::max(worst, diff);
      losses.push_back(total[0]);
      std::printf("  step %d  loss=%.10f  (reference %.10f)  grad_rel_diff=%.3g%s\n", step,
                  total[0], ref_loss, diff, total[1] == 0.0 ? "" : "  (tensors left stashed!)");
    }
    mlp::sgd_step(layers, lr);
  }
  int ok = 1;
  if (rank == 0) {
    const bool fell = losses.size() < 2 || losses.back() < losses.front();
    if (!fell) {
      std::printf("  FAIL: the loss did not fall\n");
    }
    if (!(worst <= tolerance)) {
      std::printf("  FAIL: gradients differ from the reference by %.3g\n", worst);
    }
    ok = fell && worst <= tolerance && dynamic_ok ? 1 : 0;
    if (!opt.trace.empty() || !opt.trace_sim.empty()) {
      write_traces(opt.dynamic ? last.ran : lowered, last.timings, opt);
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return ok == 1;
}

int run(int argc, char** argv, int rank, int size) {
  options opt;
  CLI::App app{"Train a small MLP through a pipeline schedule on MPI, one rank per stage"};
  app.add_option("--schedule", opt.schedule, "registered schedule name")->required();
  app.add_option("--microbatches,-m", opt.microbatches, "micro-batches")
      ->check(CLI::Range(1u, 4096u));
  app.add_option("--steps", opt.steps, "optimizer steps")->check(CLI::Range(1, 1000));
  app.add_option("--lr", opt.model.lr, "SGD learning rate")->check(CLI::Range(0.0, 10.0));
  app.add_option("--width", opt.model.width,
                 "layer width (bigger: compute dominates the transfers)")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1024}));
  app.add_option("--recv", opt.recv, "receive placement of the lowering")
      ->check([](const std::string& v) {
        return pipesched::parse_receive_placement(v) ? "" : "must be eager or late";
      });
  app.add_option("--trace", opt.trace, "write the measured per-op timeline (last step) here");
  app.add_option("--trace-sim", opt.trace_sim,
                 "write the simulator's prediction (costs calibrated on the run) here");
  app.add_option("--inject-failure", opt.inject_failure,
                 "S:I: stage S throws at op I of the first step (tests the abort)");
  app.add_flag("--recompute", opt.recompute,
               "recompute every chunk's activations before its backward (with_recompute)");
  app.add_flag("--dynamic", opt.dynamic,
               "run_mpi_dynamic: the schedule gives the placement, each rank picks B, else an F "
               "within --memory-limit, else W, among the ops whose input arrived");
  app.add_option("--memory-limit", opt.memory_limit,
                 "with --dynamic: per-stage activation memory limit, in M_B units")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return rank == 0 ? app.exit(e) : (e.get_exit_code() == 0 ? 0 : 2);
  }
  if (!opt.inject_failure.empty() && opt.inject_failure.find(':') == std::string::npos) {
    if (rank == 0) {
      std::fprintf(stderr, "mlp_pipeline_mpi: --inject-failure wants STAGE:OP\n");
    }
    return 2;
  }

  if (opt.dynamic && (opt.recompute || opt.recv != "eager")) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "mlp_pipeline_mpi: --dynamic runs F, B, W only, with no lowering "
                   "(not with --recompute or --recv)\n");
    }
    return 2;
  }
  if (opt.memory_limit && !opt.dynamic) {
    if (rank == 0) {
      std::fprintf(stderr, "mlp_pipeline_mpi: --memory-limit is only meaningful with --dynamic\n");
    }
    return 2;
  }

  // Every rank builds and lowers the same schedule (deterministic), so every rank fails alike.
  pipesched::schedule lowered;
  try {
    const auto& entry = pipesched::default_registry().at(opt.schedule);
    pipesched::generator_params params;
    params.stages = static_cast<std::uint32_t>(size);
    params.microbatches = opt.microbatches;
    params.chunks = entry.default_chunks;
    pipesched::schedule sched = entry.generate(params);
    sched.set_name(entry.name);
    if (opt.recompute) {
      sched = pipesched::with_recompute(sched, pipesched::all_chunks(sched));
    }
    pipesched::lowering_options lo;
    lo.receives = *pipesched::parse_receive_placement(opt.recv);  // --recv checked it
    // --dynamic: the compute-only schedule, whose placement the ranks run.
    lowered = opt.dynamic ? sched : pipesched::lower_communication(sched, lo);
  } catch (const pipesched::invalid_argument& e) {
    if (rank == 0) {
      std::fprintf(stderr, "mlp_pipeline_mpi: %s\n", e.what());
    }
    return 2;
  }
  double worst = 0.0;
  const bool ok = train(lowered, opt, rank, worst);
  if (rank == 0) {
    if (ok) {
      std::printf("ok: gradients match the reference\n");
    } else {
      std::printf("FAIL: %s\n", opt.schedule.c_str());
    }
    std::printf("max_grad_rel_diff=%.3g\n", worst);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int rc = 1;
  try {
    rc = run(argc, argv, rank, size);
  } catch (const std::exception& e) {
    // Not an op failure (those abort inside run_mpi): report and end the whole job.
    std::fprintf(stderr, "mlp_pipeline_mpi: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fflush(stdout);
  MPI_Finalize();
  return rc;
}
