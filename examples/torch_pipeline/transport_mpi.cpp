// torch_pipeline_mpi's transport (transport.hpp): one MPI rank per stage.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <torch/torch.h>
#include <vector>

#include <mpi.h>

#include <pipesched/exec/mpi.hpp>

#include "pipelined_gpt.hpp"
#include "route_copies_mpi.hpp"
#include "transport.hpp"

/// A message crosses ranks as [ndim, sizes...] (int64) then the values (double); an empty
/// message (undefined tensor) as no bytes.
template <>
struct pipesched::mpi_codec<gpt::pipelined_gpt::message> {
  static void encode(const gpt::pipelined_gpt::message& m, std::vector<std::byte>& out) {
    out.clear();
    if (!m.t.defined()) {
      return;
    }
    const torch::Tensor t = m.t.contiguous();
    std::vector<std::int64_t> head{t.dim()};
    for (const std::int64_t d : t.sizes()) {
      head.push_back(d);
    }
    const std::size_t head_bytes = head.size() * sizeof(std::int64_t);
    const std::size_t data_bytes = static_cast<std::size_t>(t.numel()) * sizeof(double);
    out.resize(head_bytes + data_bytes);
    std::memcpy(out.data(), head.data(), head_bytes);
    std::memcpy(out.data() + head_bytes, t.data_ptr<double>(), data_bytes);
  }
  static gpt::pipelined_gpt::message decode(std::span<const std::byte> bytes) {
    gpt::pipelined_gpt::message m;
    if (bytes.empty()) {
      return m;
    }
    std::int64_t ndim = 0;
    if (bytes.size() < sizeof ndim) {
      throw std::runtime_error("mpi_codec<tensor>: " + std::to_string(bytes.size()) +
                               " bytes hold no shape");
    }
    std::memcpy(&ndim, bytes.data(), sizeof ndim);
    const std::size_t head_bytes = (static_cast<std::size_t>(ndim) + 1) * sizeof(std::int64_t);
    if (ndim < 0 || ndim > 8 || bytes.size() < head_bytes) {
      throw std::runtime_error("mpi_codec<tensor>: bad shape header (ndim " + std::to_string(ndim) +
                               ")");
    }
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(ndim));
    std::memcpy(sizes.data(), bytes.data() + sizeof ndim, sizes.size() * sizeof(std::int64_t));
    m.t = torch::empty(sizes, torch::kDouble);
    const std::size_t data_bytes = static_cast<std::size_t>(m.t.numel()) * sizeof(double);
    if (bytes.size() != head_bytes + data_bytes) {
      throw std::runtime_error("mpi_codec<tensor>: shape and payload size disagree");
    }
    std::memcpy(m.t.data_ptr<double>(), bytes.data() + head_bytes, data_bytes);
    return m;
  }
};
static_assert(pipesched::mpi_message<gpt::pipelined_gpt::message>);

namespace torch_pipeline {
namespace {

int world_rank = 0;

}  // namespace

const char* const program = "torch_pipeline_mpi";

int rank() {
  return world_rank;
}

std::optional<std::uint32_t> fixed_stages() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return static_cast<std::uint32_t>(size);
}

double execute(gpt::pipelined_gpt& exec,
               const pipesched::schedule& sched,
               bool validate,
               gpt::cost_samples* samples) {
  MPI_Barrier(MPI_COMM_WORLD);
  pipesched::mpi_options mo;
  mo.validate = validate;
  // A compute-only schedule runs as given, each F and B sending its output with MPI_Isend as
  // it ends (a lowered one: its own SEND / RECV ops, synchronous).
  mo.lower = false;
  mo.gather_timings = false;  // each rank keeps its own ops
  const pipesched::mpi_run_result r = pipesched::run_mpi(exec, sched, mo);
  if (samples != nullptr) {
    samples->add(sched.layout(), r.timings, exec);
  }
  double makespan = r.elapsed;
  MPI_Allreduce(MPI_IN_PLACE, &makespan, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return makespan;
}

std::vector<pipesched::op_costs> stage_costs(const gpt::cost_samples& samples) {
  std::vector<pipesched::op_costs> out(samples.stages());
  const pipesched::op_costs mine =
      samples.stage_ms(static_cast<pipesched::stage_index>(world_rank));
  const double local[3] = {mine.forward, mine.backward_input, mine.backward_weight};
  std::vector<double> all(3 * out.size());
  MPI_Allgather(local, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, MPI_COMM_WORLD);
  for (std::size_t s = 0; s < out.size(); ++s) {
    out[s] = pipesched::op_costs{all[3 * s], all[3 * s + 1], all[3 * s + 2]};
  }
  return out;
}

void combine(gpt::pipelined_gpt& exec,
             const pipesched::placement& pl,
             double& loss,
             double& stashed) {
  route_copies::sum_copies_mpi(pl, static_cast<pipesched::stage_index>(world_rank), exec);
  loss = exec.loss();
  stashed = static_cast<double>(exec.stashed());
  for (pipesched::global_chunk g = 0; g < pl.total_chunks(); ++g) {
    for (torch::Tensor& t : exec.grads(g)) {
      MPI_Allreduce(MPI_IN_PLACE, t.data_ptr<double>(), static_cast<int>(t.numel()), MPI_DOUBLE,
                    MPI_SUM, MPI_COMM_WORLD);
    }
  }
  double v[2] = {loss, stashed};
  MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  loss = v[0];
  stashed = v[1];
}

double shared_value(double x) {
  MPI_Bcast(&x, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return x;
}

std::string shared_text(std::string text) {
  auto n = static_cast<long long>(text.size());
  MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  text.resize(static_cast<std::size_t>(n));
  MPI_Bcast(text.data(), static_cast<int>(n), MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

void share_max(std::vector<double>& values) {
  MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
}

}  // namespace torch_pipeline

int main(int argc, char** argv) {
  using torch_pipeline::program;
  using torch_pipeline::world_rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  int rc = 1;
  try {
    rc = torch_pipeline::run(argc, argv);
  } catch (const std::exception& e) {
    // Not an op failure (those abort inside run_mpi): report and end the whole job.
    std::fprintf(stderr, "%s: rank %d: %s\n", program, world_rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  std::fflush(stdout);
  MPI_Finalize();
  return rc;
}
