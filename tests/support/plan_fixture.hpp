#pragma once

// A small planner run shared by the io tests of the plan (computed once per test binary).
#include <pipesched/plan/planner.hpp>

namespace test_plan {

inline const pipesched::training_job& small_job() {
  static const pipesched::training_job job = [] {
    pipesched::training_job j;
    j.model = pipesched::model_preset("llama3-8b");
    j.cluster = pipesched::cluster_preset("h100-sxm-80gb");
    j.gpus = 64;
    j.sequence = 8192;
    j.global_batch = 64;
    return j;
  }();
  return job;
}

/// The search with a baseline (TP 8, PP 2, 1F1B, its other choices searched).
inline const pipesched::plan_result& small_plan() {
  static const pipesched::plan_result r = [] {
    pipesched::plan_options o;
    o.top = 3;
    o.threads = 1;
    pipesched::plan_fixed base;
    base.tp = 8;
    base.pp = 2;
    base.schedule = "1f1b";
    base.micro_batch = 1;
    o.baseline = base;
    return pipesched::plan(small_job(), o);
  }();
  return r;
}

}  // namespace test_plan
