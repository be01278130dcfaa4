#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/plan/request.hpp>

using namespace pipesched;

namespace {

schedule_request named(std::string name, std::uint32_t p, std::uint32_t m) {
  schedule_request r;
  r.source = generated_source{std::move(name)};
  r.params.stages = p;
  r.params.microbatches = m;
  return r;
}

std::size_t count_kind(const schedule& s, op_kind k) {
  std::size_t n = 0;
  for (stage_index st = 0; st < s.stages(); ++st) {
    for (const op& o : s.ops(st)) {
      n += o.kind == k ? 1 : 0;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("build_schedule: a generator by name is the registry's schedule", "[plan][request]") {
  const generation_result g = build_schedule(named("zb-h1", 4, 8), default_registry());
  CHECK(g.sched == default_registry().generate("zb-h1", named("zb-h1", 4, 8).params));
  CHECK_FALSE(g.lower_bound);
}

TEST_CASE("build_schedule: a searching generator keeps its bound, lowering drops it",
          "[plan][request]") {
  schedule_request r = named("zb-auto", 4, 8);
  generation_result g = build_schedule(r, default_registry());
  REQUIRE(g.lower_bound);
  r.lowering = receive_placement::eager;
  g = build_schedule(r, default_registry());
  CHECK(g.sched.has_comm());
  CHECK(validate(g.sched).ok());
  CHECK_FALSE(g.lower_bound);
}

TEST_CASE("build_schedule: recompute all chunks, then lower", "[plan][request]") {
  schedule_request r = named("1f1b", 4, 8);
  r.recompute = recompute_request{true, {}, recompute_placement::before_backward};
  r.lowering = receive_placement::late;
  const generation_result g = build_schedule(r, default_registry());
  CHECK(count_kind(g.sched, op_kind::recompute) == 4u * 8u);
  CHECK(g.sched.has_comm());
  CHECK(validate(g.sched).ok());
}

TEST_CASE("build_schedule: a given schedule takes its shape from itself", "[plan][request]") {
  schedule_request r;
  r.source = given_source{default_registry().generate("1f1b", named("1f1b", 2, 4).params)};
  r.recompute = recompute_request{false, {1}, recompute_placement::before_backward};
  const generation_result g = build_schedule(r, default_registry());
  CHECK(count_kind(g.sched, op_kind::recompute) == 4u);
  r.params.stages = 2;
  CHECK_THROWS_WITH(build_schedule(r, default_registry()),
                    "schedule_request: stages: comes from the given schedule (p=2): leave it "
                    "unset");
  r.params.stages = 0;
  r.params.chunks = 1;
  try {
    (void)build_schedule(r, default_registry());
    FAIL("chunks with a given schedule was accepted");
  } catch (const field_error& e) {
    CHECK(e.field() == "chunks");
    CHECK(e.rule() == "comes from the given schedule (v=1): leave it unset");
  }
}

TEST_CASE("build_schedule: errors name the field", "[plan][request]") {
  CHECK_THROWS_WITH(build_schedule(named("", 4, 8), default_registry()),
                    Catch::Contains("generator"));
  CHECK_THROWS_WITH(build_schedule(named("nope", 4, 8), default_registry()),
                    Catch::Contains("unknown schedule \"nope\""));
  schedule_request r = named("1f1b", 4, 8);
  r.recompute = recompute_request{false, {9}, recompute_placement::before_backward};
  CHECK_THROWS_WITH(build_schedule(r, default_registry()),
                    "schedule_request: recompute.chunks: 9 is not a global chunk of the schedule "
                    "(0 .. 3)");
  r = named("1f1b", 4, 8);
  std::get<generated_source>(r.source).options.search = zb_auto_options{};
  try {
    (void)build_schedule(r, default_registry());
    FAIL("search options for 1f1b were accepted");
  } catch (const field_error& e) {
    CHECK(e.field() == "search");
    CHECK_THAT(e.rule(), Catch::Contains("only meaningful for schedules that search (") &&
                             Catch::Contains("zb-auto") && Catch::EndsWith("not \"1f1b\""));
  }
}
