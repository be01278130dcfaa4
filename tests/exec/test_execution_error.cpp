#include <stdexcept>
#include <string>

#include <catch2/catch.hpp>

#include <pipesched/exec/execution_error.hpp>

using namespace pipesched;

TEST_CASE("execution_error names the stage and op and nests the original",
          "[exec][execution_error]") {
  try {
    try {
      throw std::out_of_range("index 9");
    } catch (...) {
      throw execution_error(2, 7, make_op(op_kind::backward_input, 3), false,
                            detail::current_what());
    }
  } catch (const execution_error& e) {
    CHECK(std::string(e.what()) == "stage 2, op 7 (B3): index 9");
    CHECK(e.stage() == 2);
    CHECK(e.op_index() == 7);
    CHECK(e.failed_op() == make_op(op_kind::backward_input, 3));
    CHECK_THROWS_AS(e.rethrow_nested(), std::out_of_range);
    CHECK_THROWS_AS(std::rethrow_exception(e.original()), std::out_of_range);
  }
  try {
    try {
      throw 42;
    } catch (...) {
      throw execution_error(0, 1, make_op(op_kind::forward, 1, 1), true, detail::current_what());
    }
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == "stage 0, op 1 (F1.1): unknown exception");
  }
}

TEST_CASE("deadlock_error carries the witness", "[exec][execution_error]") {
  deadlock_witness w;
  w.cycle = {0, 1};
  const deadlock_error e("run_serial: schedule \"x\"", w);
  CHECK(std::string(e.what()) ==
        "run_serial: schedule \"x\" cannot run to the end: deadlock: cycle: stage 0 -> stage 1 -> "
        "stage 0");
  CHECK(e.witness().cycle == w.cycle);
  const invalid_argument& base = e;  // callers catching invalid input catch it too
  CHECK(std::string(base.what()).find("deadlock") != std::string::npos);
}
