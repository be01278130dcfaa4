#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/gen/gpipe.hpp>
#include <pipesched/ir/traversal.hpp>

#include "exec/exec_helpers.hpp"
#include "support/registry_shapes.hpp"

using namespace pipesched;
using exec_test::checking_executor;

namespace {
const std::vector<std::pair<std::uint32_t, std::uint32_t>> serial_shapes = {
    {1, 1}, {1, 3}, {2, 1}, {2, 4}, {3, 2}, {3, 7}, {4, 4}, {4, 8}};

struct recording_executor {
  struct message {};
  std::vector<op_ref> order;
  message run(stage_index s, const op& o, message&&) {
    order.push_back({s, o});
    return {};
  }
};
}  // namespace

TEST_CASE("run_serial runs every registered schedule in a dependency-respecting order",
          "[exec][serial_driver]") {
  std::size_t runs = 0;
  for (const auto& entry : default_registry().entries()) {
    for (auto [p, m] : serial_shapes) {
      generator_params params;
      params.stages = p;
      params.microbatches = m;
      params.chunks = entry.default_chunks;
      const auto generated = test_support::generate_if_served(entry, params);
      if (!generated) {
        continue;  // the generator does not serve this shape
      }
      const schedule& s = *generated;
      INFO(entry.name << " p=" << p << " m=" << m);
      checking_executor e(s);
      REQUIRE_NOTHROW(run_serial(e, s));
      CHECK(e.finished());
      CHECK(e.calls() == s.size());
      ++runs;
    }
  }
  CHECK(runs >= 6 * serial_shapes.size());
}

TEST_CASE("run_serial follows traverse()'s order exactly, deterministically",
          "[exec][serial_driver]") {
  const auto s = default_registry().generate("zb-h2", {4, 6, 0, {}, {}, {}});
  std::vector<op_ref> expected;
  (void)traverse(s, [&](stage_index st, std::size_t, const op& o) { expected.push_back({st, o}); });
  recording_executor a;
  recording_executor b;
  run_serial(a, s);
  run_serial(b, s);
  CHECK(a.order == expected);
  CHECK(b.order == expected);
}

TEST_CASE("run_serial runs a lowered schedule", "[exec][serial_driver]") {
  const auto s = exec_test::lower(generate(gpipe{}, 4, 3));
  checking_executor e(s);
  run_serial(e, s);
  CHECK(e.finished());
}

TEST_CASE("run_serial reports a deadlock with its witness instead of spinning",
          "[exec][serial_driver]") {
  const auto s = exec_test::deadlocking_schedule();
  null_executor e;
  try {
    run_serial(e, s);
    FAIL("no exception");
  } catch (const deadlock_error& err) {
    const std::string what = err.what();
    CHECK(what.rfind("run_serial: schedule \"deadlock\" cannot run to the end: deadlock:", 0) == 0);
    CHECK(what.find("cycle: stage 0 -> stage 1 -> stage 0") != std::string::npos);
    CHECK(err.witness().cycle.size() == 2);
  }
}

TEST_CASE("run_serial stops at the first failing op", "[exec][serial_driver]") {
  const auto s = generate(gpipe{}, 2, 2);
  struct failing {
    struct message {};
    int calls = 0;
    message run(stage_index st, const op& o, message&&) {
      ++calls;
      if (st == 1 && o.kind == op_kind::forward && o.mb == 1) {
        throw std::runtime_error("bad F");
      }
      return {};
    }
  } e;
  try {
    run_serial(e, s);
    FAIL("no exception");
  } catch (const execution_error& err) {
    CHECK(std::string(err.what()) == "stage 1, op 1 (F1): bad F");
  }
  CHECK(e.calls == 4);  // stage 0: F0 F1; stage 1: F0 F1 (fails)
}

TEST_CASE("run_serial routes messages on a V placement", "[exec][serial_driver]") {
  for (std::uint32_t p : {1u, 3u}) {
    const auto s = exec_test::v_shape_gpipe(p, 2);
    checking_executor e(s);
    run_serial(e, s);
    CHECK(e.finished());
    const auto lowered = exec_test::lower(s);
    checking_executor e2(lowered);
    run_serial(e2, lowered);
    CHECK(e2.finished());
  }
}
