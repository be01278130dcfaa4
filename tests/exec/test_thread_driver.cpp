#include <algorithm>
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
#include <tuple>
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
const std::vector<std::pair<std::uint32_t, std::uint32_t>> thread_shapes = {
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
    for (auto [p, m] : thread_shapes) {
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
  CHECK(runs >= 6 * thread_shapes.size());
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
/// Shared by a hanging op and the test; outlives the executor object because the blocked call
/// keeps it alive.
struct hang_control {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;  // the test lets it return
  bool exited = false;    // it has returned
};

/// Called by the hanging op: blocks until the test releases it.
void hang(const std::shared_ptr<hang_control>& ctl) {
  auto c = ctl;  // keep the control block; the executor may be gone once released
  std::unique_lock lock(c->mu);
  c->cv.wait(lock, [&] { return c->released; });
  c->exited = true;
  c->cv.notify_all();
}

/// Lets the hung op return.
void release_hung_op(const std::shared_ptr<hang_control>& ctl) {
  {
    std::lock_guard lock(ctl->mu);
    ctl->released = true;
  }
  ctl->cv.notify_all();
}

/// Waits for the released op to return, 10 s at most: false when it never started or never
/// returned (the test fails instead of hanging).
bool hung_op_returned(const std::shared_ptr<hang_control>& ctl) {
  std::unique_lock lock(ctl->mu);
  return ctl->cv.wait_for(lock, std::chrono::seconds(10), [&] { return ctl->exited; });
}

/// Blocks at (stage 1, op 2) until released.
struct thread_hanging_executor {
  struct message {};
  std::shared_ptr<hang_control> ctl;
  std::vector<std::size_t> calls = std::vector<std::size_t>(3, 0);
  message run(stage_index s, const op&, message&&) {
    const std::size_t i = calls[s]++;
    if (s == 1 && i == 2) {
      hang(ctl);
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
    thread_hanging_executor e{ctl};
    try {
      run_threaded(e, s, {std::chrono::milliseconds(100)});
      FAIL("no exception");
    } catch (const execution_error& err) {
      CHECK(err.stage() == 1);
      CHECK(err.op_index() == 2);
      CHECK(std::string(err.what()) ==
            "stage 1, op 2 (F2): op did not return within 100 ms "
            "(op_timeout)");
      CHECK_THROWS_AS(err.rethrow_nested(), op_timeout_error);
    }
    release_hung_op(ctl);
    CHECK(hung_op_returned(ctl));  // the executor outlives the return
  }
}

TEST_CASE("run_threaded with op_timeout completes a healthy run", "[exec][thread_driver]") {
  const auto s = default_registry().generate("zb-h1", {3, 5, 0, {}, {}, {}});
  checking_executor e(s);
  run_threaded(e, s, {std::chrono::milliseconds(10000)});
  CHECK(e.finished());
}

TEST_CASE("run_threaded refuses an op_timeout beyond max_op_timeout", "[exec][thread_driver]") {
  const auto s = generate(gpipe{}, 2, 2);
  null_executor e;
  thread_driver_options opts;
  opts.op_timeout = thread_driver_options::max_op_timeout + std::chrono::milliseconds(1);
  CHECK_THROWS_WITH(run_threaded(e, s, opts),
                    "run_threaded: op_timeout (1099511627777 ms) must be >= 0 (0: no limit) and "
                    "at most max_op_timeout (1099511627776 ms)");
  opts.op_timeout = thread_driver_options::max_op_timeout;
  CHECK_NOTHROW(run_threaded(e, s, opts));
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
      hang(ctl);
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return {};
  }
};
}  // namespace

// The watchdog confirms before it blames (thread_driver_options::op_timeout): a healthy op
// that a loaded machine keeps inside run() past the limit returns during the pause, and the
// run goes on to the hang. Only a healthy op kept from running for twice the limit (300 ms; a
// 2-core machine at load 25 under ASan was seen to hold one for 100 ms) could be named.
TEST_CASE("run_threaded op_timeout: hangs at random ops, repeated", "[exec][thread_driver]") {
  std::mt19937 rng(99);
  for (int run = 0; run < 15; ++run) {
    const std::uint32_t p = 2 + static_cast<std::uint32_t>(rng() % 3);
    const auto s = default_registry().generate("zb-h1", {p, 4, 0, {}, {}, {}});
    const stage_index hs = static_cast<stage_index>(rng() % p);
    const std::size_t hi = rng() % s.ops(hs).size();
    auto ctl = std::make_shared<hang_control>();
    INFO("p=" << p << " hang at stage " << hs << " op " << hi);
    {
      random_hang_executor e{ctl, hs, hi, std::vector<std::size_t>(p, 0)};
      try {
        run_threaded(e, s, {std::chrono::milliseconds(150)});
        FAIL("no exception");
      } catch (const execution_error& err) {
        CHECK(err.stage() == hs);
        CHECK(err.op_index() == hi);
        CHECK_THROWS_AS(err.rethrow_nested(), op_timeout_error);
      }
      release_hung_op(ctl);
      CHECK(hung_op_returned(ctl));  // the executor outlives the return
    }
  }
}

namespace {
/// Hangs at one op, after a slow op on the same stage; counts the ops each stage ran.
struct scripted_hang_executor {
  struct message {};
  std::shared_ptr<hang_control> ctl;
  stage_index stage;
  std::size_t slow_index;
  std::size_t hang_index;
  std::vector<std::size_t> calls;
  message run(stage_index s, const op&, message&&) {
    const std::size_t i = calls[s]++;
    if (s == stage && i == slow_index) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    } else if (s == stage && i == hang_index) {
      hang(ctl);
    }
    return {};
  }
};

std::size_t index_of(const schedule& s, stage_index st, const op& o) {
  const auto ops = s.ops(st);
  return static_cast<std::size_t>(std::find(ops.begin(), ops.end(), o) - ops.begin());
}
}  // namespace

