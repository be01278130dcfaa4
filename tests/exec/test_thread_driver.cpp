#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/gpipe.hpp>

#include "exec/exec_helpers.hpp"
#include "support/registry_shapes.hpp"

using namespace pipesched;
using exec_test::checking_executor;

namespace {
const std::vector<std::pair<std::uint32_t, std::uint32_t>> shapes = {
    {1, 1}, {1, 3}, {2, 1}, {2, 4}, {3, 2}, {3, 7}, {4, 4}, {4, 8}};

/// The schedule, or nullopt when the generator's documented shape rule refuses (p, m).
std::optional<schedule> try_generate(const generator_entry& entry,
                                     std::uint32_t p,
                                     std::uint32_t m) {
  generator_params params;
  params.stages = p;
  params.microbatches = m;
  params.chunks = entry.default_chunks;
  return test_support::generate_if_served(entry, params);
}

/// Throws at (stage, op index) and counts the ops run after the failure was raised.
struct injecting_executor {
  struct message {};
  stage_index fail_stage;
  std::size_t fail_index;
  std::vector<std::size_t> calls;  // per stage; each stage touches only its own entry
  message run(stage_index s, const op&, message&&) {
    const std::size_t i = calls[s]++;
    if (s == fail_stage && i == fail_index) {
      throw std::runtime_error("injected");
    }
    return {};
  }
};
}  // namespace

TEST_CASE("run_threaded runs every registered schedule respecting dependencies",
          "[exec][thread_driver]") {
  std::size_t runs = 0;
  for (const auto& entry : default_registry().entries()) {
    for (auto [p, m] : shapes) {
      const auto generated = try_generate(entry, p, m);
      if (!generated) {
        continue;
      }
      const schedule& s = *generated;
      INFO(entry.name << " p=" << p << " m=" << m);
      checking_executor e(s);
      REQUIRE_NOTHROW(run_threaded(e, s));
      CHECK(e.finished());
      CHECK(e.calls() == s.size());
      ++runs;
    }
  }
  CHECK(runs >= 6 * shapes.size());
}

TEST_CASE("run_threaded runs a lowered schedule", "[exec][thread_driver]") {
  const auto s = exec_test::lower(generate(gpipe{}, 4, 5));
  checking_executor e(s);
  run_threaded(e, s);
  CHECK(e.finished());
}

TEST_CASE("run_threaded: a failure at a random op stops every stage and names the op",
          "[exec][thread_driver]") {
  std::mt19937 rng(12345);
  const auto& entries = default_registry().entries();
  int runs = 0;
  while (runs < 200) {
    const auto& entry = entries[rng() % entries.size()];
    const std::uint32_t p = 1 + static_cast<std::uint32_t>(rng() % 4);
    const std::uint32_t m = 1 + static_cast<std::uint32_t>(rng() % 6);
    const auto generated = try_generate(entry, p, m);
    if (!generated) {
      continue;
    }
    const schedule& s = *generated;
    const stage_index fs = static_cast<stage_index>(rng() % p);
    const std::size_t fi = rng() % s.ops(fs).size();
    injecting_executor e{fs, fi, std::vector<std::size_t>(p, 0)};
    INFO(entry.name << " p=" << p << " m=" << m << " fail at stage " << fs << " op " << fi);
    bool caught = false;
    try {
      run_threaded(e, s);
    } catch (const execution_error& err) {
      caught = true;
      CHECK(err.stage() == fs);
      CHECK(err.op_index() == fi);
      CHECK(err.failed_op() == s.ops(fs)[fi]);
      const std::string expected = "stage " + std::to_string(fs) + ", op " + std::to_string(fi) +
                                   " (" + to_string(s.ops(fs)[fi], s.chunks() > 1) + "): injected";
      CHECK(err.what() == expected);
      CHECK_THROWS_WITH(err.rethrow_nested(), "injected");
    }
    CHECK(caught);
    // The failing stage ran nothing after its failure, and nothing ran past the end.
    CHECK(e.calls[fs] == fi + 1);
    for (stage_index st = 0; st < p; ++st) {
      CHECK(e.calls[st] <= s.ops(st).size());
    }
    ++runs;
  }
}

TEST_CASE("run_threaded refuses a deadlocking schedule instead of hanging",
          "[exec][thread_driver]") {
  const auto s = exec_test::deadlocking_schedule();
  null_executor e;
  CHECK_THROWS_WITH(
      run_threaded(e, s),
      Catch::StartsWith("run_threaded: schedule \"deadlock\" cannot run to the end: deadlock:") &&
          Catch::Contains("cycle: stage 0 -> stage 1 -> stage 0"));
  CHECK_THROWS_AS(run_threaded(e, s), deadlock_error);
  CHECK_THROWS_AS(run_threaded(e, s, {std::chrono::milliseconds(-1)}), invalid_argument);
}

