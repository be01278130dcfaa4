#include <catch2/catch.hpp>

#include <pipesched/model/efficiency_curve.hpp>

using namespace pipesched;

TEST_CASE("efficiency_curve: linear in log size between points, flat outside", "[model][curve]") {
  const efficiency_curve c{{{1e9, 0.5}, {1e11, 0.9}}};
  CHECK(c.at(1e9) == Approx(0.5));
  CHECK(c.at(1e10) == Approx(0.7));  // halfway in log10
  CHECK(c.at(1e11) == Approx(0.9));
  CHECK(c.at(1e3) == Approx(0.5));
  CHECK(c.at(0.0) == Approx(0.5));
  CHECK(c.at(1e15) == Approx(0.9));
  CHECK(c.ceiling() == Approx(0.9));
  CHECK(efficiency_curve{}.at(42.0) == 1.0);
  CHECK(efficiency_curve::constant(0.3).at(1e20) == Approx(0.3));
  // Never falls with size.
  double last = 0.0;
  for (double x = 1e6; x < 1e13; x *= 1.7) {
    CHECK(c.at(x) >= last);
    last = c.at(x);
  }
}

TEST_CASE("efficiency_curve: a curve not of the documented form names its point",
          "[model][curve]") {
  auto rule = [](const efficiency_curve& c) {
    try {
      c.check("cluster", "gemm_efficiency");
    } catch (const field_error& e) {
      return e.field() + ": " + e.rule();
    }
    return std::string("accepted");
  };
  CHECK(rule({{{1e9, 0.5}, {1e10, 0.4}}}).find("gemm_efficiency/1: the curve must not fall") == 0);
  CHECK(rule({{{1e9, 0.5}, {1e10, 1.5}}})
            .find("gemm_efficiency/1: the efficiency must be in (0, 1]") == 0);
  CHECK(rule({{{1e9, 0.0}}}).find("gemm_efficiency/0: the efficiency") == 0);
  CHECK(rule({{{1e10, 0.5}, {1e9, 0.6}}}).find("gemm_efficiency/1: sizes must be ascending") == 0);
  CHECK(rule({{{-1.0, 0.5}}}).find("gemm_efficiency/0: the size must be finite and > 0") == 0);
  CHECK(rule({{{1e9, 0.5}, {1e10, 0.5}}}) == "accepted");
}
