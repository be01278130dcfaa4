#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "pipesched/ir/error.hpp"
#include "pipesched/ir/op.hpp"
#include "pipesched/ir/traversal.hpp"

namespace pipesched {

/// An op failed while a driver ran a schedule. Names where: stage, position in the stage's
/// list and the op; what() reads "stage 2, op 7 (B3): <original what()>". The original
/// exception is nested (std::rethrow_if_nested(e) or original()).
/// Drivers throw it from the caller's thread after every stage has stopped.
class execution_error : public std::runtime_error, public std::nested_exception {
 public:
  /// Call inside a catch block: the exception being handled becomes the nested one.
  execution_error(stage_index stage,
                  std::size_t op_index,
                  const op& failed,
                  bool chunked,
                  const std::string& what)
      : std::runtime_error("stage " + std::to_string(stage) + ", op " + std::to_string(op_index) +
                           " (" + to_string(failed, chunked) + "): " + what),
        stage_(stage),
        op_index_(op_index),
        op_(failed) {}

  stage_index stage() const noexcept { return stage_; }
  std::size_t op_index() const noexcept { return op_index_; }
  const op& failed_op() const noexcept { return op_; }
  /// The exception the op threw (null if constructed outside a catch block).
  std::exception_ptr original() const noexcept { return nested_ptr(); }

 private:
  stage_index stage_;
  std::size_t op_index_;
  op op_;
};

/// A driver was given a schedule that cannot run to the end. what() reads
/// `run_threaded: schedule "x" cannot run to the end: ` + deadlock_witness::describe();
/// witness() is the full witness.
class deadlock_error : public invalid_argument {
 public:
  /// `context` names the caller and the schedule, e.g. `run_serial: schedule "zb-h1"`.
  deadlock_error(const std::string& context, deadlock_witness w)
      : invalid_argument(context + " cannot run to the end: " + w.describe()),
        witness_(std::move(w)) {}
  const deadlock_witness& witness() const noexcept { return witness_; }

 private:
  deadlock_witness witness_;
};

namespace detail {
/// The what() of the exception currently being handled, for wrapping.
inline std::string current_what() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace detail

}  // namespace pipesched
