#include <limits>

#include <catch2/catch.hpp>

#include <pipesched/sim/cost_model.hpp>

using namespace pipesched;

TEST_CASE("cost_model: defaults and uniform costs", "[sim][cost]") {
  const cost_model unit;
  CHECK(unit.is_uniform());
  CHECK(unit.duration(0, op_kind::forward) == 1);
  CHECK(unit.duration(5, op_kind::backward_full) == 2);
  CHECK(unit.duration(1, op_kind::send_forward) == 0);
  CHECK(unit.duration(1, op_kind::recv_backward) == 0);
  CHECK(unit.comm(0, 1) == 0);

  const auto c = cost_model::uniform(3, 4, 2, 0.5);
  CHECK(c.duration(2, op_kind::forward) == 3);
  CHECK(c.duration(2, op_kind::backward_input) == 4);
  CHECK(c.duration(2, op_kind::backward_weight) == 2);
  CHECK(c.duration(2, op_kind::backward_full) == 6);
  CHECK(c.comm(0, 1) == 0.5);
  CHECK(c.comm(1, 1) == 0);  // same stage: no transfer
  CHECK(c.uniform_costs() == op_costs{3, 4, 2});
}

TEST_CASE("cost_model: per-stage and per-chunk costs", "[sim][cost]") {
  cost_model c;
  c.set_stage_costs({op_costs{1, 2, 3}, op_costs{4, 5, 6}});
  CHECK_FALSE(c.is_uniform());
  CHECK(c.at(1).backward_input == 5);
  CHECK(c.at(1, 1).backward_input == 5);  // every chunk of a stage
  CHECK(c.at(7).forward == 1);            // beyond the vector: the uniform triple
  CHECK(c.duration(0, op_kind::backward_full) == 5);

  c.set_chunk_costs(2,
                    {op_costs{1, 1, 1}, op_costs{2, 2, 2}, op_costs{3, 3, 3}, op_costs{4, 4, 4}});
  CHECK(c.stage_costs().empty());  // per-chunk replaces per-stage
  CHECK(c.at(0, 1).forward == 2);
  CHECK(c.at(1, 0).forward == 3);
  CHECK(c.duration(1, op_kind::backward_full, 1) == 8);
  CHECK(c.chunk_costs_chunks() == 2);
}

TEST_CASE("cost_model: per-link latencies", "[sim][cost]") {
  cost_model c = cost_model::uniform(1, 1, 1, 0.25);
  c.set_link_comm(2, {0, 1.5, 2.5, 0});
  CHECK(c.comm(0, 1) == 1.5);
  CHECK(c.comm(1, 0) == 2.5);
  CHECK(c.comm(0, 0) == 0);
  CHECK(c.comm(0, 5) == 0.25);  // outside the table: the uniform latency
  c.set_comm(0.75);             // clears the table
  CHECK(c.link_comm().empty());
  CHECK(c.comm(0, 1) == 0.75);
}

TEST_CASE("cost_model: rejects negative, NaN and infinite values and bad sizes", "[sim][cost]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK_THROWS_AS(cost_model::uniform(-1, 1, 1), invalid_argument);
  CHECK_THROWS_AS(cost_model::uniform(1, nan, 1), invalid_argument);
  CHECK_THROWS_AS(cost_model::uniform(1, 1, inf), invalid_argument);
  CHECK_THROWS_AS(cost_model::uniform(1, 1, 1, -0.5), invalid_argument);
  cost_model c;
  CHECK_THROWS_AS(c.set_stage_costs({op_costs{1, -1, 1}}), invalid_argument);
  CHECK_THROWS_AS(c.set_chunk_costs(2, {op_costs{}, op_costs{}, op_costs{}}), invalid_argument);
  CHECK_THROWS_AS(c.set_chunk_costs(0, {}), invalid_argument);
  CHECK_THROWS_AS(c.set_comm(nan), invalid_argument);
  CHECK_THROWS_AS(c.set_link_comm(2, {0, 1, 1}), invalid_argument);
  CHECK_THROWS_AS(c.set_link_comm(2, {0, 1, -1, 0}), invalid_argument);
  CHECK_THROWS_WITH(cost_model::uniform(-1, 1, 1),
                    Catch::Contains("forward cost (T_F)") && Catch::Contains("must be finite"));
}
