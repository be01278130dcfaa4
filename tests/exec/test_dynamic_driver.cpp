#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/check_memory.hpp>
#include <pipesched/analysis/dynamic_policy.hpp>
#include <pipesched/analysis/validate.hpp>
#include <pipesched/exec/dynamic_driver.hpp>
#include <pipesched/exec/sleep_executor.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/dualpipe.hpp>

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

// A scalar network, one weight per global chunk: F computes tanh(w x) (the first chunk of a
// route reads the micro-batch's data, the last adds 0.5 y^2 to the loss), B the input
// gradient, W the weight gradient. Results are kept per (chunk, micro-batch), so any order
// that runs the same ops on the same messages gives bit-equal numbers. Thread-safe.
class route_numeric_executor {
 public:
  using message = double;

  message run(const op_context& c, message&& in) {
    const double w = 0.5 + 0.125 * c.chunk;
    const auto key = std::pair{c.chunk, c.o.mb};
    std::lock_guard lock(mu_);
    switch (c.o.kind) {
      case op_kind::forward: {
        const double x = c.first_chunk ? 1.0 + 0.25 * c.o.mb : in;
        const double y = std::tanh(w * x);
        input_[key] = x;
        if (c.last_chunk) {
          loss_[c.o.mb] = 0.5 * y * y;
        }
        return y;
      }
      case op_kind::backward_input:
      case op_kind::backward_full: {
        const double y = std::tanh(w * input_.at(key));
        const double dy = c.last_chunk ? y : in;
        const double dpre = dy * (1.0 - y * y);
        if (c.o.kind == op_kind::backward_full) {
          grad_[key] = input_.at(key) * dpre;
        } else {
          pending_[key] = dpre;
        }
        return w * dpre;
      }
      case op_kind::backward_weight:
        grad_[key] = input_.at(key) * pending_.at(key);
        return 0.0;
      default:
        return 0.0;
    }
  }

  /// The loss of each micro-batch and the weight gradient of each (chunk, micro-batch).
  std::map<microbatch_index, double> loss() const { return loss_; }
  std::map<std::pair<global_chunk, microbatch_index>, double> grad() const { return grad_; }

 private:
  std::mutex mu_;
  std::map<std::pair<global_chunk, microbatch_index>, double> input_, pending_, grad_;
  std::map<microbatch_index, double> loss_;
};

// `sched`'s ops as a sorted list of (stage, kind, micro-batch, chunk), a fused BW as its B and
// W: the dynamic policy splits every backward.
std::vector<std::tuple<stage_index, op_kind, microbatch_index, chunk_index>> split_ops_of(
    const schedule& sched) {
  std::vector<std::tuple<stage_index, op_kind, microbatch_index, chunk_index>> out;
  for (stage_index s = 0; s < sched.stages(); ++s) {
    for (const op& o : sched.ops(s)) {
      if (o.kind == op_kind::backward_full) {
        out.emplace_back(s, op_kind::backward_input, o.mb, o.chunk);
        out.emplace_back(s, op_kind::backward_weight, o.mb, o.chunk);
      } else {
        out.emplace_back(s, o.kind, o.mb, o.chunk);
      }
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

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
        shape{placement::custom(2, 2, {2, 0, 1, 3}), 1.0}, shape{placement::dual(4), 2.0}}) {
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
        } else if (t.o.kind == op_kind::backward_input && !sh.pl.is_first(g)) {
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

TEST_CASE("dynamic_stage: on the dual placement each chunk runs its route's micro-batches",
          "[exec][dynamic_driver]") {
  // dual(4), m = 8: local chunk 0 is route 0 (micro-batches 0..3, global chunks 0..3 on stages
  // 0..3), local chunk 1 route 1 (4..7, global chunks 4..7 on stages 3..0).
  const placement pl = placement::dual(4);
  const shaped_memory_model mem = memory_model{}.for_shape(4, 2, "test");
  auto none = [](const message_key&) { return false; };
  auto all = [](const message_key&) { return true; };

  detail::dynamic_stage first(pl, 0, 8, mem, std::nullopt);
  CHECK(first.total() == 2 * 4 * 3);
  CHECK(first.pick(none) == op{op_kind::forward, 0, 0});  // route 0 enters here
  // Route 1 ends here: its F waits for global chunk 6 (stage 1) and computes the loss.
  const op f4{op_kind::forward, 4, 1};
  CHECK(first.input_of(f4) == message_key{7, 4, direction::forward});
  CHECK(first.producer_of(message_key{7, 4, direction::forward}) == 1);
  CHECK_FALSE(first.output_of(f4).has_value());
  CHECK(first.context(f4, 0).last_chunk);
  CHECK(first.output_of(op{op_kind::backward_input, 4, 1}) ==
        std::pair{stage_index{1}, message_key{6, 4, direction::backward}});
  for (int i = 0; i < 4; ++i) {
    const std::optional<op> x = first.pick(none);
    REQUIRE(x.has_value());
    CHECK(*x == op{op_kind::forward, static_cast<microbatch_index>(i), 0});
    first.commit(*x);
  }
  // Chunk 0's micro-batches are done forward; chunk 1 starts at micro-batch 4.
  CHECK(first.pick(none) == std::nullopt);
  CHECK(first.pick([](const message_key& k) { return k.chunk == 7; }) == f4);

  detail::dynamic_stage last(pl, 3, 8, mem, std::nullopt);
  // Route 1 enters here (global chunk 4), its activation going to stage 2.
  CHECK(last.pick(none) == op{op_kind::forward, 4, 1});
  CHECK(last.context(op{op_kind::forward, 4, 1}, 0).first_chunk);
  CHECK(last.output_of(op{op_kind::forward, 4, 1}) ==
        std::pair{stage_index{2}, message_key{5, 4, direction::forward}});
  last.commit(op{op_kind::forward, 4, 1});
  // Both chunks' next F may run: global chunk 4 comes later in the model than 3.
  auto activations = [](const message_key& k) { return k.dir == direction::forward; };
  CHECK(last.pick(activations) == op{op_kind::forward, 5, 1});
  CHECK(last.pick(all) == op{op_kind::backward_input, 4, 1});
}

TEST_CASE("run_threaded_dynamic: dualpipe's routes, its static ops and its numbers",
          "[exec][dynamic_driver]") {
  // Each micro-batch runs only along its route: the dynamic order holds the ops of the static
  // dualpipe schedule (BW split), validates, and computes what run_threaded computes with it.
  for (const auto& [p, m] : {std::pair{4u, 8u}, std::pair{6u, 12u}}) {
    generator_params gp;
    gp.stages = p;
    gp.microbatches = m;
    const schedule fixed = dualpipe{}.generate(gp);
    route_numeric_executor want;
    run_threaded(want, fixed);
    for (const double limit : {0.0, 2.0, 4.0}) {  // 0: none; 2: the minimum
      INFO("p " << p << " m " << m << " limit " << limit);
      dynamic_run_options o;
      if (limit > 0.0) {
        o.memory_limit = limit;
      }
      route_numeric_executor got;
      const schedule ran = run_threaded_dynamic(got, fixed.layout(), m, o);
      CHECK(ran.size() == std::size_t{p} * m * 3);
      CHECK(validate(ran).ok());
      CHECK(split_ops_of(ran) == split_ops_of(fixed));
      if (limit > 0.0) {
        CHECK(check_memory(ran, o.memory, memory_options::with_limit(limit)).within_budget());
      }
      CHECK(got.loss().size() == m);
      CHECK(got.loss() == want.loss());
      CHECK(got.grad() == want.grad());
    }
  }
}
