#include <cstddef>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <pipesched/exec/thread_driver.hpp>     // run_threaded
#include <pipesched/gen/builtin_registry.hpp>   // default_registry()
#include <pipesched/gen/generation_report.hpp>  // report_schedule(generation_result)
#include <pipesched/io/torch_csv.hpp>           // to_torch_csv: standard library only
#include <pipesched/pipesched.hpp>

using namespace pipesched;

// Your model on 4 GPUs, as your profiler measured it: per stage, one micro-batch through the
// stage's whole slice. Times in ms, memory in GiB; the library only needs one unit for each.
generator_params measured_job() {
  generator_params p;
  p.stages = 4;
  p.microbatches = 8;
  p.costs.set_stage_costs({// forward, backward (input gradient), backward (weight gradient)
                           {10.0, 11.0, 7.0},
                           {10.0, 11.0, 7.0},
                           {10.0, 11.0, 7.0},
                           {12.5, 14.0, 8.0}});  // the last stage also computes the loss
  p.costs.set_comm(0.4);                         // one activation or gradient between GPUs
  p.memory.set_stage_memory({                    // activations kept from F to B, and from B to W
                             {2.0, 0.8},
                             {2.0, 0.8},
                             {2.0, 0.8},
                             {2.5, 1.0}});
  // Weights, gradients and optimizer state: there for the whole step.
  p.memory.set_static_memory({52.0, 52.0, 52.0, 56.0});
  p.memory_limit = 64.0;  // what a GPU leaves you, static memory included
  return p;
}

// Runs a stage's ops where your framework calls its model. A message is what crosses GPUs, an
// activation forward or a gradient backward; this stand-in records which chunk sent it, so that
// the run checks that each op got the right one.
struct framework_executor {
  struct message {
    int microbatch = -1;  // -1: none (a first chunk's forward reads the data instead)
    global_chunk sender = 0;
  };
  std::vector<std::size_t> ops_run;  // per stage: one thread runs each stage
  std::vector<std::string> errors;   // per stage

  message run(const op_context& c, message&& in) {
    const bool forward = c.o.kind == op_kind::forward;
    const bool backward = c.o.kind == op_kind::backward_input || c.o.kind == op_kind::backward_full;
    // F reads chunk g-1's activation, B the gradient from chunk g+1, W nothing.
    if ((forward && !c.first_chunk) || (backward && !c.last_chunk)) {
      const global_chunk sender = forward ? c.chunk - 1 : c.chunk + 1;
      if (in.microbatch != static_cast<int>(c.o.mb) || in.sender != sender) {
        errors[c.stage] = "wrong input for " + to_string(c.o);
      }
    }
    // Here: model.forward(c.chunk, c.o.mb, ...), model.backward_input(...), and so on.
    ++ops_run[c.stage];
    return message{static_cast<int>(c.o.mb), c.chunk};
  }
};

int main(int argc, char** argv) {
  // A schedule by the name your configuration gives.
  const std::string name = argc > 1 ? argv[1] : "zb-v";
  const generator_registry& registry = default_registry();
  std::printf("schedules:");
  for (const generator_entry& entry : registry.entries()) {
    std::printf(" %s", entry.name.c_str());
  }
  std::printf("\n");

  // Generated for your numbers: cost-aware generators order the ops for them, searching ones
  // stay within the memory limit; hand-crafted ones are checked against it.
  const generation_result g = registry.generate_result(name, measured_job());

  // One call checks the schedule against the numbers it was generated for (g.params): complete
  // and deadlock-free, its time under those costs, its memory under that limit.
  const schedule_report report = report_schedule(g);
  std::printf("%s: %s, step %.1f ms, bubble %.1f %%", g.sched.name().c_str(),
              report.ok() ? "valid and fits" : "REJECTED", report.simulation.makespan,
              100.0 * report.simulation.bubble_rate);
  if (g.lower_bound) {
    std::printf(" (no order of these ops within the limit is shorter than %.1f ms)",
                *g.lower_bound);
  }
  std::printf("\n");
  for (stage_index s = 0; s < g.sched.stages(); ++s) {
    std::printf("  GPU %u: peak %.1f of %.0f GiB\n", s.value, report.memory.peak_memory(s),
                g.params.memory_limit.at(s));
  }
  for (const std::string& line : report.violations()) {
    std::printf("  %s\n", line.c_str());
  }
  if (!report.ok()) {
    return 1;
  }

  // Run it: one thread per stage, each running its stage's ops in the schedule's order as soon
  // as their inputs have arrived.
  framework_executor e;
  e.ops_run.resize(g.sched.stages());
  e.errors.resize(g.sched.stages());
  run_threaded(e, g.sched);
  for (stage_index s = 0; s < g.sched.stages(); ++s) {
    std::printf("  GPU %u ran %zu ops %s\n", s.value, e.ops_run[s],
                e.errors[s].empty() ? "with the right inputs" : e.errors[s].c_str());
  }

  // For PyTorch's pipelining runtime: one row per rank (docs/formats.md, "PyTorch CSV").
  const std::string csv = to_torch_csv(g.sched);
  std::ofstream(name + ".csv") << csv;
  std::printf("%s.csv, rank 0: %.40s...\n", name.c_str(), csv.c_str());
}
