// Fault injection for the drivers: exceptions of several types thrown at random ops,
// slow ops, several stages failing at once, and ops that never return, each repeated many
// times over random schedules, compute-only and lowered. Every run must end (no hang), report
// the failure as one execution_error naming the stage and op, leave every stage having run a
// prefix of its list, and leak nothing: messages own heap memory, so LeakSanitizer in the ASan
// build sees any message the drivers drop on the floor. Tagged [exec]: the TSan stage runs them.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/thread_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/transform/comm_lowering.hpp>

#include "support/registry_shapes.hpp"

using namespace pipesched;

namespace {

/// What a faulty op does.
enum class fault : std::uint8_t { none, runtime_error, bad_alloc, non_std, slow };

/// Shared by all stages of one run; each stage writes only its own slots.
struct fault_plan {
  std::vector<std::vector<fault>> at;  // at[stage][op index]
  std::vector<std::size_t> calls;      // ops entered, per stage
};

/// Messages own heap memory (a leak shows in LeakSanitizer); faults follow the plan.
struct faulty_executor {
  using message = std::shared_ptr<std::vector<double>>;
  fault_plan* plan;

  message run(stage_index s, const op& o, message&& in) {
    const std::size_t i = plan->calls[s]++;
    switch (plan->at[s][i]) {
      case fault::runtime_error:
        throw std::runtime_error("injected at stage " + std::to_string(s));
      case fault::bad_alloc:
        throw std::bad_alloc();
      case fault::non_std:
        throw 42;
      case fault::slow:
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        break;
      case fault::none:
        break;
    }
    if (is_comm(o.kind)) {
      return std::move(in);
    }
    return std::make_shared<std::vector<double>>(16, static_cast<double>(o.mb));
  }
};

schedule random_schedule(std::mt19937& rng, bool lowered) {
  const auto& entries = default_registry().entries();
  for (;;) {
    const auto& e = entries[rng() % entries.size()];
    generator_params g;
    g.stages = 1 + static_cast<std::uint32_t>(rng() % 4);
    g.microbatches = 1 + static_cast<std::uint32_t>(rng() % 6);
    g.chunks = e.default_chunks;
    if (const auto s = test_support::generate_if_served(e, g)) {
      return lowered ? lower_communication(*s) : *s;
    }
    // a shape this generator does not serve: draw again
  }
}

/// One run with `failures` injected faults (throws) and some slow ops; checks the report.
void run_with_faults(std::mt19937& rng, bool threaded, bool lowered, int failures) {
  const schedule s = random_schedule(rng, lowered);
  const std::uint32_t p = s.stages();
  fault_plan plan;
  plan.calls.assign(p, 0);
  plan.at.resize(p);
  for (stage_index st = 0; st < p; ++st) {
    plan.at[st].assign(s.ops(st).size(), fault::none);
    for (auto& f : plan.at[st]) {
      f = rng() % 8 == 0 ? fault::slow : fault::none;
    }
  }
  std::vector<std::pair<stage_index, std::size_t>> injected;
  for (int k = 0; k < failures; ++k) {
    const auto st = static_cast<stage_index>(rng() % p);
    const std::size_t i = rng() % s.ops(st).size();
    plan.at[st][i] = static_cast<fault>(1 + rng() % 3);
    injected.emplace_back(st, i);
  }
  INFO(s.name() << " p=" << p << " m=" << s.microbatches() << (lowered ? " lowered" : "")
                << (threaded ? " threaded" : " serial") << " failures=" << failures);
  faulty_executor e{&plan};
  bool reported = false;
  try {
    if (threaded) {
      run_threaded(e, s);
    } else {
      run_serial(e, s);
    }
  } catch (const execution_error& err) {
    reported = true;
    bool known = false;
    for (const auto& [st, i] : injected) {
      known = known || (err.stage() == st && err.op_index() == i && plan.at[st][i] != fault::slow);
    }
    CHECK(known);
    CHECK(err.failed_op() == s.ops(err.stage())[err.op_index()]);
    const std::string prefix =
        "stage " + std::to_string(err.stage()) + ", op " + std::to_string(err.op_index()) + " (";
    CHECK(std::string(err.what()).rfind(prefix, 0) == 0);
    switch (plan.at[err.stage()][err.op_index()]) {
      case fault::runtime_error:
        CHECK_THROWS_AS(err.rethrow_nested(), std::runtime_error);
        break;
      case fault::bad_alloc:
        CHECK_THROWS_AS(err.rethrow_nested(), std::bad_alloc);
        break;
      default:
        CHECK_THROWS_AS(err.rethrow_nested(), int);
        CHECK(std::string(err.what()).find("unknown exception") != std::string::npos);
        break;
    }
    // The reporting stage stopped right after its failing op.
    CHECK(plan.calls[err.stage()] == err.op_index() + 1);
  }
  const bool any_throw = failures > 0;
  CHECK(reported == any_throw);
  for (stage_index st = 0; st < p; ++st) {
    CHECK(plan.calls[st] <= s.ops(st).size());
    if (!any_throw) {
      CHECK(plan.calls[st] == s.ops(st).size());
    }
  }
}

struct hang_gate {
  std::mutex mu;
  std::condition_variable cv;
  bool released = false;
  int inside = 0;   // calls still blocked
  int threads = 0;  // threads that hung and have not exited yet
};

/// Counts a hung thread until the thread itself ends: its thread_local destructor runs after
/// the driver's code on that thread has returned, so a test that waits for zero leaves no
/// abandoned driver thread running into the next run or into process exit (where LeakSanitizer
/// stops the world).
struct thread_exit_signal {
  std::shared_ptr<hang_gate> gate;
  ~thread_exit_signal() {
    if (gate) {
      std::lock_guard lock(gate->mu);
      --gate->threads;
      gate->cv.notify_all();
    }
  }
};

/// Hangs at the planned ops until the gate opens (after the driver returned); may also throw.
struct fault_hanging_executor {
  struct message {};
  std::shared_ptr<hang_gate> gate;
  fault_plan* plan;
  std::vector<std::vector<bool>>* hang;

