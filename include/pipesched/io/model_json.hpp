#pragma once

// The cost model, memory model and simulation result JSON formats, one header each (schemas in
// docs/formats.md); this header includes all three for code written before the split.
#include "pipesched/io/cost_model_json.hpp"
#include "pipesched/io/memory_model_json.hpp"
#include "pipesched/io/simulation_json.hpp"

namespace pipesched {

/// The version of the three schemas above, which are all at 1; each header names its own
/// (cost_model_json_version, ...), and those are what the writers write.
inline constexpr int model_json_version = 1;
static_assert(cost_model_json_version == model_json_version &&
              memory_model_json_version == model_json_version &&
              simulation_json_version == model_json_version);

}  // namespace pipesched
