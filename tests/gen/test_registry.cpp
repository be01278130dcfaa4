#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/zb_auto.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "support/registry_shapes.hpp"

using namespace pipesched;

TEST_CASE("the default registry knows the built-in schedules", "[gen][registry]") {
  const auto& r = default_registry();
  for (const char* n : {"gpipe", "gpipe-split", "1f1b", "1f1b-split", "zb-h1", "zb-h2"}) {
    INFO(n);
    REQUIRE(r.find(n) != nullptr);
    CHECK_FALSE(r.at(n).description.empty());
  }
  CHECK(r.find("nope") == nullptr);
  CHECK_THROWS_WITH(r.at("nope"), Catch::StartsWith("unknown schedule \"nope\" (known: gpipe,"));
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  CHECK(r.generate("zb-h1", p) == generate(zb_h1{}, 4, 8));
}

TEST_CASE("registries accept user generators and aliases", "[gen][registry]") {
  generator_registry r;
  r.add(zb_h1{}, "h1");
  r.add_as("alias", zb_h2{}, "h2 by another name");
  REQUIRE(r.entries().size() == 2);
  generator_params p;
  p.stages = 2;
  p.microbatches = 3;
  CHECK(r.generate("alias", p).name() == "zb-h2");
  r.add(zb_h1{}, "replaced");
  CHECK(r.entries().size() == 2);
  CHECK(r.at("zb-h1").description == "replaced");
}

TEST_CASE("builtin_registry: the built-ins, extended with a user's generator", "[gen][registry]") {
  generator_registry r = builtin_registry();
  CHECK(r.entries().size() == default_registry().entries().size());
  r.add_as("my-1f1b", one_f_one_b{}, "a user's schedule under its own name");
  CHECK(r.entries().size() == default_registry().entries().size() + 1);
  CHECK(default_registry().find("my-1f1b") == nullptr);  // the shared one is untouched
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  CHECK(r.generate("my-1f1b", p) == generate(one_f_one_b{}, 4, 8));
  // Everything the registry does for built-ins it does for the user's entry too.
  p.memory_limit = 2.0;
  CHECK(r.generate_result("my-1f1b", p).memory_violations.size() == 2);
  CHECK(r.at("zb-auto").searches);
}

TEST_CASE("generate_result keeps the parameters it was generated for", "[gen][registry]") {
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  p.costs = cost_model::uniform(3, 4, 2, 0.5);
  p.memory = memory_model::uniform(2, 1);
  p.memory.set_static_memory({5, 5, 5, 5});
  p.memory_limit = 40.0;
  const generator_entry by_hand{
      "mine", "an entry built without a registry", 1,
      [](const generator_params& q) { return one_f_one_b{}.generate(q); }};
  for (const generation_result& g :
       {default_registry().generate_result("zb-v", p),
        default_registry().generate_result("1f1b", p), by_hand.generate_result(p)}) {
    INFO(g.sched.name());
    CHECK(g.params.stages == 4);
    CHECK(g.params.microbatches == 8);
    CHECK(g.params.costs.uniform_costs() == p.costs.uniform_costs());
    CHECK(g.params.costs.uniform_comm() == 0.5);
    CHECK(g.params.memory.static_memory(3) == 5.0);
    CHECK(g.params.memory_limit == 40.0);
  }
}

namespace {

generator_params zb_params(std::uint32_t p, std::uint32_t m) {
  generator_params gp;
  gp.stages = p;
  gp.microbatches = m;
  gp.costs = cost_model::uniform(1850, 1810, 930, 60);
  gp.memory = memory_model::uniform(1.0, 0.375);
  return gp;
}

void check_same(const generation_result& g, const zb_auto_result& r) {
  CHECK(g.sched == r.sched);
  REQUIRE(g.lower_bound.has_value());
  CHECK(*g.lower_bound == r.lower_bound);
  REQUIRE(g.span.has_value());
  CHECK(*g.span == r.span);
  CHECK(g.published_span == r.published_span);
  CHECK(g.search_evaluations == std::optional<std::size_t>(r.search_evaluations));
}

/// A hand-crafted generator that counts its runs.
struct counting_generator {
  std::shared_ptr<int> calls = std::make_shared<int>(0);
  std::string_view name() const noexcept { return "counting"; }
  schedule generate(const generator_params& p) const {
    ++*calls;
    return zb_h1{}.generate(p);
  }
};

}  // namespace

namespace {

/// A user's searching generator: a search() member is all the registry looks for.
struct wrapped_search {
  std::shared_ptr<zb_auto_options> seen = std::make_shared<zb_auto_options>();
  std::string_view name() const noexcept { return "wrapped"; }
  schedule generate(const generator_params& p) const { return search(p, {}).sched; }
  zb_auto_result search(const generator_params& p, const zb_auto_options& o) const {
    *seen = o;
    return zb_auto{}.search(p, o);
  }
};

}  // namespace

