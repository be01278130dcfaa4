#include <string>

#include <catch2/catch.hpp>

#include <pipesched/gen/one_f_one_b.hpp>
#include <pipesched/io/report_text.hpp>
#include <pipesched/io/terminal.hpp>
#include <pipesched/io/timeline.hpp>

using namespace pipesched;

TEST_CASE("report text: the readable report of simulate", "[io][report_text]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  terminal_options view;
  view.width = 100;
  const schedule_report r = report_schedule(s);
  const std::string timeline_text = render_timeline(s, to_timeline(s, r.simulation), view);
  CHECK(report_text(s, r, view) ==
        timeline_text + "\n" +
            "1f1b: p=2 m=2 v=1, 8 ops\n"
            "makespan 9 cost units, bubble rate 0.3333 (largest span 9 cost units on stage 0), "
            "utilization 0.6667\n"
            " stage       span       busy       idle   idle%  peak memory  (times in cost units)\n"
            "     0          9          6          3   33.3%            2\n"
            "     1          6          6          0    0.0%            1\n");
}

TEST_CASE("report text: lower bound and budget lines", "[io][report_text]") {
  const schedule s = generate(one_f_one_b{}, 2, 2);
  report_options o;
  o.lower_bound = 8.0;
  o.memory_limit = 1.5;
  const schedule_report r = report_schedule(s, o);
  const std::string text = report_text(s, r);
  CHECK_THAT(text,
             Catch::Contains("\nlower bound on the span within this memory limit: 8 cost units "
                             "(gap 11.11%)\n stage "));
  REQUIRE(r.memory.violations.size() == 1);
  CHECK_THAT(text, Catch::EndsWith("\nmemory_budget: " + r.memory.violations[0].message + "\n"));
}