// Stage 0 runs all its forwards at once and then waits for stage 1's gradient (in the
// lowered schedule, in its RECV); stage 1 hangs in F3 after a slow F2. Stage 0's wait began
// before the hung op and is the longest: it must not be blamed, since it is not inside run().
TEST_CASE("run_threaded op_timeout: a stage waiting on a message is not blamed",
          "[exec][thread_driver]") {
  const auto compute_only = generate(gpipe{}, 2, 4);
  for (const schedule& s : {compute_only, exec_test::lower(compute_only)}) {
    INFO(s.name());
    const std::size_t slow = index_of(s, 1, make_op(op_kind::forward, 2));
    const std::size_t hung = index_of(s, 1, make_op(op_kind::forward, 3));
    const auto ops0 = s.ops(0);
    // Stage 0's ops up to its first one that needs stage 1's output.
    const auto waits = std::find_if(ops0.begin(), ops0.end(), [](const op& o) {
      return o.kind == op_kind::recv_backward || o.kind == op_kind::backward_full;
    });
    const auto ready = static_cast<std::size_t>(waits - ops0.begin());
    REQUIRE(hung < s.ops(1).size());
    REQUIRE(ready < ops0.size());
    auto ctl = std::make_shared<hang_control>();
    {
      scripted_hang_executor e{ctl, 1, slow, hung, std::vector<std::size_t>(2, 0)};
      try {
        run_threaded(e, s, {std::chrono::milliseconds(150)});
        FAIL("no exception");
      } catch (const execution_error& err) {
        CHECK(err.stage() == 1);
        CHECK(err.op_index() == hung);
        CHECK_THROWS_AS(err.rethrow_nested(), op_timeout_error);
      }
      CHECK(e.calls[0] == ready);  // stage 0 was waiting, not inside an op
      release_hung_op(ctl);
      CHECK(hung_op_returned(ctl));  // the executor outlives the return
    }
  }
}

namespace {
/// checking_executor, with one op that sleeps.
struct slow_op_executor {
  using message = exec_test::tagged;
  checking_executor* inner;
  stage_index slow_stage;
  std::size_t slow_index;
  std::chrono::milliseconds slow_for;
  std::vector<std::size_t> calls;
  message run(stage_index s, const op& o, message&& in) {
    if (s == slow_stage && calls[s]++ == slow_index) {
      std::this_thread::sleep_for(slow_for);
    }
    return inner->run(s, o, std::move(in));
  }
};
}  // namespace

// An op inside run() past op_timeout that then returns (here at 1.3 times the limit, well
// within the pause's further op_timeout) is slow, not hung: the run completes.
TEST_CASE("run_threaded op_timeout: an op that is slow but returns does not fail the run",
          "[exec][thread_driver]") {
  const auto s = default_registry().generate("zb-h1", {3, 4, 0, {}, {}, {}});
  checking_executor inner(s);
  slow_op_executor e{&inner, 1, 3, std::chrono::milliseconds(390), std::vector<std::size_t>(3, 0)};
  CHECK_NOTHROW(run_threaded(e, s, {std::chrono::milliseconds(300)}));
  CHECK(inner.finished());
}

namespace {
/// Sleeps in the listed ops (stage, op index, how long) and hangs at (hang_stage, hang_index).
struct staggered_executor {
  struct message {};
  std::shared_ptr<hang_control> ctl;
  std::vector<std::tuple<stage_index, std::size_t, std::chrono::milliseconds>> sleeps;
  stage_index hang_stage;
  std::size_t hang_index;
  std::vector<std::size_t> calls;
  message run(stage_index s, const op&, message&&) {
    const std::size_t i = calls[s]++;
    if (s == hang_stage && i == hang_index) {
      // Released after the run has failed: touch nothing of this executor afterwards (the test
      // may already have destroyed it).
      hang(ctl);
      return {};
    }
    for (const auto& [st, index, d] : sleeps) {
      if (st == s && index == i) {
        std::this_thread::sleep_for(d);
      }
    }
    return {};
  }
};
}  // namespace

// Two healthy ops stay inside run() past the limit next to a hung one, the first of them
// entered before it and returning only in the pause's second op_timeout: while ops return the
// watchdog waits, so the hung op is named, not the oldest healthy one. At 400 ms: the slow ops
// enter at 0 and 40 ms and return at 1000 and 640 ms, the hang enters at 80 ms; the pause
// starts at 400-450 ms, its first op_timeout sees the second return, its second the first.
TEST_CASE("run_threaded op_timeout: ops that return during the pause are waited for",
          "[exec][thread_driver]") {
  using ms = std::chrono::milliseconds;
  const auto s = generate(gpipe{}, 3, 8);  // each stage runs its forwards back to back
  auto ctl = std::make_shared<hang_control>();
  {
    // Stage 0 sleeps in F5 (its first five forwards are instant), stage 1 in F3 after 40 ms
    // in F2, stage 2 hangs in F1 after 80 ms in F0.
    staggered_executor e{ctl,
                         {{0, 5, ms(1000)}, {1, 2, ms(40)}, {1, 3, ms(600)}, {2, 0, ms(80)}},
                         2,
                         1,
                         std::vector<std::size_t>(3, 0)};
    try {
      run_threaded(e, s, {ms(400)});
      FAIL("no exception");
    } catch (const execution_error& err) {
      CHECK(err.stage() == 2);
      CHECK(err.op_index() == 1);
      CHECK_THROWS_AS(err.rethrow_nested(), op_timeout_error);
    }
    release_hung_op(ctl);
    CHECK(hung_op_returned(ctl));  // the executor outlives the return
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
