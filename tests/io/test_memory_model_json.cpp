#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/io/memory_model_json.hpp>

#include "support/error_of.hpp"

using namespace pipesched;
using nlohmann::json;

namespace {
using test_support::error_of;
std::string memory_error(const std::string& text) {
  return error_of([&] { (void)read_memory_model(text); });
}
bool same(const memory_model& a, const memory_model& b) {
  return a.uniform_memory() == b.uniform_memory() && a.stage_memory() == b.stage_memory() &&
         a.chunk_memories() == b.chunk_memories() &&
         (a.chunk_memories().empty() || a.chunk_memory_chunks() == b.chunk_memory_chunks()) &&
         a.static_memories() == b.static_memories();
}
}  // namespace

TEST_CASE("memory model json: round trips and errors", "[io][memory_model_json][model_json]") {
  memory_model per_stage = memory_model::uniform(4, 1);
  per_stage.set_stage_memory({{2, 1, 0}, {3, 0.5, 0.25}}).set_static_memory({10, 20});
  memory_model per_chunk;
  per_chunk.set_chunk_memory(2, {{1, 0.5, 0}, {2, 1, 0}});
  for (const memory_model& m : {memory_model{}, per_stage, per_chunk}) {
    CHECK(same(read_memory_model(write_memory_model(m)), m));
  }
  CHECK(memory_model_to_json(memory_model{}) ==
        json::parse(R"({"version":1,"activation":1,"weight_grad_input":0.5,"received":0})"));
  CHECK(memory_error(R"({"version":1,"stages":[{"activation":1,"weight_grad_input":2}]})") ==
        "/stages/0/weight_grad_input: must be <= activation (1)");
  CHECK(memory_error(R"({"version":1,"static":[1,-2]})") ==
        "/static/1: must be a finite number >= 0, not -2");
  CHECK(memory_error(R"({"version":1,"activation":0.25})") ==
        "/activation: must be >= weight_grad_input (0.5, the default)");
}

TEST_CASE("memory model json: per-micro-batch factors", "[io][memory_model_json][microbatch]") {
  const memory_model m =
      read_memory_model(R"({"version":1,"microbatches":[[1,2],[{"activation":2},0.5]]})");
  REQUIRE(m.has_microbatch_factors());
  CHECK(m.microbatch_factors().stages() == 2);
  CHECK(m.microbatch_factors().at(0, 0, 1) == memory_factors{2, 1, 1, 1});
  CHECK(m.microbatch_factors().at(1, 0, 1) == memory_factors::all(0.5));
  CHECK(read_memory_model(write_memory_model(m)).microbatch_factors() == m.microbatch_factors());
  CHECK(memory_model_to_json(m)["microbatches"][0] == json::parse("[1.0, 2.0]"));
  CHECK_THROWS_WITH(read_memory_model(R"({"version":1,"microbatches":[{"input":-2}]})"),
                    "/microbatches/0/input: must be a finite number >= 0, not -2");
}
