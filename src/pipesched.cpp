// The compiled library (ir/detail/linkage.hpp says how): validate, simulate and check_memory for
// the library's own cost and memory models; the built-in generators by name and
// generate_result's work; the zero-bubble searches (zb-auto, zb-v, zb-exact); the schedule
// request (make_request, build_schedule), what-if and analyze; plan() and pack(). One file: they
// share most of their templates (the timing and memory engines, the transforms, the job model),
// which each file compiled again (g++ -O2, CPU: 45 s as one file, 57 s as two, 79 s as one per
// header; docs/benchmarks.md §12).
#define PIPESCHED_DEFINE_ANALYZE
#define PIPESCHED_DEFINE_CHECK_MEMORY
#define PIPESCHED_DEFINE_PACK
#define PIPESCHED_DEFINE_PLAN
#define PIPESCHED_DEFINE_REGISTRY
#define PIPESCHED_DEFINE_REQUEST
#define PIPESCHED_DEFINE_SIMULATE
#define PIPESCHED_DEFINE_VALIDATE
#define PIPESCHED_DEFINE_WHATIF
#define PIPESCHED_DEFINE_ZB_SEARCH

#include "pipesched/analysis/check_memory.hpp"
#include "pipesched/analysis/simulate.hpp"
#include "pipesched/analysis/validate.hpp"
#include "pipesched/gen/builtin_registry.hpp"
#include "pipesched/gen/zb_auto.hpp"
#include "pipesched/gen/zb_exact.hpp"
#include "pipesched/gen/zb_v.hpp"
#include "pipesched/plan/pack.hpp"
#include "pipesched/plan/planner.hpp"
#include "pipesched/tools/analyze.hpp"
#include "pipesched/tools/request.hpp"
#include "pipesched/tools/whatif.hpp"
