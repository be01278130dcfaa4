// torch_pipeline's transport (transport.hpp): every stage a thread of this process.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/thread_driver.hpp>

#include "pipelined_gpt.hpp"
#include "route_copies.hpp"
#include "transport.hpp"

namespace torch_pipeline {

const char* const program = "torch_pipeline";

int rank() {
  return 0;
}

std::optional<std::uint32_t> fixed_stages() {
  return std::nullopt;
}

double execute(gpt::pipelined_gpt& exec,
               const pipesched::schedule& sched,
               bool validate,
               gpt::cost_samples* samples) {
  pipesched::thread_driver_options to;
  to.validate = validate;
  if (samples == nullptr) {
    pipesched::run_threaded(exec, sched, to);
    return 0.0;
  }
  pipesched::instrumented_executor<gpt::pipelined_gpt> timed(exec, sched.stages());
  timed.restart();
  pipesched::run_threaded(timed, sched, to);
  for (pipesched::stage_index s = 0; s < sched.stages(); ++s) {
    samples->add(sched.layout(), timed.timings(s), exec);
  }
  return timed.makespan();
}

std::vector<pipesched::op_costs> stage_costs(const gpt::cost_samples& samples) {
  std::vector<pipesched::op_costs> out(samples.stages());
  for (pipesched::stage_index s = 0; s < samples.stages(); ++s) {
    out[s] = samples.stage_ms(s);
  }
  return out;
}

void combine(gpt::pipelined_gpt& exec,
             const pipesched::placement& pl,
             double& loss,
             double& stashed) {
  route_copies::sum_all_copies(pl, exec);
  loss = exec.loss();
  stashed = static_cast<double>(exec.stashed());
}

double shared_value(double x) {
  return x;
}

std::string shared_text(std::string text) {
  return text;
}

void share_max(std::vector<double>& /*values*/) {}

}  // namespace torch_pipeline

int main(int argc, char** argv) {
  return torch_pipeline::run(argc, argv);
}
