#include <cstdio>

#include <pipesched/analysis/schedule_report.hpp>  // validate, simulate, check_memory
#include <pipesched/io/terminal.hpp>
#include <pipesched/pipesched.hpp>

int main() {
  using namespace pipesched;
  const schedule s = generate(one_f_one_b{}, 4, 8);  // 4 stages, 8 micro-batches
  if (!validate(s).ok())
    return 1;  // complete, ordered, deadlock-free
  const simulation_result r = simulate(s, cost_model::uniform(1, 1, 1));  // T_F, T_B, T_W
  terminal_options view;
  view.width = 110;
  std::printf("%s", render_timeline(s, to_timeline(s, r), view).c_str());
  std::printf("peak memory of stage 0: %g x M_B\n", check_memory(s).peak_memory(0));
}