TEST_CASE("a generator with a search() member registers as searching, with its options",
          "[gen][registry]") {
  static_assert(detail::searching_generator<zb_auto> && detail::searching_generator<zb_v>);
  static_assert(!detail::searching_generator<zb_h1>);
  static_assert(detail::searching_generator<wrapped_search>);
  generator_registry r;
  wrapped_search g;
  r.add(g, "zb-auto behind a user's type");
  REQUIRE(r.at("wrapped").searches);
  zb_auto_options o;
  o.search_evaluations = 7;
  generation_options go;
  go.search = o;
  const generator_params gp = zb_params(4, 8);
  const generation_result res = r.generate_result("wrapped", gp, go);
  CHECK(g.seen->search_evaluations == 7);
  check_same(res, zb_auto{}.search(gp, o));
}

TEST_CASE("generate_result returns the search's bound with the schedule", "[gen][registry]") {
  const auto& r = default_registry();
  const generator_params gp = zb_params(4, 12);
  for (const auto& [name, preset] :
       {std::pair{"zb-auto", zb_memory_preset::given}, std::pair{"zb-1p", zb_memory_preset::one_p},
        std::pair{"zb-2p", zb_memory_preset::two_p}}) {
    INFO(name);
    REQUIRE(r.at(name).searches);
    check_same(r.generate_result(name, gp), zb_auto_search(gp, {}, preset, name));
    CHECK(r.generate_result(name, gp).sched == r.generate(name, gp));
  }
  REQUIRE(r.at("zb-v").searches);
  check_same(r.generate_result("zb-v", gp), zb_v_search(gp));
  generator_params limited = gp;
  limited.memory_limit = 6.0;
  check_same(r.generate_result("zb-auto", limited), zb_auto_search(limited));
}

TEST_CASE("generate_result passes the search options to the search", "[gen][registry]") {
  const auto& r = default_registry();
  generator_params gp = zb_params(8, 40);
  gp.memory_limit = 16.0;
  for (const std::size_t evaluations : {std::size_t{0}, std::size_t{3}, std::size_t{40}}) {
    INFO(evaluations);
    generation_options o;
    o.search = zb_auto_options{};
    o.search->search_evaluations = evaluations;
    const generation_result g = r.generate_result("zb-auto", gp, o);
    check_same(g, zb_auto_search(gp, *o.search));
    CHECK(*g.search_evaluations <= evaluations);
  }
  generation_options capped;
  capped.search = zb_auto_options{};
  capped.search->search_budget_ms = 5.0;
  const generation_result g = r.generate_result("zb-v", zb_params(4, 8), capped);
  CHECK(validate(g.sched).ok());
  REQUIRE(g.lower_bound.has_value());
  CHECK(*g.lower_bound <= *g.span);
}

