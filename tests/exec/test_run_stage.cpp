#include <exception>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/exec/detail/channel.hpp>
#include <pipesched/exec/run_stage.hpp>
#include <pipesched/gen/gpipe.hpp>
#include <pipesched/gen/zero_bubble.hpp>

#include "exec/exec_helpers.hpp"

using namespace pipesched;
using exec_test::checking_executor;

namespace {
// Runs every stage with run_stage on its own std::thread, as separate ranks would.
void run_as_ranks(checking_executor& e, const schedule& s) {
  detail::channel_hub<exec_test::tagged> hub(s.stages());
  std::vector<std::exception_ptr> errors(s.stages());
  std::vector<std::thread> ranks;
  for (stage_index st = 0; st < s.stages(); ++st) {
    ranks.emplace_back([&, st] {
      detail::channel_endpoint<exec_test::tagged> ep(hub, st);
      try {
        run_stage(e, s, st, ep);
      } catch (...) {
        errors[st] = std::current_exception();
        hub.cancel();
      }
    });
  }
  for (auto& t : ranks) {
    t.join();
  }
  for (auto& err : errors) {
    if (err) {
      std::rethrow_exception(err);
    }
  }
  CHECK(hub.pending() == 0);
}
}  // namespace

TEST_CASE("run_stage per rank routes every message to its consumer", "[exec][run_stage]") {
  const auto s = generate(zb_h1{}, 4, 6);
  checking_executor e(s);
  run_as_ranks(e, s);
  CHECK(e.finished());
  CHECK(e.calls() == s.size());
}

TEST_CASE("run_stage runs a lowered schedule: SEND/RECV go through the transport",
          "[exec][run_stage]") {
  const auto s = exec_test::lower(generate(gpipe{}, 3, 4));
  REQUIRE(s.has_comm());
  REQUIRE(validate(s).ok());
  checking_executor e(s);
  run_as_ranks(e, s);
  CHECK(e.finished());
  CHECK(e.calls() == s.size());
}

TEST_CASE("run_stage on a single stage needs no transport traffic", "[exec][run_stage]") {
  const auto s = generate(zb_h2{}, 1, 3);
  checking_executor e(s);
  detail::channel_hub<exec_test::tagged> hub(1, false);
  detail::channel_endpoint<exec_test::tagged> ep(hub, 0);
  run_stage(e, s, 0, ep);
  CHECK(e.finished());
  CHECK(hub.pending() == 0);
}

TEST_CASE("run_stage rejects bad input before running", "[exec][run_stage]") {
  const auto s = generate(gpipe{}, 2, 2);
  null_executor e;
  detail::channel_hub<null_executor::message> hub(2, false);
  detail::channel_endpoint<null_executor::message> ep(hub, 0);
  CHECK_THROWS_WITH(run_stage(e, s, 2, ep), "run_stage: stage (2) must be less than stages (p=2)");
  const auto d = exec_test::deadlocking_schedule();
  CHECK_THROWS_AS(run_stage(e, d, 0, ep), deadlock_error);
  schedule missing = schedule::sequential("gap", 2, 1);
  missing.stage_ops(0) = {make_op(op_kind::forward, 0), make_op(op_kind::backward_full, 0)};
  CHECK_THROWS_WITH(run_stage(e, missing, 0, ep),
                    Catch::StartsWith("run_stage: schedule \"gap\" is invalid: "));
}

TEST_CASE("run_stage names the stage and op of a failure", "[exec][run_stage]") {
  const auto s = generate(gpipe{}, 1, 3);
  struct failing {
    struct message {};
    message run(stage_index, const op& o, message&&) {
      if (o.kind == op_kind::backward_full && o.mb == 1) {
        throw std::runtime_error("boom");
      }
      return {};
    }
  } e;
  detail::channel_hub<failing::message> hub(1, false);
  detail::channel_endpoint<failing::message> ep(hub, 0);
  try {
    run_stage(e, s, 0, ep);
    FAIL("no exception");
  } catch (const execution_error& err) {
    CHECK(std::string(err.what()) == "stage 0, op 4 (BW1): boom");
    CHECK(err.stage() == 0);
    CHECK(err.op_index() == 4);
    CHECK(err.failed_op() == make_op(op_kind::backward_full, 1));
    CHECK_THROWS_WITH(std::rethrow_exception(err.original()), "boom");
  }
}
