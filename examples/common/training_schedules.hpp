#pragma once

// What the training examples (mlp_pipeline, torch_pipeline) share: the schedules a --schedule
// option names, each generated for the shape they train.

#include <cstdint>
#include <string>
#include <vector>

#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/ir/error.hpp>
#include <pipesched/ir/schedule.hpp>

namespace training_schedules {

/// The registered schedules `name` names: every one for "all", else the one of that name
/// (throws invalid_argument listing the known names).
inline std::vector<const pipesched::generator_entry*> named(const std::string& name) {
  const pipesched::generator_registry& registry = pipesched::default_registry();
  std::vector<const pipesched::generator_entry*> out;
  if (name != "all") {
    out.push_back(&registry.at(name));
    return out;
  }
  for (const pipesched::generator_entry& e : registry.entries()) {
    out.push_back(&e);
  }
  return out;
}

/// `entry`'s schedule for p stages and m micro-batches at its default chunks, named as the
/// entry. Throws invalid_argument for a shape the generator refuses, and for a schedule of two
/// routes: each rank builds one copy of its stages' layers, so a micro-batch's route through a
/// second copy (dualpipe) is not trained here yet.
inline pipesched::schedule generate(const pipesched::generator_entry& entry,
                                    std::uint32_t p,
                                    std::uint32_t m) {
  pipesched::generator_params params;
  params.stages = p;
  params.microbatches = m;
  params.chunks = entry.default_chunks;
  pipesched::schedule sched = entry.generate(params);
  if (sched.layout().routes() > 1) {
    throw pipesched::invalid_argument(entry.name + ": has " +
                                      std::to_string(sched.layout().routes()) +
                                      " routes; this example trains schedules of one route");
  }
  sched.set_name(entry.name);
  return sched;
}

}  // namespace training_schedules
