// V-Half and V-Min (gen/v_shape.hpp): the port of the controllable-memory authors' greedy against
// their own results on every row of tests/data/v_reference.json (bubble rate to the 4 printed
// decimals, peak activation exactly), then validity, memory and bubble over a grid of shapes.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/gen/v_shape.hpp>

using namespace pipesched;

static_assert(schedule_generator<v_half>);
static_assert(schedule_generator<v_min>);
static_assert(!schedule_generator<v_block>);

namespace {

/// Largest per-stage peak in stage activations (one micro-batch's activations of both chunks),
/// M_W = 0 as in the paper's figures.
double peak_stage_units(const schedule& s) {
  const memory_report rep = check_memory(s, memory_model::uniform(1.0, 0.0));
  REQUIRE(rep.lifetimes_ok());
  double peak = 0.0;
  for (const auto& st : rep.stages) {
    peak = std::max(peak, st.peak_stage_units);
  }
  return peak;
}

double rounded4(double x) {
  return std::round(x * 1e4) / 1e4;
}

}  // namespace

TEST_CASE("v-half / v-min: the authors' result on every reference row", "[gen][v-shape]") {
  std::ifstream in(PIPESCHED_TEST_DATA_DIR "/v_reference.json");
  REQUIRE(in);
  const nlohmann::json doc = nlohmann::json::parse(in);
  REQUIRE(doc.at("rows").size() == 48);
  for (const auto& row : doc.at("rows")) {
    const auto name = row.at("schedule").get<std::string>();
    const auto p = row.at("p").get<std::uint32_t>();
    const auto m = row.at("m").get<std::uint32_t>();
    const auto& c = row.at("chunk_costs");
    const op_costs chunk{c.at("F").get<double>(), c.at("B").get<double>(), c.at("W").get<double>()};
    INFO(name << " p=" << p << " m=" << m << " chunk costs " << chunk.forward << ","
              << chunk.backward_input << "," << chunk.backward_weight << " comm "
              << c.at("comm").get<double>());
    generator_params gp;
    gp.stages = p;
    gp.microbatches = m;
    const schedule s = default_registry().generate(name, gp);
    REQUIRE(validate(s).ok());
    cost_model costs;
    costs.set_chunk_costs(2, std::vector<op_costs>(std::size_t{2} * p, chunk))
        .set_comm(c.at("comm").get<double>());
    const simulation_result r = simulate(s, costs);
    REQUIRE(r.completed());
    // The authors' definition: 1 − 2·m·(F+B+W) / longest stage span; the library's is the same
    // at equal stages (docs/model.md §4).
    const double work = 2.0 * m * (chunk.forward + chunk.backward_input + chunk.backward_weight);
    const double rate = 1.0 - work / r.span(r.max_span_stage);
    CHECK(rounded4(rate) == row.at("authors").at("bubble_rate").get<double>());
    CHECK(rounded4(r.bubble_rate) == row.at("authors").at("bubble_rate").get<double>());
    CHECK(peak_stage_units(s) == row.at("authors").at("peak_activation").get<double>());
  }
}

namespace {

// Over p = 2..16, m = 1..4p at T_F = T_B = T_W, M_W = 0: valid; the peak within the published
// figure; the bubble rate below 1F1B's and below the published figure (docs/model.md §6).
void check_grid(bool is_min) {
  const cost_model equal = cost_model::uniform(1, 1, 1);
  for (std::uint32_t p = 2; p <= 16; ++p) {
    const double peak_bound = is_min ? (p + 4) / 3 : (p + 2) / 2;
    for (std::uint32_t m = 1; m <= 4 * p; ++m) {
      INFO((is_min ? "v-min" : "v-half") << " p=" << p << " m=" << m);
      generator_params gp;
      gp.stages = p;
      gp.microbatches = m;
      const schedule s = is_min ? v_min{}.generate(gp) : v_half{}.generate(gp);
      REQUIRE(validate(s).ok());
      REQUIRE(s.layout().kind() == placement_kind::v_shape);
      REQUIRE(s.size() == std::size_t{6} * p * m);
      // The published peaks hold for every m here, not only from m = 2p on.
      CHECK(peak_stage_units(s) <= peak_bound);
      const double rate = simulate(s, equal).bubble_rate;
      CHECK(rate < simulate(generate(one_f_one_b{}, p, m), equal).bubble_rate);
      // The published bubble figures (2p/(3m), p/(2m)) are large-p, large-m approximations:
      // every rate here is below its figure, from 0.085 (v-min p=16, m=1) to 0.82 (v-half p=15,
      // m=60) of it, so "within 10 %" holds nowhere on this grid (docs/model.md §6 has the
      // numbers). What holds: below the figure, and from p = 8 and m = 2p on at least 0.6 of it.
      const double figure = is_min ? 2.0 * p / (3.0 * m) : p / (2.0 * m);
      CHECK(rate <= figure);
      if (p >= 8 && m >= 2 * p) {
        CHECK(rate >= 0.6 * figure);
      }
    }
  }
}

}  // namespace

TEST_CASE("v-half over p = 2..16, m = 1..4p: valid, memory and bubble", "[gen][v-shape][grid]") {
  check_grid(false);
}

TEST_CASE("v-min over p = 2..16, m = 1..4p: valid, memory and bubble", "[gen][v-shape][grid]") {
  check_grid(true);
}

TEST_CASE("v-half / v-min: shapes, names, errors", "[gen][v-shape]") {
  CHECK(default_registry().at("v-half").default_chunks == 2);
  CHECK(default_registry().at("v-min").default_chunks == 2);
  CHECK(generate(v_half{}, 4, 8).name() == "v-half");
  CHECK(generate(v_min{}, 4, 8).name() == "v-min");
  for (std::uint32_t m = 1; m <= 4; ++m) {  // p = 1: both chunks on one stage
    CHECK(validate(generate(v_half{}, 1, m)).ok());
    CHECK(validate(generate(v_min{}, 1, m)).ok());
  }
  // The order depends on p and m only: a cost model does not change it.
  generator_params gp;
  gp.stages = 4;
  gp.microbatches = 8;
  const schedule a = v_min{}.generate(gp);
  gp.costs = cost_model::uniform(1, 2, 0.5, 0.3);
  CHECK(v_min{}.generate(gp) == a);
  gp.chunks = 3;
  CHECK_THROWS_WITH(v_half{}.generate(gp), Catch::Contains("chunks (v=3) must be 2"));
  gp.chunks = 0;
  gp.stages = 0;
  CHECK_THROWS_AS(v_min{}.generate(gp), invalid_argument);
}
