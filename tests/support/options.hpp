#pragma once

// Test shorthands: the one options struct of a simulate_* / monte_carlo_* call, built from the
// few fields a test varies (the library takes (schedule, costs, options) everywhere).
#include <cstdint>
#include <utility>

#include <pipesched/analysis/data_parallel_timing.hpp>
#include <pipesched/analysis/dynamic_policy.hpp>
#include <pipesched/analysis/link_timing.hpp>
#include <pipesched/analysis/perturbed_timing.hpp>
#include <pipesched/analysis/robustness.hpp>

namespace test_options {

/// simulate_perturbed's options: sample `sample` of `noise`, the rest of `so`.
inline pipesched::perturbed_options perturbed(const pipesched::perturbation& noise,
                                              std::uint64_t sample,
                                              const pipesched::simulate_options& so = {}) {
  pipesched::perturbed_options o;
  static_cast<pipesched::simulate_options&>(o) = so;
  o.noise = noise;
  o.sample = sample;
  return o;
}

/// `o` over the links `l`.
inline pipesched::link_timing_options with_links(pipesched::link_timing_options o,
                                                 pipesched::link_model l) {
  o.links = std::move(l);
  return o;
}

/// `o` sampling `noise`.
inline pipesched::robustness_options with_noise(pipesched::robustness_options o,
                                                pipesched::perturbation noise) {
  o.noise = std::move(noise);
  return o;
}

/// monte_carlo_data_parallel's options from `o`, with `noise` and the replicas `dp`.
inline pipesched::data_parallel_monte_carlo_options dp_options(
    pipesched::perturbation noise,
    pipesched::data_parallel_model dp,
    pipesched::data_parallel_monte_carlo_options o) {
  o.noise = std::move(noise);
  o.data_parallel = std::move(dp);
  return o;
}

/// monte_carlo_data_parallel's options: `samples` iterations from `first` on `threads` threads.
inline pipesched::data_parallel_monte_carlo_options dp_options(pipesched::perturbation noise,
                                                               pipesched::data_parallel_model dp,
                                                               std::uint32_t samples,
                                                               std::uint64_t first = 0,
                                                               unsigned threads = 0) {
  pipesched::data_parallel_monte_carlo_options o;
  o.samples = samples;
  o.first_sample = first;
  o.threads = threads;
  return dp_options(std::move(noise), std::move(dp), std::move(o));
}

/// monte_carlo_dynamic's options: `ro` sampling `noise`, the policy's memory from `policy`.
inline pipesched::dynamic_monte_carlo_options dynamic_mc(
    pipesched::perturbation noise,
    const pipesched::dynamic_policy_options& policy,
    const pipesched::robustness_options& ro) {
  pipesched::dynamic_monte_carlo_options o;
  static_cast<pipesched::robustness_options&>(o) = ro;
  o.noise = std::move(noise);
  o.memory = policy.memory;
  o.memory_limit = policy.memory_limit;
  return o;
}

}  // namespace test_options
