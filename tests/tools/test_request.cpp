#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/tools/request.hpp>

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

TEST_CASE("make_request: the options front ends read one by one, and the rules between them",
          "[plan][request]") {
  const generator_registry& reg = default_registry();
  generator_params params;
  params.stages = 4;
  params.microbatches = 8;
  const auto rule_of = [&](std::variant<generated_source, given_source> source,
                           const request_options& o) {
    try {
      (void)make_request(std::move(source), params, o, reg);
    } catch (const field_error& e) {
      return e.field() + ": " + e.rule();
    }
    return std::string("accepted");
  };

  SECTION("names parse both ways") {
    for (recompute_placement p :
         {recompute_placement::before_backward, recompute_placement::idle_slot}) {
      CHECK(parse_recompute_placement(to_string(p)) == p);
    }
    for (receive_placement p : {receive_placement::eager, receive_placement::late}) {
      CHECK(parse_receive_placement(to_string(p)) == p);
    }
    CHECK_FALSE(parse_recompute_placement("idle_slot"));
    CHECK_FALSE(parse_receive_placement("Late"));
  }
  SECTION("defaults: the source and params as given, nothing else") {
    const schedule_request r = make_request(generated_source{"zb-h1"}, params, {}, reg);
    CHECK(std::get<generated_source>(r.source).generator == "zb-h1");
    CHECK_FALSE(std::get<generated_source>(r.source).options.search);
    CHECK(r.params.microbatches == 8);
    CHECK_FALSE(r.recompute);
    CHECK_FALSE(r.lowering);
  }
  SECTION("every option lands in its field") {
    request_options o;
    o.search = zb_auto_options{};
    o.search->search_evaluations = 7;
    o.recompute_chunks = {1, 3};
    o.recompute_policy = "idle-slot";
    o.with_comm = true;
    o.recv = "late";
    const schedule_request r = make_request(generated_source{"zb-auto"}, params, o, reg);
    CHECK(std::get<generated_source>(r.source).options.search->search_evaluations == 7);
    REQUIRE(r.recompute);
    CHECK_FALSE(r.recompute->all);
    CHECK(r.recompute->chunks == std::vector<global_chunk>{1, 3});
    CHECK(r.recompute->placement == recompute_placement::idle_slot);
    CHECK(r.lowering == receive_placement::late);
    o = {};
    o.recompute_all = true;
    CHECK(make_request(generated_source{"1f1b"}, params, o, reg).recompute->all);
  }
  SECTION("each rule names its field, and the option a rule depends on") {
    request_options o;
    o.recv = "soon";
    CHECK(rule_of(generated_source{"1f1b"}, o) == "recv: must be eager or late, not \"soon\"");
    o.recv = "late";
    CHECK(rule_of(generated_source{"1f1b"}, o) == "recv: only meaningful with with_comm");
    o.with_comm = true;
    CHECK(rule_of(generated_source{"1f1b"}, o) == "accepted");
    o = {};
    o.recompute_policy = "idle_slot";
    CHECK(rule_of(generated_source{"1f1b"}, o) ==
          "recompute_policy: must be before-backward or idle-slot, not \"idle_slot\"");
    o.recompute_policy = "idle-slot";
    CHECK(rule_of(generated_source{"1f1b"}, o) ==
          "recompute_policy: only meaningful with recompute");
    o.recompute_chunks = {0};
    CHECK(rule_of(generated_source{"1f1b"}, o) == "accepted");
    o = {};
    o.search = zb_auto_options{};
    const std::string given = rule_of(given_source{reg.generate("1f1b", params)}, o);
    CHECK_THAT(given,
               Catch::StartsWith("search: only meaningful when a schedule that searches (") &&
                   Catch::Contains("zb-auto") &&
                   Catch::EndsWith(") is generated, not with a given schedule"));
    // A generator that does not search is build_schedule's rule (the registry says which).
    CHECK(rule_of(generated_source{"1f1b"}, o) == "accepted");
    CHECK_THROWS_AS(build_schedule(make_request(generated_source{"1f1b"}, params, o, reg), reg),
                    field_error);
  }
}
