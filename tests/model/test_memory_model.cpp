#include <limits>

#include <catch2/catch.hpp>

#include <pipesched/model/memory_model.hpp>

using namespace pipesched;

namespace {
// A chunk's sizes are read only from a model read for a shape (for_shape).
template <class M>
concept reads_chunk_sizes = requires(const M& m) {
  m.at(stage_index{0}, chunk_index{1});
  m.envelope(stage_index{0}, chunk_index{1});
};
static_assert(!reads_chunk_sizes<memory_model>);
static_assert(reads_chunk_sizes<shaped_memory_model>);
}  // namespace

TEST_CASE("memory_model: defaults and uniform sizes", "[memory][model]") {
  const shaped_memory_model d = memory_model{}.for_shape(4, 1, "t");
  CHECK(d.is_uniform());
  CHECK(d.at(3).activation == 1);
  CHECK(d.at(3).weight_grad_input == 0.5);
  CHECK(d.at(3).received == 0);
  CHECK(d.static_memory(0) == 0);

  const auto u = memory_model::uniform(4, 1);
  CHECK(u.for_shape(3, 1, "t").at(2, 0) == chunk_memory{4, 1, 0});
}

TEST_CASE("memory_model: per-stage sizes are split over the chunks, per-chunk ones are not",
          "[memory][model][units]") {
  // One stage's whole slice holds M_B = 4, M_W = 1 per micro-batch: with v = 2 each chunk
  // holds half; the received buffer (the transferred tensor) and static memory are not split.
  memory_model m(chunk_memory{4, 1, 0.5});
  m.set_static_memory({10, 20});
  const shaped_memory_model v2 = m.for_shape(2, 2, "t");
  CHECK(v2.stages() == 2);
  CHECK(v2.chunks() == 2);
  CHECK(v2.at(1, 1) == chunk_memory{2, 0.5, 0.5});
  CHECK(v2.static_memory(1) == 20);
  const shaped_memory_model v4 = m.for_shape(2, 4, "t");
  CHECK(v4.at(0, 3) == chunk_memory{1, 0.25, 0.5});
  // A per-stage table is split the same way; a per-chunk table is each chunk's own size.
  memory_model st;
  st.set_stage_memory({chunk_memory{2, 1, 0}, chunk_memory{6, 2, 0}});
  CHECK(st.for_shape(2, 2, "t").at(1, 0) == chunk_memory{3, 1, 0});
  memory_model ch;
  ch.set_chunk_memory(2, {chunk_memory{1, 0, 0}, chunk_memory{2, 0, 0}, chunk_memory{3, 0, 0},
                          chunk_memory{4, 0, 0}});
  CHECK(ch.for_shape(2, 2, "t").at(1, 1).activation == 4);
}

TEST_CASE("memory_model: tables must have the schedule's shape", "[memory][model][units]") {
  memory_model st;
  st.set_stage_memory({chunk_memory{2, 1, 0}, chunk_memory{3, 1, 0}});
  CHECK_NOTHROW(st.for_shape(2, 3, "check_memory"));
  CHECK_THROWS_WITH(st.for_shape(4, 1, "check_memory"),
                    "check_memory: memory model stages table (2 entries) must hold one entry per "
                    "stage (p=4)");
  memory_model ch;
  ch.set_chunk_memory(1, {chunk_memory{}, chunk_memory{}});
  CHECK_NOTHROW(ch.for_shape(2, 1, "zb-v"));
  CHECK_THROWS_WITH(ch.for_shape(2, 2, "zb-v"),
                    "zb-v: memory model chunks table (2 x 1) must be p x v (2 x 2)");
  CHECK_THROWS_WITH(ch.for_shape(1, 1, "zb-v"),
                    "zb-v: memory model chunks table (2 x 1) must be p x v (1 x 1)");
  memory_model sm;
  sm.set_static_memory({1, 2, 3});
  CHECK_THROWS_WITH(sm.for_shape(2, 1, "check_memory"),
                    "check_memory: memory model static list (3 entries) must hold one entry per "
                    "stage (p=2)");
}

TEST_CASE("memory_model: per-stage, per-chunk and static memory", "[memory][model]") {
  memory_model m;
  m.set_stage_memory({chunk_memory{2, 1, 0}, chunk_memory{3, 0, 0.5}});
  CHECK_FALSE(m.is_uniform());
  CHECK(m.for_shape(2, 1, "t").at(1).activation == 3);
  CHECK(m.for_shape(2, 1, "t").at(1).received == 0.5);

  m.set_chunk_memory(2, {chunk_memory{1, 0, 0}, chunk_memory{2, 0, 0}, chunk_memory{3, 0, 0},
                         chunk_memory{4, 0, 0}});
  CHECK(m.stage_memory().empty());
  CHECK(m.for_shape(2, 2, "t").at(1, 1).activation == 4);
  CHECK(m.for_shape(2, 2, "t").at(0, 1).activation == 2);

  m.set_static_memory({10, 20});
  CHECK(m.static_memory(1) == 20);
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
