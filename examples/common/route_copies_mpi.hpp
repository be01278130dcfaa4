#pragma once

// route_copies across MPI ranks, one rank per stage.

#include <algorithm>
#include <cstdint>
#include <vector>

#include <mpi.h>

#include <pipesched/ir/placement.hpp>

#include "route_copies.hpp"

namespace route_copies {

/// sum_copies on the rank of `stage` (every rank calls it: it splits MPI_COMM_WORLD): the ranks
/// holding copies of the same blocks sum theirs with MPI_Allreduce. DualPipe's ranks s and
/// p-1-s both hold blocks s and p-1-s, one copy each; a middle rank (odd p) would hold both
/// copies of its block and sum them alone. One route: nothing to do.
template <class Holder>
void sum_copies_mpi(const pipesched::placement& pl, pipesched::stage_index stage, Holder& holder) {
  if (pl.routes() == 1) {
    return;
  }
  std::vector<pipesched::global_chunk> mine;
  for (pipesched::chunk_index c = 0; c < pl.chunks(); ++c) {
    mine.push_back(pl.global(stage, c));
  }
  // Ranks holding the same blocks share their smallest block: it names their group.
  std::uint32_t color = pl.route_length();
  for (const pipesched::global_chunk g : mine) {
    color = std::min(color, block_of(pl, g));
  }
  MPI_Comm group = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(color), static_cast<int>(stage), &group);
  sum_copies(pl, mine, holder, [&](std::vector<double>& flat) {
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_DOUBLE, MPI_SUM,
                  group);
  });
  MPI_Comm_free(&group);
}

}  // namespace route_copies