TEST_CASE("generate_result: hand-crafted generators return the schedule alone", "[gen][registry]") {
  const auto& r = default_registry();
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  for (const char* n : {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved-1f1b"}) {
    INFO(n);
    CHECK_FALSE(r.at(n).searches);
    const generation_result g = r.generate_result(n, p);
    CHECK(g.sched == r.generate(n, p));
    CHECK_FALSE(g.lower_bound);
    CHECK_FALSE(g.span);
    CHECK_FALSE(g.published_span);
    CHECK_FALSE(g.search_evaluations);
  }
}

TEST_CASE("generate_result refuses search options it cannot honour", "[gen][registry]") {
  const auto& r = default_registry();
  generator_params p;
  p.stages = 2;
  p.microbatches = 4;
  generation_options o;
  o.search = zb_auto_options{};
  CHECK_THROWS_AS(r.generate_result("1f1b", p, o), invalid_argument);
  CHECK_THROWS_WITH(r.generate_result("1f1b", p, o),
                    "1f1b: search options (generation_options::search) apply only to generators "
                    "that search (generator_entry::searches), such as zb-auto and zb-v");
  o.search->search_budget_ms = -1.0;
  CHECK_THROWS_WITH(
      r.generate_result("zb-auto", p, o),
      "zb-auto: search_budget_ms (-1) must be finite and >= 0 (0: no wall-clock cap)");
  o.search->search_budget_ms = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(r.generate_result("zb-v", p, o),
                    Catch::StartsWith("zb-v: search_budget_ms (nan) must be finite and >= 0"));
}

TEST_CASE("generate_result runs the generator once", "[gen][registry]") {
  generator_registry r;
  counting_generator c;
  r.add(c, "counts its runs");
  generator_params p;
  p.stages = 3;
  p.microbatches = 5;
  const generation_result g = r.generate_result("counting", p);
  CHECK(*c.calls == 1);
  CHECK(g.sched == generate(zb_h1{}, 3, 5));
  CHECK_FALSE(g.lower_bound);
  CHECK_FALSE(r.at("counting").searches);
}

TEST_CASE("generator entries built by hand still work (four fields)", "[gen][registry]") {
  // Aggregate initialisation with the original four fields stays warning-free (-Wextra
  // -Werror in this build): the new members have default initialisers.
  const generator_entry e{"by-hand", "hand-made entry", 1, [](const generator_params& p) {
                            return generate(zb_h2{}, p.stages, p.microbatches);
                          }};
  generator_params p;
  p.stages = 2;
  p.microbatches = 3;
  CHECK_FALSE(e.searches);
  CHECK(e.generate_result(p).sched == generate(zb_h2{}, 2, 3));
  CHECK_FALSE(e.generate_result(p).lower_bound);
}

TEST_CASE("generate_result never ignores a memory limit", "[gen][registry][memory]") {
  // 1F1B cannot take a limit: its schedule is checked against it and every stage over it is
  // reported (stage 0 peaks at p·M_B = 4 > 2). The searching generators stay within it.
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  gp.memory_limit = 2.0;
  const generation_result over = default_registry().generate_result("1f1b", gp);
  REQUIRE(over.memory_violations.size() == 2);  // stages 0 and 1 (peaks p - s: 4, 3, 2, 1)
  CHECK(over.memory_violations[0].stage == 0);
  CHECK(over.memory_violations[0].peak == 4.0);
  CHECK(over.memory_violations[0].message.rfind("stage 0 exceeds its memory limit 2", 0) == 0);
  gp.memory_limit = 4.0;
  CHECK(default_registry().generate_result("1f1b", gp).memory_violations.empty());
  gp.memory_limit = 2.0;
  const generation_result z = default_registry().generate_result("zb-auto", gp);
  CHECK(z.memory_violations.empty());
  for (const stage_memory& st : check_memory(z.sched, gp.memory).stages) {
    CHECK(st.peak <= 2.0 + 1e-9);
  }
  gp.memory_limit.reset();
  CHECK(default_registry().generate_result("1f1b", gp).memory_violations.empty());
}

TEST_CASE("every registered generator serves every shape but those its documented rule refuses",
          "[gen][registry]") {
  // Rules of generators that no longer exist would silently skip nothing: keep the table true.
  for (const test_support::shape_rule& rule : test_support::shape_rules) {
    INFO(rule.generator);
    CHECK(default_registry().find(rule.generator) != nullptr);
  }
  std::size_t refused = 0;
  for (const generator_entry& e : default_registry().entries()) {
    for (std::uint32_t p : {1u, 2u, 3u, 4u}) {
      for (std::uint32_t m = 1; m <= 2 * p + 1; ++m) {
        generator_params gp;
        gp.stages = p;
        gp.microbatches = m;
        INFO(e.name << " p=" << p << " m=" << m);
        // Throws (and fails) when a generator refuses a shape its rule says it serves.
        const auto s = test_support::generate_if_served(e, gp);
        refused += s ? 0U : 1U;
        if (s) {
          CHECK(validate(*s).ok());
        }
      }
    }
  }
  // dualpipev (m >= 2p) refuses m = 1..2p-1 for each p: 1 + 3 + 5 + 7; dualpipe (p even, m
  // even >= 2p) every m at p = 1 and 3, all but m = 2p at p = 2 and 4: 3 + 4 + 7 + 8.
  CHECK(refused == 16 + 22);
  CHECK(test_support::serves("dualpipev", 3, 6));
  CHECK_FALSE(test_support::serves("dualpipev", 3, 5));
  CHECK(test_support::serves("1f1b", 3, 1));
}

TEST_CASE("generate never returns a schedule over a limit it was given", "[gen][registry]") {
  const auto& r = default_registry();
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  gp.memory_limit = 2.0;
  // 1F1B peaks at p·M_B = 4 on stage 0: it cannot take 2.
  CHECK_THROWS_WITH(r.generate("1f1b", gp),
                    Catch::StartsWith("1f1b: memory_limit (2) cannot be honoured: stage 0 exceeds "
                                      "its memory limit 2"));
  CHECK_FALSE(r.generate_result("1f1b", gp).memory_violations.empty());
  gp.memory_limit = 4.0;
  CHECK(r.generate("1f1b", gp) == generate(one_f_one_b{}, 4, 8));
  // A searching generator stays within the limit.
  gp.memory_limit = 3.0;
  CHECK_NOTHROW(r.generate("zb-auto", gp));
  // One limit per stage: 1F1B's peaks are 4, 3, 2, 1; the stage over its own limit is named.
  gp.memory_limit = {4.0, 3.0, 2.0, 1.0};
  CHECK(r.generate("1f1b", gp) == generate(one_f_one_b{}, 4, 8));
  gp.memory_limit = {4.0, 3.0, 1.5, 1.0};
  CHECK_THROWS_WITH(r.generate("1f1b", gp),
                    Catch::StartsWith("1f1b: memory_limit (1.5) cannot be honoured: stage 2 "
                                      "exceeds its memory limit 1.5"));
}
