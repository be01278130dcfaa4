#pragma once

// What the training examples (mlp_pipeline, torch_pipeline) share: the schedules a --schedule
// option names, each generated for the shape they train, and the verdict over them.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
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
/// entry. Throws invalid_argument for a shape the generator refuses. A schedule of several
/// routes (dualpipe) trains a copy of the model per route (route_copies.hpp).
inline pipesched::schedule generate(const pipesched::generator_entry& entry,
                                    std::uint32_t p,
                                    std::uint32_t m) {
  pipesched::generator_params params;
  params.stages = p;
  params.microbatches = m;
  params.chunks = entry.default_chunks;
  pipesched::schedule sched = entry.generate(params);
  sched.set_name(entry.name);
  return sched;
}

/// The tally of a run over named() schedules.
struct tally {
  double worst = 0.0;  ///< the largest gradient difference seen
  int trained = 0;
  int failed = 0;

  /// A schedule's training threw: says so (on every process: each reports its own).
  void threw(const std::string& name, const std::exception& e) {
    std::printf("  FAIL: %s: %s\n", name.c_str(), e.what());
    worst = HUGE_VAL;
    ++failed;
  }

  /// The closing lines, printed when `print`: the verdict (`matched` says against what), then
  /// max_grad_rel_diff=<worst>. True when every schedule passed.
  bool report(bool print, std::uint32_t p, std::uint32_t m, const char* matched) {
    if (trained == 0) {
      failed = 1;
    }
    if (!print) {
      return failed == 0;
    }
    if (trained == 0) {
      std::printf("FAIL: no schedule could be built for p=%u m=%u\n", p, m);
    } else if (failed == 0) {
      std::printf("ok: %d schedule(s) trained, gradients match %s\n", trained, matched);
    } else {
      std::printf("FAIL: %d of %d schedule(s)\n", failed, trained);
    }
    std::printf("max_grad_rel_diff=%.3g\n", worst);
    return failed == 0;
  }
};

}  // namespace training_schedules
