#include <cmath>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/model/perturbation.hpp>

using namespace pipesched;

TEST_CASE("perturbation: defaults are no noise; setters keep what they are given",
          "[perturbation]") {
  perturbation n;
  CHECK(n.is_none());
  CHECK(n.cv(op_kind::forward) == 0.0);
  CHECK(n.slowdown(3) == 1.0);
  n.set_cv(0.05).set_cv(op_kind::backward_weight, 0.1).set_seed(7);
  CHECK(n.cv(op_kind::forward) == 0.05);
  CHECK(n.cv(op_kind::backward_weight) == 0.1);
  CHECK(n.cv(op_kind::send_forward) == 0.0);
  CHECK(n.seed() == 7);
  CHECK_FALSE(n.is_none());

  perturbation s;
  s.set_straggler(4, 2, 1.05);
  CHECK(s.slowdown(2) == 1.05);
  CHECK(s.slowdown(1) == 1.0);
  CHECK_FALSE(s.is_none());
  // A factor of 1 everywhere and stalls of zero length are no noise.
  perturbation one;
  one.set_stage_slowdown({1.0, 1.0}).set_stalls({0.5, 0.0});
  CHECK(one.is_none());
}

TEST_CASE("perturbation: invalid values name the field and the rule", "[perturbation]") {
  using Catch::Matchers::Contains;
  perturbation n;
  CHECK_THROWS_WITH(n.set_cv(-0.1),
                    "perturbation: cv: must be a finite number >= 0 and <= 10, got -0.1");
  CHECK_THROWS_WITH(n.set_cv(1e155), Contains("<= 10, got 1e+155"));
  CHECK_THROWS_WITH(n.set_link_cv(-1), Contains("link_cv: must be a finite number >= 0"));
  CHECK_THROWS_WITH(n.set_cv(op_kind::send_forward, 0.1), Contains("cv of SEND_F"));
  CHECK_THROWS_WITH(n.set_stage_slowdown({1.0, 0.0}),
                    "perturbation: stage_slowdown: stage 1's factor must be finite and > 0, got 0");
  CHECK_THROWS_WITH(n.set_straggler(4, 4, 1.1),
                    "perturbation: straggler: stage 4 must be < stages (p=4)");
  CHECK_THROWS_WITH(n.set_stalls({1.5, 1.0}),
                    "perturbation: stalls.probability: must be in [0, 1], got 1.5");
  CHECK_THROWS_WITH(n.set_stalls({0.1, -2.0}),
                    "perturbation: stalls.duration: must be finite and >= 0, got -2");
  try {
    n.set_cv(std::nan(""));
    FAIL("a NaN cv was accepted");
  } catch (const field_error& e) {
    CHECK(e.field() == "cv");
  }
  n.set_stage_slowdown({1.0, 1.1});
  CHECK_THROWS_WITH(n.check_shape(4, "simulate_perturbed"),
                    Contains("simulate_perturbed: perturbation stage_slowdown (2 entries)"));
  CHECK_NOTHROW(n.check_shape(2, "x"));
}
