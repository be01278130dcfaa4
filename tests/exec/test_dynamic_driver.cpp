#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/dynamic_policy.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/exec/dynamic_driver.hpp>
#include <pipesched/exec/sleep_executor.hpp>

using namespace pipesched;

namespace {

// Checks what it is handed: every F of chunk > 0 and every B of a non-last chunk gets the
// message its producer returned (the producer's op, as text), in a valid order.
struct dynamic_checking_executor {
  struct message {
    std::string from;
  };
  std::mutex mu;
  std::vector<std::string> errors;

  message run(const op_context& c, message&& in) {
    const std::string expect =
        c.o.kind == op_kind::forward
            ? (c.first_chunk ? ""
                             : "F" + std::to_string(c.chunk - 1) + "/" + std::to_string(c.o.mb))
        : c.o.kind == op_kind::backward_input
            ? (c.last_chunk ? "" : "B" + std::to_string(c.chunk + 1) + "/" + std::to_string(c.o.mb))
            : "";
    if (in.from != expect) {
      std::lock_guard lock(mu);
      errors.push_back(std::string(to_string(c.o.kind)) + " got \"" + in.from + "\", expected \"" +
                       expect + "\"");
    }
    return message{std::string(to_string(c.o.kind)) + std::to_string(c.chunk) + "/" +
                   std::to_string(c.o.mb)};
  }
};

}  // namespace

TEST_CASE("run_threaded_dynamic: the order it ran validates and fits the limit",
          "[exec][dynamic_driver]") {
  struct shape {
    placement pl;
    double limit;
  };
  for (const shape& sh : {shape{placement::sequential(4), 4.0},
                          shape{placement::sequential(3), 1.0}, shape{placement::v_shape(3), 1.0},
                          shape{placement::v_shape(4), 4.0}, shape{placement::loop(3, 2), 2.0}}) {
    INFO("p " << sh.pl.stages() << " v " << sh.pl.chunks() << " limit " << sh.limit);
    dynamic_checking_executor e;
    dynamic_run_options o;
    o.memory_limit = sh.limit;
    const schedule ran = run_threaded_dynamic(e, sh.pl, 6, o);
    CHECK(e.errors.empty());
    CHECK(ran.size() == std::size_t{sh.pl.stages()} * sh.pl.chunks() * 6 * 3);
    CHECK(validate(ran).ok());
    CHECK(check_memory(ran, o.memory, memory_options::with_limit(sh.limit)).within_budget());
  }
}

TEST_CASE("run_threaded_dynamic: with modeled op times, warm-up forwards as the limit allows",
          "[exec][dynamic_driver]") {
  // Ops sleep their cost in units of 200 us. At the limit p*M_B stage 0 runs at most 4
  // forwards before its first B (which thread timing decides), and its first op is F0.
  const placement pl = placement::sequential(4);
  sleep_executor e(cost_model::uniform(1, 1, 1).for_shape(4, 1, "test"),
                   std::chrono::microseconds(200));
  dynamic_run_options o;
  o.memory_limit = 4.0;
  const schedule ran = run_threaded_dynamic(e, pl, 8, o);
  REQUIRE(validate(ran).ok());
  CHECK(check_memory(ran, o.memory, memory_options::with_limit(4.0)).within_budget());
  CHECK(ran.ops(0)[0] == op{op_kind::forward, 0});
  std::size_t warm_up = 0;
  while (ran.ops(0)[warm_up].kind == op_kind::forward) {
    ++warm_up;
  }
  CHECK(warm_up <= 4);
}

TEST_CASE("run_threaded_dynamic: a failing op stops every stage and is named",
          "[exec][dynamic_driver]") {
  struct failing {
    struct message {};
    std::atomic<int> ops{0};
    message run(stage_index s, const op& o, message&&) {
      ++ops;
      if (s == 2 && o.kind == op_kind::backward_input && o.mb == 1) {
        throw std::runtime_error("boom");
      }
      return {};
    }
  };
  failing e;
  try {
    run_threaded_dynamic(e, placement::sequential(4), 8);
    FAIL("no exception");
  } catch (const execution_error& err) {
    CHECK(err.stage() == 2);
    CHECK(err.failed_op() == op{op_kind::backward_input, 1});
    CHECK(std::string(err.what()).find("boom") != std::string::npos);
  }
  CHECK(e.ops.load() < 4 * 8 * 3);
  null_executor n;
  dynamic_run_options o;
  o.memory_limit = 0.5;
  CHECK_THROWS_WITH(run_threaded_dynamic(n, placement::sequential(2), 2, o),
                    Catch::Matchers::Contains("run_threaded_dynamic: memory_limit (0.5) is below "
                                              "the minimum any schedule needs on stage 0 (1 = "));
}

