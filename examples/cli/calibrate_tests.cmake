# `pipesched calibrate --trace`: a torch.profiler trace in, the cluster with the GEMM efficiency
# curve fitted to its GEMMs out (docs/model.md §10.3). Uses pipesched_cli_test() from
# cli_tests.cmake; the bad inputs are docs/errors.md's. The option is spelled --trace=FILE here:
# after `cmake -P script`, a bare --trace is still cmake's own (it turns on cmake's tracing).
set(calib_errors ${PROJECT_SOURCE_DIR}/docs/examples/errors)
set(calib_gpt ${PROJECT_SOURCE_DIR}/tests/data/gpt_cpu)
set(calib_work ${CMAKE_CURRENT_BINARY_DIR}/calibrate)
file(MAKE_DIRECTORY ${calib_work})

# The real A100 training trace is someone else's data: read where it lies (../shared/data/traces/
# beside the checkout or its worktree folder), never copied here; its test is skipped without it.
set(PIPESCHED_A100_TRACE "" CACHE FILEPATH
    "The A100 Kineto trace for the calibrate ctest (default: ../shared/data/traces/a100_training_kineto.json.gz)")
set(calib_a100 "${PIPESCHED_A100_TRACE}")
if(NOT calib_a100)
  set(calib_a100 ${PROJECT_SOURCE_DIR}/../shared/data/traces/a100_training_kineto.json.gz)
  foreach(up .. ../..)
    if(EXISTS ${PROJECT_SOURCE_DIR}/${up}/shared/data/traces/a100_training_kineto.json.gz)
      get_filename_component(calib_a100
        ${PROJECT_SOURCE_DIR}/${up}/shared/data/traces/a100_training_kineto.json.gz ABSOLUTE)
      break()
    endif()
  endforeach()
endif()

set(calib_a100_test "calibrate: the real A100 Kineto trace (GEMMs by shape, the curve, plan reads it)")
pipesched_cli_check("${calib_a100_test}" calibrate_check.cmake 300 "calibrate check ok"
  -DWORK=${calib_work}/a100 -DTRACE=${calib_a100} -DGPU=${data}/cluster_a100_40gb.json
  -DMODEL=${data}/model_small.json -DMIN_GEMMS=1000 "-DPRECISIONS=tf32;fp32"
  -DMEMORY=ON -DSKIP_IF_ABSENT=ON
  "-DTEXT_REGEX=kineto format, GPU kernels timed.*communication +[0-9.]+ ms.*peaks used: tf32 156 TFLOP/s \\([0-9]+ GEMMs\\), fp32 19.5 TFLOP/s")
set_tests_properties("cli: ${calib_a100_test}" PROPERTIES SKIP_REGULAR_EXPRESSION "skipped: ")
pipesched_cli_check(
  "calibrate: the committed CPU trace of a small GPT (legacy format + shapes file)"
  calibrate_check.cmake 120 "calibrate check ok"
  -DWORK=${calib_work}/gpt_cpu -DTRACE=${calib_gpt}.trace.json -DSHAPES=${calib_gpt}.shapes.json
  -DGPU=a100-sxm-80gb -DMODEL=${data}/model_small.json -DMIN_GEMMS=57 -DPRECISIONS=fp32
  "-DTEXT_REGEX=legacy format, a CPU-only run: op times, shapes from .*GEMMs measured: 57 in [0-9]+ shapes, 57 in the fit; peaks used: fp32 19.5 TFLOP/s \\(57 GEMMs\\).*note: a CPU-only run")

pipesched_cli_test("calibrate: the cluster on stdout, the report on stderr" 0
  "^\\{\n  \"achieved_fraction\": 1.0,.*\"name\": \"a100-sxm-80gb-calibrated\".*\\}\ncalibrate: .*gpt_cpu.trace.json"
  calibrate --trace=${calib_gpt}.trace.json --shapes ${calib_gpt}.shapes.json --gpu a100-sxm-80gb
  -o -)
# Bad input: exit 2 naming the value and the rule.
pipesched_cli_test("calibrate: no input" 2
  "error: calibrate: an input is needed: --trace PROFILE.json \\(a torch.profiler trace: the GEMM efficiency curve from its GEMMs\\)"
  calibrate --gpu a100-sxm-80gb)
