# `pipesched calibrate --trace` on a real trace, read back: the JSON report's curve is of the
# documented form (sizes ascending, efficiencies in (0, 1], never falling), the cluster file it
# wrote carries that curve, and `plan --gpu` reads that file.
#   -DCLI=pipesched -DWORK=dir -DTRACE=file [-DSHAPES=file] -DGPU=preset|file -DMODEL=model
#   -DMIN_GEMMS=n [-DPRECISIONS=tf32;fp32] [-DMEMORY=ON] [-DTEXT_REGEX=re] [-DSKIP_IF_ABSENT=ON]
# Prints "skipped: ..." (ctest SKIP_REGULAR_EXPRESSION) when SKIP_IF_ABSENT and TRACE is absent:
# the trace is someone else's data, read where it lies and never copied into the repository.
if(SKIP_IF_ABSENT AND NOT EXISTS "${TRACE}")
  message("skipped: ${TRACE} is absent")
  return()
endif()
file(MAKE_DIRECTORY ${WORK})
set(cluster ${WORK}/calibrated.json)
file(REMOVE ${cluster})
set(args calibrate --trace ${TRACE} --gpu ${GPU})
if(SHAPES)
  list(APPEND args --shapes ${SHAPES})
endif()
include(${CMAKE_CURRENT_LIST_DIR}/run_cli.cmake)
pipesched_run(json ${args} -o ${cluster} --json)

string(JSON measured GET "${json}" gemms measured)
if(measured LESS MIN_GEMMS)
  message(FATAL_ERROR "${measured} GEMMs measured, expected at least ${MIN_GEMMS}")
endif()
foreach(p IN LISTS PRECISIONS)
  string(JSON n ERROR_VARIABLE missing GET "${json}" gemms by_precision ${p})
  if(missing OR NOT n GREATER 0)
    message(FATAL_ERROR "no GEMM measured against the ${p} peak")
  endif()
endforeach()
string(JSON gemm_s GET "${json}" seconds_by_category gemm)
if(NOT gemm_s GREATER 0)
  message(FATAL_ERROR "no GEMM time by category: ${gemm_s}")
endif()

# The curve: sizes ascending, efficiencies in (0, 1], never falling.
string(JSON points LENGTH "${json}" gemm_efficiency)
if(points LESS 2)
  message(FATAL_ERROR "the fitted curve has ${points} point(s)")
endif()
math(EXPR last "${points} - 1")
set(prev_size 0)
set(prev_eff 0)
foreach(i RANGE ${last})
  string(JSON size GET "${json}" gemm_efficiency ${i} 0)
  string(JSON eff GET "${json}" gemm_efficiency ${i} 1)
  if(NOT eff GREATER 0 OR eff GREATER 1)
    message(FATAL_ERROR "point ${i}: efficiency ${eff} is not in (0, 1]")
  endif()
  if(NOT size GREATER prev_size OR eff LESS prev_eff)
    message(FATAL_ERROR "point ${i} (${size}, ${eff}) after (${prev_size}, ${prev_eff}): "
                        "not ascending in size or falling")
  endif()
  set(prev_size ${size})
  set(prev_eff ${eff})
endforeach()

if(MEMORY)
  string(JSON mem_eff GET "${json}" memory efficiency)
  if(NOT mem_eff GREATER 0 OR mem_eff GREATER 1)
    message(FATAL_ERROR "memory efficiency ${mem_eff} is not in (0, 1]")
  endif()
endif()

# The file written carries the report's curve, and plan reads it.
file(READ ${cluster} written)
string(JSON written_curve GET "${written}" gemm_efficiency)
string(JSON report_curve GET "${json}" cluster gemm_efficiency)
if(NOT written_curve STREQUAL report_curve)
  message(FATAL_ERROR "the cluster written is not the report's:\n${written_curve}\n${report_curve}")
endif()
string(JSON name GET "${written}" name)
execute_process(COMMAND ${CLI} plan --model ${MODEL} --gpu ${cluster} --gpus 8 --seq 2048
                        --global-batch 16 --top 1
                RESULT_VARIABLE rc OUTPUT_VARIABLE plan_out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT plan_out MATCHES "${name}")
  message(FATAL_ERROR "plan --gpu ${cluster} (${rc}): ${plan_out}${err}")
endif()

if(TEXT_REGEX)
  execute_process(COMMAND ${CLI} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE text
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT text MATCHES "${TEXT_REGEX}")
    message(FATAL_ERROR "the text report (${rc}) does not match ${TEXT_REGEX}:\n${text}${err}")
  endif()
endif()
message("calibrate check ok: ${measured} GEMMs, ${points} points, plan reads ${name}")
