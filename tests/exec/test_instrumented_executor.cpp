#include <concepts>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>
#include <pipesched/io/timeline.hpp>

#include "exec/exec_helpers.hpp"

using namespace pipesched;

static_assert(executor<instrumented_executor<null_executor>>);
static_assert(executor<instrumented_executor<exec_test::checking_executor>>);
static_assert(executor<instrumented_executor<exec_test::context_executor>>);

namespace {
void check_timeline(const instrumented_executor<exec_test::checking_executor>& t,
                    const schedule& s) {
  for (stage_index st = 0; st < s.stages(); ++st) {
    const auto& list = t.timings(st);
    REQUIRE(list.size() == s.ops(st).size());
    for (std::size_t i = 0; i < list.size(); ++i) {
      CHECK(list[i].stage == st);
      CHECK(list[i].index == i);
      CHECK(list[i].o == s.ops(st)[i]);
      CHECK(list[i].start >= 0.0);
      CHECK(list[i].start <= list[i].end);
      if (i > 0) {
        CHECK(list[i - 1].end <= list[i].start);
      }
      // Causality: an F on stage st > 0 starts after the F of the same mb on stage st - 1
      // ended (steady_clock is monotonic across threads).
      if (st > 0 && list[i].o.kind == op_kind::forward) {
        for (const auto& prev : t.timings(st - 1)) {
          if (prev.o.kind == op_kind::forward && prev.o.mb == list[i].o.mb) {
            CHECK(prev.end <= list[i].start);
          }
        }
      }
    }
  }
  CHECK(t.makespan() > 0.0);
}
}  // namespace

TEST_CASE("instrumented_executor records every op per stage, in list order",
          "[exec][instrumented_executor]") {
  const auto s = generate(zb_h1{}, 3, 5);
  SECTION("serial") {
    exec_test::checking_executor inner(s);
    instrumented_executor timed(inner, s.stages());
    run_serial(timed, s);
    check_timeline(timed, s);
  }
  SECTION("threads") {
    exec_test::checking_executor inner(s);
    instrumented_executor timed(inner, s.stages());
    run_threaded(timed, s);
    check_timeline(timed, s);
    CHECK(&timed.inner() == &inner);
    timed.restart();
    CHECK(timed.timings(0).empty());
    CHECK(timed.makespan() == 0.0);
  }
}

TEST_CASE("instrumented_executor rejects an unknown stage", "[exec][instrumented_executor]") {
  null_executor inner;
  instrumented_executor timed(inner, 2);
  CHECK(timed.stages() == 2);
  CHECK_THROWS_WITH(timed.run(2, make_op(op_kind::forward, 0), {}),
                    "instrumented_executor: stage (2) must be less than stages (p=2)");
}

TEST_CASE("instrumented_executor forwards the op_context to a context executor",
          "[exec][instrumented_executor]") {
  const auto s = generate(zb_v{}, 3, 4);
  exec_test::context_executor inner(s.stages());
  instrumented_executor timed(inner, s.stages());
  run_threaded(timed, s);
  CHECK(exec_test::check_contexts(
            s, [&](stage_index st) -> const auto& { return inner.seen(st); }) == "");
  for (stage_index st = 0; st < s.stages(); ++st) {
    REQUIRE(timed.timings(st).size() == s.ops(st).size());
    for (std::size_t i = 0; i < s.ops(st).size(); ++i) {
      CHECK(timed.timings(st)[i].index == i);
    }
  }
}

TEST_CASE("a measured run feeds timeline_from_measured without conversion",
          "[exec][instrumented_executor]") {
  const auto s = generate(zb_h1{}, 3, 4);
  null_executor inner;
  instrumented_executor timed(inner, s.stages());
  run_serial(timed, s);
  std::vector<timed_op> all;
  for (stage_index st = 0; st < s.stages(); ++st) {
    all.insert(all.end(), timed.timings(st).begin(), timed.timings(st).end());
  }
  const timeline tl = timeline_from_measured(s, all);
  CHECK(tl.size() == s.size());
  CHECK(tl.makespan() == timed.makespan());
  CHECK(tl.stages[1][2] == timed.timings(1)[2]);
}
