# `plan --export` as Megatron-LM reads it: framework_export_check.py parses PREFIX.megatron.args
# with a parser built from tests/data/megatron_args_spec.json (Megatron's flags, types and
# choices), applies Megatron's consistency checks to them and compares with the plan's JSON.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  set(framework_export_check ${Python3_EXECUTABLE}
      ${CMAKE_CURRENT_SOURCE_DIR}/framework_export_check.py $<TARGET_FILE:pipesched_cli>
      ${PROJECT_SOURCE_DIR}/tests/data/megatron_args_spec.json)
  function(pipesched_megatron_export_test name work)
    add_test(NAME "cli: plan: export: ${name}"
             COMMAND ${framework_export_check} ${CMAKE_CURRENT_BINARY_DIR}/${work} ${ARGN})
    set_tests_properties("cli: plan: export: ${name}" PROPERTIES
      LABELS cli TIMEOUT 120 PASS_REGULAR_EXPRESSION "megatron args export ok")
  endfunction()
  pipesched_megatron_export_test(
    "Megatron reads interleaved 1F1B with even chunks as planned" megatron_even
    --expect hidden_size=8192,num_attention_heads=64 --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute selective)
  pipesched_megatron_export_test(
    "Megatron reads the group size given" megatron_group
    --expect microbatch_group_size_per_vp_stage=8 --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute selective
    --group-size 8)
  pipesched_megatron_export_test(
    "Megatron reads uneven chunks as its layout and full recompute" megatron_layout --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute full
    --partition 9,10,10,11,10,10,10,10)
  pipesched_megatron_export_test(
    "Megatron reads 1F1B without a distributed optimizer" megatron_1f1b --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule 1f1b --micro-batch 1 --optimizer-sharding none --recompute selective)
  pipesched_megatron_export_test(
    "no Megatron arguments for a schedule Megatron does not run" megatron_absent --absent --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule zb-h1 --micro-batch 2)
endif()