namespace {
/// Blocks at (stage 1, op 2) until released; the control block outlives the executor object
/// because the blocked call keeps it alive.
struct hang_control {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  bool exited = false;
};
struct hanging_executor {
  struct message {};
  std::shared_ptr<hang_control> ctl;
  std::vector<std::size_t> calls = std::vector<std::size_t>(3, 0);
  message run(stage_index s, const op&, message&&) {
    const std::size_t i = calls[s]++;
    if (s == 1 && i == 2) {
      auto c = ctl;  // keep the control block; `this` may be gone once released
      std::unique_lock lock(c->mu);
      c->cv.wait(lock, [&] { return c->released; });
      c->exited = true;
      c->cv.notify_all();
    }
    return {};
  }
};
}  // namespace

TEST_CASE("run_threaded with op_timeout reports an op that never returns",
          "[exec][thread_driver]") {
  const auto s = generate(gpipe{}, 3, 4);
  auto ctl = std::make_shared<hang_control>();
  {
    hanging_executor e{ctl};
    try {
      run_threaded(e, s, {std::chrono::milliseconds(30)});
      FAIL("no exception");
    } catch (const execution_error& err) {
      CHECK(err.stage() == 1);
      CHECK(err.op_index() == 2);
      CHECK(std::string(err.what()) ==
            "stage 1, op 2 (F2): op did not return within 30 ms "
            "(op_timeout)");
      CHECK_THROWS_AS(err.rethrow_nested(), op_timeout_error);
    }
    std::lock_guard lock(ctl->mu);
    ctl->released = true;
  }
  ctl->cv.notify_all();
  std::unique_lock lock(ctl->mu);
  ctl->cv.wait(lock, [&] { return ctl->exited; });
  CHECK(ctl->exited);
}

TEST_CASE("run_threaded with op_timeout completes a healthy run", "[exec][thread_driver]") {
  const auto s = default_registry().generate("zb-h1", {3, 5, 0, {}, {}, {}});
  checking_executor e(s);
  run_threaded(e, s, {std::chrono::milliseconds(10000)});
  CHECK(e.finished());
}

namespace {
/// Hangs at (stage, op index) until released; otherwise every op takes a little time so the
/// watchdog also sees healthy ops in flight.
struct random_hang_executor {
  struct message {};
  std::shared_ptr<hang_control> ctl;
  stage_index hang_stage;
  std::size_t hang_index;
  std::vector<std::size_t> calls;
  message run(stage_index s, const op&, message&&) {
    const std::size_t i = calls[s]++;
    if (s == hang_stage && i == hang_index) {
      auto c = ctl;
      std::unique_lock lock(c->mu);
      c->cv.wait(lock, [&] { return c->released; });
      c->exited = true;
      c->cv.notify_all();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return {};
  }
};
}  // namespace

TEST_CASE("run_threaded op_timeout: hangs at random ops, repeated", "[exec][thread_driver]") {
  std::mt19937 rng(99);
  for (int run = 0; run < 15; ++run) {
    const std::uint32_t p = 2 + static_cast<std::uint32_t>(rng() % 3);
    const auto s = default_registry().generate("zb-h1", {p, 4, 0, {}, {}, {}});
    const stage_index hs = static_cast<stage_index>(rng() % p);
    const std::size_t hi = rng() % s.ops(hs).size();
    auto ctl = std::make_shared<hang_control>();
    {
      random_hang_executor e{ctl, hs, hi, std::vector<std::size_t>(p, 0)};
      INFO("p=" << p << " hang at stage " << hs << " op " << hi);
      try {
        run_threaded(e, s, {std::chrono::milliseconds(20)});
        FAIL("no exception");
      } catch (const execution_error& err) {
        CHECK(err.stage() == hs);
        CHECK(err.op_index() == hi);
        CHECK_THROWS_AS(err.rethrow_nested(), op_timeout_error);
      }
      std::lock_guard lock(ctl->mu);
      ctl->released = true;
    }
    ctl->cv.notify_all();
    std::unique_lock lock(ctl->mu);
    ctl->cv.wait(lock, [&] { return ctl->exited; });
  }
}

TEST_CASE("run_threaded routes messages on a V placement", "[exec][thread_driver]") {
  for (std::uint32_t p : {1u, 2u, 4u}) {
    const auto s = exec_test::v_shape_gpipe(p, 3);
    INFO("p=" << p);
    checking_executor e(s);
    run_threaded(e, s);
    CHECK(e.finished());
    const auto lowered = exec_test::lower(s);
    checking_executor e2(lowered);
    run_threaded(e2, lowered);
    CHECK(e2.finished());
  }
}
