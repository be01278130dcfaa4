#include <chrono>

#include <catch2/catch.hpp>

#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/sleep_executor.hpp>
#include <pipesched/gen/one_f_one_b.hpp>

using namespace pipesched;

static_assert(executor<sleep_executor>);

TEST_CASE("sleep_executor sleeps at least its modeled cost", "[exec][sleep_executor]") {
  const auto s = generate(one_f_one_b{}, 2, 2);
  const auto costs = cost_model::uniform(3, 4, 2).for_shape(2, 1, "t");
  sleep_executor sleeper(s, costs, std::chrono::microseconds(20));
  CHECK(sleeper.unit() == std::chrono::microseconds(20));
  CHECK(sleeper.costs().duration(0, op_kind::backward_full) == 6.0);
  instrumented_executor timed(sleeper, 2);
  run_serial(timed, s);
  for (stage_index st = 0; st < 2; ++st) {
    for (const auto& t : timed.timings(st)) {
      // sleep_until never wakes early: a lower bound, never an upper one
      const double modeled = costs.duration(st, t.o.kind) * 20e-6;
      CHECK(t.end - t.start >= modeled);
    }
  }
}

TEST_CASE("sleep_executor: comm ops take no time, bad units are refused",
          "[exec][sleep_executor]") {
  // 1 s per F, if it slept
  sleep_executor sleeper(cost_model::uniform(1000, 1000, 1000).for_shape(2, 1, "t"));
  (void)sleeper.run(0, make_op(op_kind::send_forward, 0), {});
  CHECK_THROWS_AS(
      sleep_executor(cost_model::unit().for_shape(2, 1, "t"), std::chrono::nanoseconds(0)),
      invalid_argument);
  // Costs read for one chunk per stage do not time a second chunk.
  CHECK_THROWS_WITH(sleeper.run(0, make_op(op_kind::forward, 0, 1), {}),
                    "sleep_executor: chunk 1 of a schedule with more chunks per stage than the "
                    "costs were read for (v=1)");
}
