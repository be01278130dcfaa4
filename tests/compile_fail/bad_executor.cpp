// Compile-fail cases for the executor concept's diagnostics: each CASE_* must fail to compile
// with the plain-English static_assert of detail::check_executor as the reason (ctests in
// tests/CMakeLists.txt match the message); CASE_good must compile, so a failure is never just
// a broken include path.
#include <pipesched/exec/any_executor.hpp>
#include <pipesched/exec/instrumented_executor.hpp>
#include <pipesched/exec/run_stage.hpp>
#include <pipesched/exec/serial_driver.hpp>
#include <pipesched/exec/thread_driver.hpp>

using namespace pipesched;

struct good {
  struct message {};
  message run(stage_index, const op&, message&&) { return {}; }
};
struct good_context {
  struct message {};
  message run(const op_context&, message&&) { return {}; }
};
struct no_message {
  int run(stage_index, const op&, int&&) { return 0; }
};
struct no_run {
  struct message {};
};
struct bad_return {
  struct message {};
  int run(stage_index, const op&, message&&) { return 0; }
};

struct context_bad_return {
  struct message {};
  int run(const op_context&, message&&) { return 0; }
};
// The context form is the one drivers call, so a correct short form does not excuse it.
struct context_bad_return_good_short {
  struct message {};
  int run(const op_context&, message&&) { return 0; }
  message run(stage_index, const op&, message&&) { return {}; }
};

void use(const schedule& s) {
#if defined(CASE_good)
  good e;
  run_serial(e, s);
  run_threaded(e, s);
  any_executor a(e);
  instrumented_executor<good> timed(e, s.stages());
  run_serial(timed, s);
  good_context c;
  run_serial(c, s);
  run_threaded(c, s);
  any_executor ac(c);
  instrumented_executor<good_context> timed_c(c, s.stages());
  run_threaded(timed_c, s);
#elif defined(CASE_no_message)
  no_message e;
  run_serial(e, s);
#elif defined(CASE_no_run)
  no_run e;
  run_threaded(e, s);
#elif defined(CASE_bad_return)
  bad_return e;
  run_serial(e, s);
#elif defined(CASE_context_bad_return)
  context_bad_return e;
  run_threaded(e, s);
#elif defined(CASE_context_shadows_short)
  context_bad_return_good_short e;
  run_serial(e, s);
#elif defined(CASE_run_stage)
  no_message e;
  int not_a_transport = 0;
  run_stage(e, s, 0, not_a_transport);
#elif defined(CASE_any_executor)
  any_executor a(no_run{});
#elif defined(CASE_instrumented)
  bad_return e;
  instrumented_executor<bad_return> timed(e, s.stages());
#endif
  (void)s;
}
