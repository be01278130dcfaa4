// Link contention between the pipeline's sends and the data-parallel gradient all-reduce
// (docs/robustness.md §8): each stage's link carries its activation and input-gradient sends
// and, once a chunk's last W ran, the ring all-reduce of that chunk's gradients. Under FIFO a
// B-gradient send queued behind a ring step waits for it; under strict priority it does not.
//
//   link_contention [--stages P] [--microbatches M] [--replicas D] [--buckets K]
//                   [--gbps G] [--schedule NAME]...
//
// A GPT-like slice per stage: h = 4096, 32 heads, sequence 4096, micro-batch 1, 4 layers per
// stage, bf16; 300 TFLOP/s per GPU; links of G Gbit/s (default 100) and 10 us latency. Times
// in milliseconds. Defaults: p = 8, m = 32, D = 8, K = 4 buckets per chunk, schedules 1f1b,
// interleaved-1f1b, zb-h1, zb-v, v-half, dualpipev.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <pipesched/analysis/link_timing.hpp>
#include <pipesched/analysis/simulate.hpp>
#include <pipesched/gen/builtin_registry.hpp>
#include <pipesched/model/link.hpp>
#include <pipesched/model/transformer_costs.hpp>

#include "program_support.hpp"

using namespace pipesched;

int main(int argc, char** argv) try {
  std::uint32_t p = 8;
  std::uint32_t m = 32;
  std::uint32_t replicas = 8;
  std::uint32_t buckets = 4;
  std::uint32_t gbps = 100;
  std::vector<std::string> names;
  program_support::parse_args(
      "link_contention", argc, argv,
      {{"--stages", "-p", &p, 1, 100000},
       {"--microbatches", "-m", &m, 1, 100000},
       {"--replicas", "-D", &replicas, 1, 100000},
       {"--buckets", nullptr, &buckets, 1, 100000},
       {"--gbps", nullptr, &gbps, 1, 100000}},
      "link_contention [--stages P] [--microbatches M] [--replicas D] [--buckets K] [--gbps G] "
      "[--schedule NAME]...",
      {&names, "--schedule", "-s"});
  if (names.empty()) {
    names = {"1f1b", "interleaved-1f1b", "zb-h1", "zb-v", "v-half", "dualpipev"};
  }

  transformer_dims dims;
  dims.hidden = 4096;
  dims.heads = 32;
  dims.sequence = 4096;
  dims.microbatch = 1;
  dims.layers = 4;
  const transformer_profile prof = transformer_costs(dims);  // FLOPs, bytes
  const double flops_per_ms = 300e12 / 1e3;
  const double bytes_per_ms = static_cast<double>(gbps) * 1e9 / 8 / 1e3;
  const cost_model costs = cost_model::uniform(prof.costs.forward / flops_per_ms,
                                               prof.costs.backward_input / flops_per_ms,
                                               prof.costs.backward_weight / flops_per_ms, 0.01);
  link_model links = transformer_link_model(dims, bytes_per_ms, replicas);
  links.bulk.buckets_per_chunk = buckets;
  links.bulk.step_latency = 0.01;
  link_model no_bulk = links;
  no_bulk.bulk.replicas = 1;

  const op_costs c = costs.for_shape(p, 1, "link_contention").at(0);
  std::printf(
      "### p=%u, m=%u, D=%u, per stage T_F=%.1f T_B=%.1f T_W=%.1f ms, link %u Gbit/s: "
      "message %.2f ms, gradients %.0f MB per stage in %u bucket(s) per chunk\n\n",
      p, m, replicas, c.forward, c.backward_input, c.backward_weight, gbps,
      links.activation_bytes / bytes_per_ms, links.bulk.bytes(0) / 1e6, buckets);
  std::printf(
      "| schedule | free links | links, no all-reduce | FIFO: iteration | makespan | stall "
      "behind bulk | priority: iteration | makespan | stall behind bulk |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  generator_params gp;
  gp.stages = p;
  gp.microbatches = m;
  gp.costs = costs;
  bool removed = true;
  bool never_slower = true;
  double fifo_stall = 0.0;
  for (const std::string& name : names) {
    const schedule s = default_registry().generate(name, gp);
    const double free_links = simulate(s, costs).makespan;
    const link_timing_result alone = simulate_links(s, costs, {.links = no_bulk});
    links.discipline = link_discipline::fifo;
    const link_timing_result f = simulate_links(s, costs, {.links = links});
    links.discipline = link_discipline::priority;
    const link_timing_result q = simulate_links(s, costs, {.links = links});
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", name.c_str(),
                free_links, alone.makespan, f.iteration, f.makespan, f.stall_behind_bulk,
                q.iteration, q.makespan, q.stall_behind_bulk);
    removed = removed && q.stall_behind_bulk == 0.0;
    never_slower = never_slower && q.iteration <= f.iteration;
    fifo_stall += f.stall_behind_bulk;
  }
  std::printf(
      "\nstall behind bulk: the time B-gradient and activation sends waited while their link "
      "sent all-reduce bytes (summed over messages)\n");
  if (removed && fifo_stall > 0.0) {
    std::printf("priority removes every stall behind bulk traffic (FIFO: %.1f ms in all)%s\n",
                fifo_stall, never_slower ? " and is never slower than FIFO" : "");
  } else {
    std::printf("no stall to remove (FIFO: %.1f ms behind bulk)\n", fifo_stall);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "link_contention: %s\n", e.what());
  return 1;
}