  message run(stage_index s, const op&, message&&) {
    const std::size_t i = plan->calls[s]++;
    if ((*hang)[s][i]) {
      auto g = gate;  // the executor may be gone once released
      thread_local thread_exit_signal on_exit;
      std::unique_lock lock(g->mu);
      on_exit.gate = g;
      ++g->threads;
      ++g->inside;
      g->cv.wait(lock, [&] { return g->released; });
      --g->inside;
      g->cv.notify_all();
      return {};
    }
    if (plan->at[s][i] == fault::runtime_error) {
      throw std::runtime_error("injected");
    }
    return {};
  }
};

}  // namespace

TEST_CASE("fault injection: random throws and slow ops, serial and threaded, plain and lowered",
          "[exec][reliability][fault_injection]") {
  std::mt19937 rng(2024);
  for (int run = 0; run < 400; ++run) {
    const bool threaded = run % 2 == 0;
    const bool lowered = run % 4 >= 2;
    const int failures = run % 5 == 0 ? 0 : 1 + static_cast<int>(rng() % 3);
    run_with_faults(rng, threaded, lowered, failures);
  }
}

TEST_CASE("fault injection: ops that never return, with and without a concurrent throw",
          "[exec][reliability][fault_injection]") {
  std::mt19937 rng(77);
  for (int run = 0; run < 24; ++run) {
    const schedule s = random_schedule(rng, run % 2 == 1);
    const std::uint32_t p = s.stages();
    fault_plan plan;
    plan.calls.assign(p, 0);
    plan.at.resize(p);
    std::vector<std::vector<bool>> hang(p);
    for (stage_index st = 0; st < p; ++st) {
      plan.at[st].assign(s.ops(st).size(), fault::none);
      hang[st].assign(s.ops(st).size(), false);
    }
    const auto hs = static_cast<stage_index>(rng() % p);
    const std::size_t hi = rng() % s.ops(hs).size();
    hang[hs][hi] = true;
    const bool also_throw = run % 3 == 0;
    stage_index ts = 0;
    std::size_t ti = 0;
    if (also_throw) {
      ts = static_cast<stage_index>(rng() % p);
      ti = rng() % s.ops(ts).size();
      if (!hang[ts][ti]) {
        plan.at[ts][ti] = fault::runtime_error;
      }
    }
    INFO(s.name() << " p=" << p << " hang at stage " << hs << " op " << hi);
    auto gate = std::make_shared<hang_gate>();
    {
      fault_hanging_executor e{gate, &plan, &hang};
      try {
        // Far above any ordinary op here, even under a sanitizer on a loaded 2-core machine:
        // only the hanging op may time out.
        run_threaded(e, s, {std::chrono::milliseconds(250)});
        FAIL("no exception");
      } catch (const execution_error& err) {
        const bool is_hang = err.stage() == hs && err.op_index() == hi;
        const bool is_throw = also_throw && err.stage() == ts && err.op_index() == ti;
        CHECK((is_hang || is_throw));
        if (is_hang) {
          CHECK_THROWS_AS(err.rethrow_nested(), op_timeout_error);
          CHECK(std::string(err.what()).find("op did not return within 250 ms (op_timeout)") !=
                std::string::npos);
        }
      }
      std::lock_guard lock(gate->mu);
      gate->released = true;
    }
    gate->cv.notify_all();
    std::unique_lock lock(gate->mu);
    gate->cv.wait(lock, [&] { return gate->inside == 0 && gate->threads == 0; });
    CHECK(gate->inside == 0);
  }
}
