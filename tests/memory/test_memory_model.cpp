#include <limits>

#include <catch2/catch.hpp>

#include <pipesched/memory/memory_model.hpp>

using namespace pipesched;

TEST_CASE("memory_model: defaults and uniform sizes", "[memory][model]") {
  const memory_model d;
  CHECK(d.is_uniform());
  CHECK(d.at(3).activation == 1);
  CHECK(d.at(3).weight_grad_input == 0.5);
  CHECK(d.at(3).received == 0);
  CHECK(d.static_memory(0) == 0);

  const auto u = memory_model::uniform(4, 1);
  CHECK(u.at(0, 1) == chunk_memory{4, 1, 0});
}

TEST_CASE("memory_model: per-stage, per-chunk and static memory", "[memory][model]") {
  memory_model m;
  m.set_stage_memory({chunk_memory{2, 1, 0}, chunk_memory{3, 0, 0.5}});
  CHECK_FALSE(m.is_uniform());
  CHECK(m.at(1).activation == 3);
  CHECK(m.at(1, 1).received == 0.5);
  CHECK(m.at(4).activation == 1);  // beyond the vector: the uniform entry

  m.set_chunk_memory(2, {chunk_memory{1, 0, 0}, chunk_memory{2, 0, 0}, chunk_memory{3, 0, 0},
                         chunk_memory{4, 0, 0}});
  CHECK(m.stage_memory().empty());
  CHECK(m.at(1, 1).activation == 4);
  CHECK(m.at(0, 1).activation == 2);

  m.set_static_memory({10, 20});
  CHECK(m.static_memory(1) == 20);
  CHECK(m.static_memory(2) == 0);
}

TEST_CASE("memory_model: rejects invalid sizes", "[memory][model]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_AS(memory_model::uniform(-1, 0), invalid_argument);
  CHECK_THROWS_AS(memory_model::uniform(1, 2), invalid_argument);  // M_W > M_B
  CHECK_THROWS_AS(memory_model(chunk_memory{1, 0.5, nan}), invalid_argument);
  memory_model m;
  CHECK_THROWS_AS(m.set_stage_memory({chunk_memory{1, 3, 0}}), invalid_argument);
  CHECK_THROWS_AS(m.set_chunk_memory(2, {chunk_memory{}}), invalid_argument);
  CHECK_THROWS_AS(m.set_static_memory({-1}), invalid_argument);
  CHECK_THROWS_WITH(memory_model::uniform(1, 2),
                    "memory_model: weight-gradient memory (M_W=2) must be <= activation memory "
                    "(M_B=1)");
}
