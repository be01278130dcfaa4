#pragma once

// What the training examples do for a schedule of several routes (DualPipe): each route runs
// through a whole copy of the model, route r's k-th chunk (global chunk r * route_length + k)
// holding a copy of block k. The copies start equal; a block's gradient is the sum over its
// copies, and every copy applies that sum (DeepSeek's DualPipe reduces it between the two ranks
// holding the block), so the copies stay equal and a step is the unpipelined model's.
//
// A holder of chunk gradients provides, for a global chunk g:
//   h.flat_gradients(g) -> std::vector<double>          chunk g's gradients, flattened
//   h.assign_flat_gradients(g, std::span<const double>)  replaces them

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <pipesched/ir/placement.hpp>

namespace route_copies {

/// The model block global chunk g holds a copy of.
inline std::uint32_t block_of(const pipesched::placement& pl, pipesched::global_chunk g) {
  return g % pl.route_length();
}

/// Gives each of `chunks` the sum of its block's gradients over the copies among them, summed
/// further by `reduce(std::vector<double>&)` over the processes holding the other copies of the
/// same blocks (nothing to do where one process holds every chunk). One route: nothing to sum.
template <class Holder, class Reduce>
void sum_copies(const pipesched::placement& pl,
                std::span<const pipesched::global_chunk> chunks,
                Holder& holder,
                Reduce reduce) {
  if (pl.routes() == 1) {
    return;
  }
  // By block, ascending: every process of a group lays its sums out in the same order.
  std::map<std::uint32_t, std::vector<double>> sums;
  for (const pipesched::global_chunk g : chunks) {
    const std::vector<double> grad = holder.flat_gradients(g);
    const auto [it, fresh] = sums.try_emplace(block_of(pl, g), grad);
    if (fresh) {
      continue;
    }
    if (it->second.size() != grad.size()) {
      throw std::logic_error("route_copies: chunk " + std::to_string(g) + " has " +
                             std::to_string(grad.size()) + " gradient values, another copy of " +
                             "its block " + std::to_string(it->second.size()));
    }
    for (std::size_t i = 0; i < grad.size(); ++i) {
      it->second[i] += grad[i];
    }
  }
  std::vector<double> flat;
  std::map<std::uint32_t, std::size_t> at;
  for (const auto& [block, sum] : sums) {
    at[block] = flat.size();
    flat.insert(flat.end(), sum.begin(), sum.end());
  }
  reduce(flat);
  for (const pipesched::global_chunk g : chunks) {
    const std::uint32_t block = block_of(pl, g);
    holder.assign_flat_gradients(
        g, std::span<const double>(flat).subspan(at[block], sums[block].size()));
  }
}

/// sum_copies in one process holding every chunk (one thread per stage).
template <class Holder>
void sum_all_copies(const pipesched::placement& pl, Holder& holder) {
  std::vector<pipesched::global_chunk> all(pl.total_chunks());
  for (std::size_t g = 0; g < all.size(); ++g) {
    all[g] = static_cast<pipesched::global_chunk>(g);
  }
  sum_copies(pl, all, holder, [](std::vector<double>&) {});
}

}  // namespace route_copies
