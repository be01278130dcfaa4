#pragma once

// The core of pipesched: IR, generators, validation, simulation, memory, executors.
// Standard library only; the fmt / JSON layers are in <pipesched/io/...>, included explicitly.

#include "pipesched/gen/comm_lowering.hpp"
#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/gpipe.hpp"
#include "pipesched/gen/one_f_one_b.hpp"
#include "pipesched/gen/registry.hpp"
#include "pipesched/gen/zero_bubble.hpp"
#include "pipesched/exec/executor.hpp"
#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/memory/memory_checker.hpp"
#include "pipesched/memory/memory_model.hpp"
#include "pipesched/sim/cost_model.hpp"
#include "pipesched/sim/timing_simulator.hpp"
#include "pipesched/sim/transformer_costs.hpp"
#include "pipesched/validate/traversal.hpp"
#include "pipesched/validate/validator.hpp"
#include "pipesched/version.hpp"
