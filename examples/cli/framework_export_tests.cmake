# `plan --export` as the frameworks read it. framework_export_check.py parses
# PREFIX.megatron.args with a parser built from tests/data/megatron_args_spec.json (Megatron's
# flags, types and choices), applies Megatron's consistency checks to them and compares with the
# plan's JSON; torchtitan_export_check.py does the same for PREFIX.torchtitan.args with a parser
# built from tests/data/torchtitan_config_spec.json (torchtitan's dataclass fields as tyro reads
# them), checks the exported CSV's placement, and reads PREFIX.torchtitan.py's assignments.
# Both checkers share plan_export_run.py (their command line and the plan run).
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  # CHECKER reads what `plan ARGS --export` wrote to WORK with SPEC (tests/data) and prints OK;
  # ${megatron_export} and ${torchtitan_export} are the first three arguments of a framework.
  function(pipesched_export_test checker spec ok name work)
    add_test(NAME "cli: plan: export: ${name}"
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/${checker}
                     $<TARGET_FILE:pipesched_cli> ${PROJECT_SOURCE_DIR}/tests/data/${spec}
                     ${CMAKE_CURRENT_BINARY_DIR}/${work} ${ARGN})
    set_tests_properties("cli: plan: export: ${name}" PROPERTIES
      LABELS cli TIMEOUT 120 PASS_REGULAR_EXPRESSION "${ok}"
      ENVIRONMENT PYTHONDONTWRITEBYTECODE=1)
  endfunction()
  set(megatron_export framework_export_check.py megatron_args_spec.json "megatron args export ok")
  set(torchtitan_export
      torchtitan_export_check.py torchtitan_config_spec.json "torchtitan export ok")
  # Llama 3 70B's structure as Megatron builds it (GQA, SwiGLU, RMSNorm, rope, untied, no
  # dropout or biases, flash attention, bf16) and the gradient reduction's overlap.
  set(megatron_llama3_70b
      hidden_size=8192,ffn_hidden_size=28672,num_attention_heads=64,group_query_attention=True,num_query_groups=8,kv_channels=None,swiglu=True,normalization=RMSNorm,position_embedding_type=rope,max_position_embeddings=8192,add_bias_linear=False,untie_embeddings_and_output_weights=True,attention_dropout=0.0,hidden_dropout=0.0,attention_backend=flash,bf16=True,fp8=None,make_vocab_size_divisible_by=128,overlap_grad_reduce=True)
  pipesched_export_test(${megatron_export}
    "Megatron reads interleaved 1F1B with even chunks as planned" megatron_even
    --expect ${megatron_llama3_70b} --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute selective)
  pipesched_export_test(${megatron_export}
    "Megatron reads the group size given" megatron_group
    --expect microbatch_group_size_per_vp_stage=8 --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute selective
    --group-size 8)
  pipesched_export_test(${megatron_export}
    "Megatron reads uneven chunks as its layout and full recompute" megatron_layout --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute full
    --partition 9,10,10,11,10,10,10,10)
  pipesched_export_test(${megatron_export}
    "Megatron reads 1F1B without a distributed optimizer" megatron_1f1b
    --expect overlap_grad_reduce=False,overlap_p2p_comm=True --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule 1f1b --micro-batch 1 --optimizer-sharding none --recompute selective
    --overlap-grad-reduce off)
  pipesched_export_test(${megatron_export}
    "Megatron reads blocking transfers of the interleaved schedule" megatron_blocking
    --expect overlap_p2p_comm=False --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute selective
    --p2p blocking)
  pipesched_export_test(${megatron_export}
    "Megatron reads GPT-3's structure" megatron_gpt3
    --expect swiglu=False,normalization=LayerNorm,position_embedding_type=learned_absolute,add_bias_linear=True,untie_embeddings_and_output_weights=False,attention_dropout=0.1,attention_backend=unfused,group_query_attention=False --
    --model gpt3-175b --gpu a100-sxm-80gb --gpus 1024 --seq 2048 --global-batch 1536 --tp 8
    --pp 16 --schedule 1f1b --micro-batch 1 --recompute full)
  pipesched_export_test(${megatron_export}
    "Megatron reads the README's 405B job on 16384 GPUs, interleaved" megatron_405b --
    --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192
    --global-batch-tokens 16777216 --tp 8 --pp 16 --schedule interleaved-1f1b)
  # Mixtures of experts and MLA: the experts, their layers, top-k, sizes and expert
  # parallelism, the all-to-all dispatcher and grouped GEMM as costed, MLA's ranks and heads.
  pipesched_export_test(${megatron_export}
    "Megatron reads Mixtral's experts and EP 4" megatron_mixtral
    --expect num_experts=8,moe_router_topk=2,moe_ffn_hidden_size=14336,moe_shared_expert_intermediate_size=None,moe_layer_freq=1,moe_layers=32,first_moe_layer=0,expert_model_parallel_size=4,moe_token_dispatcher_type=alltoall,moe_grouped_gemm=True,moe_expert_capacity_factor=None,moe_router_pre_softmax=False,sequence_parallel=True,group_query_attention=True,num_query_groups=8,multi_latent_attention=False --
    --model mixtral-8x7b --gpu h100-sxm-80gb --gpus 32 --seq 4096 --global-batch 64 --tp 2
    --pp 4 --ep 4 --schedule 1f1b --micro-batch 1 --recompute full)
  # DeepSeek-V3's published layout (PP 16, EP 64, no TP) under the schedules Megatron runs:
  # 61 layers over 16 stages, so Megatron's layout string; interleaved, m = 120 micro-batches
  # take groups of 20 (the default 16 leaves a last group of 8 < p, which Megatron refuses).
  set(megatron_deepseek_v3
      num_experts=256,moe_router_topk=8,moe_ffn_hidden_size=2048,moe_shared_expert_intermediate_size=2048,moe_layers=58,first_moe_layer=3,ffn_hidden_size=18432,expert_model_parallel_size=64,moe_token_dispatcher_type=alltoall,moe_grouped_gemm=True,moe_expert_capacity_factor=None,multi_latent_attention=True,q_lora_rank=1536,kv_lora_rank=512,qk_head_dim=128,qk_pos_emb_head_dim=64,v_head_dim=128,group_query_attention=False,kv_channels=None,rope_type=None)
  pipesched_export_test(${megatron_export}
    "Megatron reads DeepSeek-V3's experts, MLA and EP 64 under 1F1B" megatron_deepseek_1f1b
    --expect ${megatron_deepseek_v3} --
    --model deepseek-v3 --gpu h800-sxm-80gb --gpus 2048 --seq 4096 --global-batch 15360
    --recompute full --tp 1 --pp 16 --ep 64 --micro-batch 1 --schedule 1f1b)
  pipesched_export_test(${megatron_export}
    "Megatron reads DeepSeek-V3's experts, MLA and EP 64 interleaved" megatron_deepseek_interleaved
    --expect ${megatron_deepseek_v3},microbatch_group_size_per_vp_stage=20 --
    --model deepseek-v3 --gpu h800-sxm-80gb --gpus 2048 --seq 4096 --global-batch 15360
    --recompute full --tp 1 --pp 16 --ep 64 --micro-batch 1 -v 2 --schedule interleaved-1f1b
    --group-size 20)
  pipesched_export_test(${megatron_export}
    "no Megatron arguments for a mixture of experts with TP and without SP" megatron_moe_no_sp
    --absent --
    --model mixtral-8x7b --gpu h100-sxm-80gb --gpus 32 --seq 4096 --global-batch 64 --tp 2
    --pp 4 --ep 4 --schedule 1f1b --micro-batch 1 --recompute full --no-sequence-parallel)
  pipesched_export_test(${megatron_export}
    "no Megatron arguments for a schedule Megatron does not run" megatron_absent --absent --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule zb-h1 --micro-batch 2)

  pipesched_export_test(${torchtitan_export}
    "torchtitan reads interleaved 1F1B with FSDP as planned" torchtitan_interleaved
    --expect parallelism.pipeline_parallel_schedule=Interleaved1F1B,parallelism.pipeline_parallel_schedule_csv= --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute full
    --optimizer-sharding gradients)
  pipesched_export_test(${torchtitan_export}
    "torchtitan runs the exported order for a group size PyTorch's class does not take"
    torchtitan_group --expect group_size=8,parallelism.fsdp_reshard_after_forward=always --
    --model llama3-70b --gpu h100-sxm-80gb --gpus 512 --seq 8192 --global-batch 256 --tp 8
    --pp 4 -v 2 --schedule interleaved-1f1b --micro-batch 1 --recompute full
    --optimizer-sharding weights --group-size 8 --partition 9,10,10,11,10,10,10,10)
  pipesched_export_test(${torchtitan_export}
    "torchtitan runs a zero-bubble order from the exported CSV" torchtitan_zb
    --expect parallelism.pipeline_parallel_schedule=PipelineScheduleMulti --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule zb-h1 --micro-batch 2 --optimizer-sharding gradients)
  pipesched_export_test(${torchtitan_export}
    "torchtitan places ZB-V's chunks in a V" torchtitan_zbv
    --expect parallelism.pipeline_parallel_schedule=ZBVZeroBubble --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule zb-v --micro-batch 2 --optimizer-sharding gradients)
  pipesched_export_test(${torchtitan_export}
    "torchtitan reads replicated data parallelism and 1F1B" torchtitan_ddp
    --expect parallelism.pipeline_parallel_schedule=1F1B,parallelism.data_parallel_shard_degree=1 --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule 1f1b --micro-batch 1 --optimizer-sharding none --recompute selective
    --no-sequence-parallel)
  pipesched_export_test(${torchtitan_export}
    "torchtitan arguments but no config function for a model torchtitan has no config of"
    torchtitan_gpt3 --no-py --
    --model gpt3-175b --gpu a100-sxm-80gb --gpus 1024 --seq 2048 --global-batch 1536 --tp 8
    --pp 16 --schedule 1f1b --micro-batch 1 --recompute full --attention flash
    --optimizer-sharding gradients)
  pipesched_export_test(${torchtitan_export}
    "torchtitan reads the README's 405B job on 16384 GPUs with FSDP" torchtitan_405b --
    --model llama3-405b --gpu h100-sxm-80gb --gpus 16384 --seq 8192
    --global-batch-tokens 16777216 --tp 8 --pp 16 --optimizer-sharding gradients)
  pipesched_export_test(${torchtitan_export}
    "no torchtitan files for optimizer-only sharding, with the reason" torchtitan_absent
    --absent --
    --model llama3-8b --gpu h100-sxm-80gb --gpus 64 --seq 4096 --global-batch 128 --tp 2
    --pp 4 --schedule 1f1b --micro-batch 1)
  pipesched_export_test(${torchtitan_export}
    "no torchtitan files for materialized attention, with the reason" torchtitan_materialized
    --absent --
    --model gpt3-175b --gpu a100-sxm-80gb --gpus 1024 --seq 2048 --global-batch 1536 --tp 8
    --pp 16 --schedule 1f1b --micro-batch 1 --recompute full --optimizer-sharding gradients)
endif()
