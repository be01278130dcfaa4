#include <catch2/catch.hpp>

#include <pipesched/io/model_json.hpp>

using namespace pipesched;

// model_json.hpp only gathers the three schema headers (tested in test_cost_model_json.cpp,
// test_memory_model_json.cpp, test_simulation_json.cpp): code written before the split still
// finds every reader and writer through it.
TEST_CASE("model json: includes the cost, memory and simulation formats", "[io][model_json]") {
  CHECK(model_json_version == 1);
  CHECK(read_cost_model(write_cost_model(cost_model::uniform(2, 3, 4))).uniform_costs() ==
        op_costs{2, 3, 4});
  CHECK(read_memory_model(write_memory_model(memory_model::uniform(2, 1))).uniform_memory() ==
        chunk_memory{2, 1, 0});
  const schedule s = schedule::on("s", placement::sequential(1), 1);
  CHECK(read_simulation(
            simulation_to_json(s, simulate(s, {}, simulate_options{true, true, false})).dump())
            .name == "s");
}