pipesched_cli_test("calibrate: no --gpu" 2
  "error: --gpu: the GPU the measurements ran on is needed"
  calibrate --trace=${calib_gpt}.trace.json --shapes ${calib_gpt}.shapes.json)
pipesched_cli_test("calibrate: unknown --gpu" 2
  "error: --gpu: unknown GPU \"a100\" \\(presets: h100-sxm-80gb, a100-sxm-80gb, h800-sxm-80gb, or a cluster JSON file\\)"
  calibrate --trace=${calib_gpt}.trace.json --shapes ${calib_gpt}.shapes.json --gpu a100)
pipesched_cli_test("calibrate: --shapes without --trace" 2
  "error: calibrate: an input is needed"
  calibrate --shapes ${calib_gpt}.shapes.json --gpu a100-sxm-80gb)
# A bad trace: exit 2, naming --trace, the file and the rule.
function(calibrate_bad_trace name file rule)
  pipesched_cli_test("calibrate: ${name}" 2 "error: --trace: .*${file}: ${rule}"
    calibrate --trace=${calib_errors}/${file} --gpu a100-sxm-80gb)
endfunction()
calibrate_bad_trace("not JSON" profile_not_json.json
  "profiler trace: malformed JSON: ")
calibrate_bad_trace("no traceEvents" profile_no_events.json
  "/: no \"traceEvents\": not a Chrome trace of torch.profiler")
calibrate_bad_trace("an event without a duration" profile_no_dur.json
  "/traceEvents/0/dur: missing: the complete event \"aten::mm\" \\(ph \"X\"\\) needs a duration")
calibrate_bad_trace("shapes that do not multiply" profile_bad_shapes.json
  "/traceEvents/0: aten::mm: the shapes do not multiply: \\[4, 8\\] by \\[16, 2\\]")
calibrate_bad_trace("a trace without GEMMs" profile_no_gemm.json
  "calibrate: the trace has no GEMM")
calibrate_bad_trace("a legacy trace without its shapes" profile_legacy.json
  "calibrate: none of the trace's GEMMs has shapes \\(1 GEMM op\\): record with record_shapes=True")
pipesched_cli_test("calibrate: a shapes file of another trace" 2
  "error: --shapes: .*profile_legacy_wrong.shapes.json: /ops/0: no event \"aten::addmm\" on thread 1 at ts 21 in the trace: the shapes file is not this trace's"
  calibrate --trace=${calib_errors}/profile_legacy.json
  --shapes ${calib_errors}/profile_legacy_wrong.shapes.json --gpu a100-sxm-80gb)
pipesched_cli_test("calibrate: a shapes file with a Kineto trace" 2
  "error: --shapes: .*gpt_cpu.shapes.json: given with a Kineto trace"
  calibrate --trace=${calib_errors}/profile_no_gemm.json --shapes ${calib_gpt}.shapes.json
  --gpu a100-sxm-80gb)
pipesched_cli_test("calibrate: bad --bins-per-decade" 2
  "error: --bins-per-decade: "
  calibrate --trace=${calib_gpt}.trace.json --shapes ${calib_gpt}.shapes.json --gpu a100-sxm-80gb
  --bins-per-decade 0)

# `calibrate --runs`: a measured run ran, so it is timed even where the memory model puts it
# above the cluster's usable fraction (76.6 GiB of an 80 GiB A100, 72 usable); one no plan of
# which fits the whole GPU is the model's answer (exit 1, as plan's "no plan fits"), not exit 2.
pipesched_cli_test("calibrate --runs: a run above the usable memory is still timed" 0
  "tight_memory +8.[0-9]+ s +measured +9.000"
  calibrate --runs ${data}/runs_tight_memory.json --gpu a100-sxm-80gb --compute-only)
pipesched_cli_test("calibrate --runs: a run beyond the GPU's whole memory is exit 1" 1
  "error: --runs: .*runs_beyond_memory.json: calibrate: run \"beyond_memory\": no plan of it fits the GPU's memory, even all of it \\(80 GiB\\)"
  calibrate --runs ${data}/runs_beyond_memory.json --gpu a100-sxm-80gb --compute-only)
