#pragma once

// The core of pipesched: IR, generators, validation, simulation, memory, executors.
// Standard library only; the fmt / JSON layers are in <pipesched/io/...>, included explicitly.
// Layers bottom-up (docs/model.md, "Layers"): ir, model, analysis, gen, transform, exec, io.

#include "pipesched/ir/dependencies.hpp"
#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/placement.hpp"
#include "pipesched/ir/schedule.hpp"
#include "pipesched/ir/traversal.hpp"

#include "pipesched/model/cost_model.hpp"
#include "pipesched/model/memory_model.hpp"
#include "pipesched/model/transformer_costs.hpp"

#include "pipesched/analysis/memory_checker.hpp"
#include "pipesched/analysis/metrics.hpp"
#include "pipesched/analysis/timing_simulator.hpp"
#include "pipesched/analysis/validator.hpp"

#include "pipesched/gen/generator.hpp"
#include "pipesched/gen/gpipe.hpp"
#include "pipesched/gen/interleaved.hpp"
#include "pipesched/gen/one_f_one_b.hpp"
#include "pipesched/gen/registry.hpp"
#include "pipesched/gen/zb_auto.hpp"
#include "pipesched/gen/zb_v.hpp"
#include "pipesched/gen/zero_bubble.hpp"

#include "pipesched/transform/comm_lowering.hpp"

#include "pipesched/exec/any_executor.hpp"
#include "pipesched/exec/executor.hpp"
#include "pipesched/exec/instrumented_executor.hpp"
#include "pipesched/exec/run_stage.hpp"
#include "pipesched/exec/serial_driver.hpp"
#include "pipesched/exec/sleep_executor.hpp"
#include "pipesched/exec/thread_driver.hpp"

#include "pipesched/version.hpp"
