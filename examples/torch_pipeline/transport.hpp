#pragma once

// Where the stages run, for torch_pipeline.cpp, which is compiled once for both programs: one
// thread per stage (transport_threads.cpp, torch_pipeline) or one MPI rank per stage
// (transport_mpi.cpp, torch_pipeline_mpi). Each program's main() is its transport's.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pipesched/ir/schedule.hpp>
#include <pipesched/model/cost_model.hpp>

#include "pipelined_gpt.hpp"

namespace torch_pipeline {

/// The program's name, for messages.
extern const char* const program;

/// This process's place: rank 0 (the only one without MPI) prints and checks.
int rank();

/// The stages when the transport fixes them (MPI: one rank per stage); otherwise nullopt and
/// --stages says.
std::optional<std::uint32_t> fixed_stages();

/// Runs `sched` once (validated first when `validate`); with `samples`, timed: its compute ops
/// are added and the makespan (seconds, the same on every rank) returned.
double execute(gpt::pipelined_gpt& exec,
               const pipesched::schedule& sched,
               bool validate,
               gpt::cost_samples* samples = nullptr);

/// Every stage's measured costs (ms), known to every rank.
std::vector<pipesched::op_costs> stage_costs(const gpt::cost_samples& samples);

/// First each copy of a block takes the sum of the block's gradients over its copies (several
/// routes: route_copies.hpp; under MPI the ranks holding them exchange theirs). Then, under
/// MPI, where each rank holds the gradients, loss and stores of its own chunks (zeros
/// elsewhere): summed, every rank holds them all, exactly (x + 0 = x).
void combine(gpt::pipelined_gpt& exec,
             const pipesched::placement& pl,
             double& loss,
             double& stashed);

/// Rank 0's verdict, on every rank.
double shared_value(double x);

/// Rank 0's text, on every rank.
std::string shared_text(std::string text);

/// Each value's largest over the ranks, on every rank (a chunk's W store is on its rank alone).
void share_max(std::vector<double>& values);

/// The program (torch_pipeline.cpp): reads the options, trains and checks; the exit status.
int run(int argc, char** argv);

}  // namespace torch_pipeline