TEST_CASE("dynamic_stage: the pick rule every dynamic driver shares", "[exec][dynamic_driver]") {
  // Sequential p = 2, m = 3: stage 1 holds the last chunk (its B needs no gradient).
  const placement pl = placement::sequential(2);
  const shaped_memory_model mem = memory_model{}.for_shape(2, 1, "test");
  auto all = [](const message_key&) { return true; };
  auto none = [](const message_key&) { return false; };

  detail::dynamic_stage last(pl, 1, 3, mem, std::nullopt);
  CHECK_FALSE(last.pick(none).has_value());  // F0 waits for its activation
  REQUIRE(last.pick(all) == op{op_kind::forward, 0});
  CHECK(last.input_of(op{op_kind::forward, 0}) == message_key{1, 0, direction::forward});
  CHECK(last.producer_of(message_key{1, 0, direction::forward}) == 0);
  last.commit(op{op_kind::forward, 0});
  CHECK(last.pick(all) == op{op_kind::backward_input, 0});  // B before F
  CHECK_FALSE(last.input_of(op{op_kind::backward_input, 0}).has_value());
  CHECK(last.output_of(op{op_kind::backward_input, 0}) ==
        std::pair{stage_index{0}, message_key{0, 0, direction::backward}});
  last.commit(op{op_kind::backward_input, 0});
  CHECK(last.pick(all) == op{op_kind::forward, 1});  // F before the pending W
  CHECK(last.pick(none) == op{op_kind::backward_weight, 0});
  CHECK(last.total() == 9);

  // With a limit of one activation (M_B = 1), F1 is not admitted while B0's W still holds
  // its M_W: the pending W runs first.
  detail::dynamic_stage tight(pl, 1, 3, mem, 1.0);
  tight.commit(op{op_kind::forward, 0});
  tight.commit(op{op_kind::backward_input, 0});
  CHECK(tight.pick(all) == op{op_kind::backward_weight, 0});  // F1 not admitted (live 1)

  // Stage 0: its F needs no input; its B waits for the gradient of chunk 1.
  detail::dynamic_stage first(pl, 0, 3, mem, std::nullopt);
  CHECK(first.pick(none) == op{op_kind::forward, 0});
  CHECK(first.output_of(op{op_kind::forward, 0}) ==
        std::pair{stage_index{1}, message_key{1, 0, direction::forward}});
  first.commit(op{op_kind::forward, 0});
  CHECK(first.pick(none) == op{op_kind::forward, 1});
  CHECK(first.pick(all) == op{op_kind::backward_input, 0});
  CHECK(first.producer_of(message_key{0, 0, direction::backward}) == 1);
}

TEST_CASE("dynamic_stage: the drivers' pick by message keys makes simulate_dynamic's decisions",
          "[exec][dynamic_driver]") {
  // One policy for both: replaying simulate_dynamic's run through the drivers' class, with a
  // message counted as arrived once its producer ended (+ T_comm from another stage) by the
  // op's start, each stage picks exactly the op the simulation ran, in its order.
  struct shape {
    placement pl;
    double limit;
  };
  const cost_model costs = cost_model::uniform(1.0, 1.3, 0.7, 0.1);
  for (const shape& sh :
       {shape{placement::sequential(4), 4.0}, shape{placement::sequential(3), 1.0},
        shape{placement::v_shape(3), 1.5}, shape{placement::loop(3, 2), 2.0},
        shape{placement::custom(2, 2, {2, 0, 1, 3}), 1.0}}) {
    INFO("p " << sh.pl.stages() << " v " << sh.pl.chunks() << " limit " << sh.limit);
    const std::uint32_t m = 6;
    dynamic_policy_options o;
    o.memory_limit = sh.limit;
    const dynamic_result sim = simulate_dynamic(schedule::on("dynamic", sh.pl, m), costs, o);
    // When each message arrives at its consumer, from the simulation's times.
    std::map<message_key, double> arrival;
    for (stage_index s = 0; s < sh.pl.stages(); ++s) {
      for (const timed_op& t : sim.decided[s]) {
        const global_chunk g = sh.pl.global(s, t.o.chunk);
        if (t.o.kind == op_kind::forward && !sh.pl.is_last(g)) {
          arrival[message_key{g + 1, t.o.mb, direction::forward}] =
              t.end + costs.comm(s, sh.pl.stage_of(g + 1));
        } else if (t.o.kind == op_kind::backward_input && g > 0) {
          arrival[message_key{g - 1, t.o.mb, direction::backward}] =
              t.end + costs.comm(s, sh.pl.stage_of(g - 1));
        }
      }
    }
    const shaped_memory_model mem = o.memory.for_shape(sh.pl.stages(), sh.pl.chunks(), "test");
    const std::vector<double> cap = detail::dynamic_cap("test", sh.pl, mem, o.memory_limit);
    for (stage_index s = 0; s < sh.pl.stages(); ++s) {
      detail::dynamic_stage ds(sh.pl, s, m, mem, detail::stage_cap(cap, s));
      for (const timed_op& t : sim.decided[s]) {
        const auto arrived = [&](const message_key& k) {
          const auto it = arrival.find(k);
          return it != arrival.end() && it->second <= t.start;
        };
        const std::optional<op> x = ds.pick(arrived);
        REQUIRE(x.has_value());
        CHECK(*x == t.o);
        ds.commit(t.o);
      }
    }
  }
}

TEST_CASE("run_threaded_dynamic: no block at the minimum limit with any placement",
          "[exec][dynamic_driver]") {
  // Local chunk order unlike the model's (stage 0 holds global chunks 2 and 0): the driver's old
  // copy of the admission rule stopped with "every stage waits" at the minimum limit.
  dynamic_checking_executor e;
  dynamic_run_options o;
  o.memory_limit = 1.0;
  const placement pl = placement::custom(2, 2, {2, 0, 1, 3});
  const schedule ran = run_threaded_dynamic(e, pl, 4, o);
  CHECK(e.errors.empty());
  CHECK(validate(ran).ok());
  CHECK(check_memory(ran, o.memory, memory_options::with_limit(1.0)).within_budget());
}
