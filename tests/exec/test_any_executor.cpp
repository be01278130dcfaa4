#include <memory>
#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/exec/any_executor.hpp>
#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/sleep_executor.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/zb_v.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "exec/exec_helpers.hpp"

using namespace pipesched;

static_assert(executor<any_executor>);
static_assert(std::movable<any_message>);
static_assert(!std::copyable<any_message>);

TEST_CASE("any_message holds one value of any movable type", "[exec][any_executor]") {
  any_message empty;
  CHECK_FALSE(empty.has_value());
  CHECK(empty.type() == typeid(void));
  CHECK(empty.take<int>() == 0);
  any_message m(std::make_unique<int>(5));
  CHECK(m.has_value());
  CHECK(m.get_if<int>() == nullptr);
  CHECK_THROWS_AS(m.take<std::string>(), std::logic_error);
  auto p = m.take<std::unique_ptr<int>>();
  CHECK(*p == 5);
  CHECK_FALSE(m.has_value());
}

TEST_CASE("any_executor runs a wrapped executor under both drivers", "[exec][any_executor]") {
  const auto s = generate(zb_h1{}, 3, 4);
  SECTION("by reference, serial") {
    exec_test::checking_executor inner(s);
    auto erased = any_executor::ref(inner);
    run_serial(erased, s);
    CHECK(inner.finished());
  }
  SECTION("by reference, threads") {
    exec_test::checking_executor inner(s);
    auto erased = any_executor::ref(inner);
    run_threaded(erased, s);
    CHECK(inner.finished());
  }
  SECTION("owning") {
    any_executor erased(sleep_executor(s, cost_model::unit(), std::chrono::microseconds(1)));
    any_executor moved = std::move(erased);
    run_threaded(moved, s);
  }
}

TEST_CASE("any_executor forwards the op_context to a context executor", "[exec][any_executor]") {
  const auto s = generate(zb_v{}, 3, 4);
  exec_test::context_executor inner(s.stages());
  auto erased = any_executor::ref(inner);
  run_threaded(erased, s);
  CHECK(exec_test::check_contexts(
            s, [&](stage_index st) -> const auto& { return inner.seen(st); }) == "");
  // A direct short-form call can't make up the context: refused, not guessed.
  CHECK_THROWS_WITH(erased.run(0, make_op(op_kind::forward, 0), {}),
                    Catch::StartsWith("any_executor: the wrapped executor has no run(stage_index"));
  // A short-form executor still takes direct short-form calls.
  any_executor plain(null_executor{});
  CHECK(plain.run(0, make_op(op_kind::forward, 0), {}).has_value());
}
