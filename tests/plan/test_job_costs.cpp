#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include <pipesched/model/inline_recompute.hpp>
#include <pipesched/plan/job_costs.hpp>

using namespace pipesched;

namespace {

training_job small_job(optimizer_sharding sharding = optimizer_sharding::optimizer) {
  training_job job;
  job.model = model_preset("llama3-8b");
  job.cluster = cluster_preset("h100-sxm-80gb");
  job.gpus = 64;
  job.sequence = 4096;
  job.global_batch = 64;
  job.sharding = sharding;
  return job;
}

plan_layout layout(std::uint32_t tp, std::uint32_t pp, std::uint32_t v = 1) {
  plan_layout l;
  l.tp = tp;
  l.pp = pp;
  l.dp = 64 / (tp * pp);
  l.chunks = v;
  l.micro_batch = 1;
  l.microbatches = 8;
  l.sequence_parallel = tp > 1;
  return l;
}

std::vector<std::uint32_t> even(std::uint32_t layers, std::uint32_t chunks) {
  return std::vector<std::uint32_t>(chunks, layers / chunks);
}

}  // namespace

TEST_CASE("job_costs: static bytes are 2 + 4 + 12 per parameter, sharded as asked",
          "[plan][job_costs]") {
  const plan_layout l = layout(2, 4);
  const placement pl = placement::sequential(4);
  const double d = 8.0;
  for (optimizer_sharding sh : {optimizer_sharding::none, optimizer_sharding::optimizer,
                                optimizer_sharding::gradients, optimizer_sharding::weights}) {
    const job_costs jc =
        make_job_costs(small_job(sh), l, recompute_kind::selective, even(32, 4), pl);
    for (stage_index s = 0; s < 4; ++s) {
      const double p = jc.parameters[s].total();
      const static_bytes& b = jc.static_memory[s];
      INFO(to_string(sh) << " stage " << s);
      CHECK(b.optimizer == Approx(sh == optimizer_sharding::none ? 12 * p : 12 * p / d));
      const bool grads = sh == optimizer_sharding::gradients || sh == optimizer_sharding::weights;
      CHECK(b.gradients == Approx(grads ? 4 * p / d : 4 * p));
      if (sh == optimizer_sharding::weights) {
        // Its slice, and under PP the stage's weights whole: gathered from each chunk's
        // forward to its backward, not resharded in between.
        CHECK(b.weights == Approx(2 * p / d + 2 * p));
      } else {
        CHECK(b.weights == Approx(2 * p));
      }
    }
  }
}

TEST_CASE("job_costs: without pipeline parallelism ZeRO-3 gathers a layer or an end at a time",
          "[plan][job_costs]") {
  // Llama 3 8B on one stage: its largest piece is the 128256 x 4096 embedding (and the head of
  // the same size with the final norm), not the whole model.
  const training_job job = small_job(optimizer_sharding::weights);
  const job_costs jc = make_job_costs(job, layout(1, 1), recompute_kind::none, even(32, 1),
                                      placement::sequential(1));
  const stage_parameters& sp = jc.parameters[0];
  const double embedding = 128256.0 * 4096;
  CHECK(sp.largest_unit == Approx(embedding + 4096));
  CHECK(sp.largest_unit < sp.total() / 10);
  CHECK(jc.static_memory[0].weights == Approx(2 * sp.total() / 64 + 4 * sp.largest_unit));
  // Under pipeline parallelism every chunk stays gathered, whatever the chunks per stage.
  for (const std::uint32_t v : {1u, 2u, 4u}) {
    const job_costs piped = make_job_costs(job, layout(1, 4, v), recompute_kind::none,
                                           even(32, 4 * v), placement::loop(4, v));
    INFO("v " << v);
    const double p = piped.parameters[1].total();
    CHECK(piped.static_memory[1].weights == Approx(2 * p / 16 + 2 * p));
  }
}

TEST_CASE("job_costs: ZeRO-3 gathers before every op without PP, once a step with it",
          "[plan][job_costs]") {
  // A slow network makes the weight gather over DP longer than any op's compute.
  training_job job = small_job(optimizer_sharding::weights);
  job.cluster.intra_node_bandwidth = 1e8;
  job.cluster.inter_node_bandwidth = 1e8;
  const job_costs one = make_job_costs(job, layout(1, 1), recompute_kind::none, even(32, 1),
                                       placement::sequential(1));
  const double whole = one.dp_gather_time(2.0 * one.parameters[0].total());
  CHECK(one.costs.chunk_costs()[0].forward == Approx(whole));
  CHECK(one.costs.chunk_costs()[0].backward_input == Approx(whole));
  CHECK(one.first_gather_s == 0.0);

  const job_costs piped = make_job_costs(job, layout(1, 4), recompute_kind::none, even(32, 4),
                                         placement::sequential(4));
  const job_costs kept =
      make_job_costs(small_job(optimizer_sharding::gradients), layout(1, 4), recompute_kind::none,
                     even(32, 4), placement::sequential(4));
  for (std::size_t i = 0; i < 4; ++i) {
    INFO("stage " << i);
    // The ops keep their compute times: far below a gather.
    CHECK(piped.costs.chunk_costs()[i].forward <
          piped.dp_gather_time(2.0 * piped.parameters[i].total()) / 10);
  }
  CHECK(piped.first_gather_s == Approx(piped.dp_gather_time(2.0 * piped.parameters[0].total())));
  CHECK(kept.first_gather_s == 0.0);
}

TEST_CASE("job_costs: the embedding on chunk 0's stage, the head and final norm on the last's",
          "[plan][job_costs]") {
  const training_job job = small_job();
  const double vh = 4096.0 * padded_vocab(128256, 2) / 2;  // a TP rank's slice
  const layer_parameters lp = parameters_of_layer(job.model);
  const double layer = lp.sharded / 2 + lp.replicated;
  // Sequential, untied: stage 0 has the embedding, stage 3 the head and the final norm.
  job_costs jc = make_job_costs(job, layout(2, 4), recompute_kind::none, even(32, 4),
                                placement::sequential(4));
  CHECK(jc.parameters[0].embedding == vh);
  CHECK(jc.parameters[0].head == 0.0);
  CHECK(jc.parameters[3].head == vh + 4096);
  CHECK(jc.parameters[1].total() == Approx(8 * layer));
  CHECK(jc.chunks[0].embedding);
  CHECK(jc.chunks[3].head);
  // V shape: chunk 0 and chunk 7 both on stage 0; a tied head needs no second copy there.
  training_job tied = job;
  tied.model.tied_embeddings = true;
  jc = make_job_costs(tied, layout(2, 4, 2), recompute_kind::none, even(32, 8),
                      placement::v_shape(4));
  CHECK(jc.parameters[0].embedding == vh);
  CHECK(jc.parameters[0].head == 4096);
  // Sequential with a tied head: the last stage keeps its own copy, as Megatron-LM does.
  jc = make_job_costs(tied, layout(2, 4), recompute_kind::none, even(32, 4),
                      placement::sequential(4));
  CHECK(jc.parameters[3].head == vh + 4096);
}

TEST_CASE("job_costs: without the kernel model's inputs, op times are FLOPs at the achieved rate",
          "[plan][job_costs]") {
  // A cluster file of before the kernel model: no HBM bandwidth, no curves, one achieved
  // fraction, no slowdown beside communication. The memory-bound kernels take no time; GEMMs
  // and attention their FLOPs at the rate.
  training_job job = small_job();
  job.cluster.overlap_slowdown = 0.0;
  job.cluster.hbm_bandwidth = 0.0;
  job.cluster.gemm_efficiency = {};
  job.cluster.attention_efficiency = {};
  job.cluster.achieved_fraction = 0.5;
  job.cluster.intra_node_bandwidth = 450e9;
  const plan_layout l = layout(2, 4);
  const job_op_times ot = op_times_of(job, l, recompute_kind::selective);
  const double rate = 989.4e12 * 0.5;
  const layer_flops f = flops_of_layer(job.model, 4096, 1);
  const double bytes = 2.0 * 4096 * 4096;  // s·b·h bf16
  // With sequence parallelism: two all-gathers and two reduce-scatters, an all-reduce's volume.
  const double rs = ring_reduce_scatter_time(2, bytes, 450e9, 3e-6);
  CHECK(ot.layer.forward == Approx(f.forward() / 2 / rate + 4 * rs));
  // The flash backward does 2.5 times its forward's FLOPs (FlashAttention-2).
  CHECK(ot.layer.backward_input == Approx((f.linear + 2.5 * f.core) / 2 / rate + 4 * rs));
  // W: the weight gradients, and the two all-gathers sequence parallelism repeats for them.
  CHECK(ot.layer.backward_weight == Approx(f.backward_weight() / 2 / rate + 2 * rs));
  CHECK(ot.layer_recompute == Approx(f.core / 2 / rate));
  CHECK(op_times_of(job, l, recompute_kind::full).layer_recompute == Approx(ot.layer.forward));
  CHECK(op_times_of(job, l, recompute_kind::none).layer_recompute == 0.0);
  // T_comm: one s·b·h activation, a TP share, between nodes (TP·DP = 16 GPUs per stage).
  const job_costs jc =
      make_job_costs(job, l, recompute_kind::selective, even(32, 4), placement::sequential(4));
  CHECK(jc.pipeline_transfer_s == Approx(bytes / 2 / 45e9 + 10e-6));
  CHECK(in_one_node(2, 4, 8));
  CHECK_FALSE(in_one_node(2, 8, 8));
  CHECK_FALSE(in_one_node(3, 2, 8));
  // The per-chunk model carries them, the head's ops on the last chunk.
  const shaped_cost_model c = jc.costs.for_shape(4, 1, "t");
  CHECK(c.at(1).forward == Approx(8 * ot.layer.forward));
  CHECK(c.at(3).backward_weight ==
        Approx(8 * ot.layer.backward_weight + ot.head.backward_weight.total()));
  CHECK(ot.head.forward[time_kind::gemm] ==
        Approx(head_flops(job.model, 4096, padded_vocab(128256, 2)) / 2 / rate));
  CHECK(c.comm(0, 1) == jc.pipeline_transfer_s);
}

TEST_CASE("job_costs: each op is the sum of its kernels, each timed by its roofline",
          "[plan][job_costs]") {
  const training_job job = small_job();
  const cluster_spec& cl = job.cluster;
  for (const plan_layout& l : {layout(1, 4), layout(2, 4), layout(8, 2)}) {
    for (recompute_kind r :
         {recompute_kind::none, recompute_kind::selective, recompute_kind::full}) {
      const job_op_times ot = op_times_of(job, l, r);
      const layer_kernel_times kt = layer_kernel_times_of(job, l, r);
      auto sum = [](const std::vector<timed_kernel>& v) {
        double s = 0.0;
        for (const timed_kernel& t : v) {
          s += t.seconds;
        }
        return s;
      };
      CHECK(ot.layer.forward == Approx(sum(kt.forward)));
      CHECK(ot.layer.backward_input == Approx(sum(kt.backward_input)));
      CHECK(ot.layer.backward_weight == Approx(sum(kt.backward_weight)));
      CHECK(ot.layer_recompute == Approx(sum(kt.recompute)));
      for (const timed_kernel& t : kt.forward) {
        // achieved_fraction scales every compute kernel, memory-bound ones included.
        const double a = cl.achieved_fraction;
        const double memory = t.k.bytes / (cl.hbm_bandwidth * cl.memory_efficiency * a);
        if (t.k.kind == kernel_kind::gemm) {
          const double compute =
              t.k.flops / (cl.peak_flops_bf16 * cl.gemm_efficiency.at(t.k.flops) * a);
          CHECK(t.seconds == Approx(std::max(compute, memory)));
        } else if (t.k.kind == kernel_kind::attention) {
          const double compute =
              t.k.flops / (cl.peak_flops_bf16 * cl.attention_efficiency.at(t.k.flops) * a);
          CHECK(t.seconds == Approx(std::max(compute, memory)));
        } else if (t.k.kind == kernel_kind::memory_bound) {
          CHECK(t.seconds == Approx(memory));
        } else {
          CHECK(t.seconds > 0.0);  // a collective over more than one rank
        }
      }
      // The breakdown by kind adds up to the op.
      CHECK(ot.layer_kinds.forward.total() == Approx(ot.layer.forward));
    }
  }
  // A half-size GEMM is no faster per FLOP: the curve never falls with size.
  const kernel big = detail::gemm_kernel("big", 8192, 8192, 8192, 2.0);
  const kernel small = detail::gemm_kernel("small", 512, 512, 512, 2.0);
  CHECK(compute_seconds(cl, small) / small.flops > compute_seconds(cl, big) / big.flops);
  // An fp8 GEMM runs at the fp8 peak, the same shape on bf16 operands at the bf16 peak.
  cluster_spec h100 = cluster_preset("h100-sxm-80gb");
  const kernel fp8 = detail::gemm_kernel("fp8", 8192, 8192, 8192, 1.0);
  REQUIRE(fp8.fp8);
  REQUIRE_FALSE(big.fp8);
  CHECK(compute_seconds(h100, big) / compute_seconds(h100, fp8) ==
        Approx(h100.peak_flops_fp8 / h100.peak_flops_bf16));
}

TEST_CASE("job_costs: an unfused gradient accumulation adds one pass over W's gradients",
          "[plan][job_costs]") {
  training_job fused = small_job();
  training_job unfused = fused;
  unfused.gradient_accumulation_fusion = false;
  const cluster_spec& cl = fused.cluster;
  const double rate = cl.hbm_bandwidth * cl.memory_efficiency * cl.achieved_fraction;
  for (std::uint32_t bytes : {2u, 4u}) {
    fused.gradient_reduce_bytes = unfused.gradient_reduce_bytes = bytes;
    for (const plan_layout& l : {layout(1, 4), layout(8, 2)}) {
      const job_op_times a = op_times_of(fused, l, recompute_kind::full);
      const job_op_times b = op_times_of(unfused, l, recompute_kind::full);
      // Only W changes: by reading the fresh bf16 gradient and reading and writing the
      // accumulated one, for every weight of the layer on the rank (a 1/TP slice, norms whole).
      CHECK(b.layer.forward == a.layer.forward);
      CHECK(b.layer.backward_input == a.layer.backward_input);
      CHECK(b.layer_recompute == a.layer_recompute);
      const layer_parameters lp = parameters_of_layer(fused.model);
      const double weights = lp.sharded / l.tp + lp.replicated;
      CHECK(b.layer.backward_weight - a.layer.backward_weight ==
            Approx((2.0 + 2.0 * bytes) * weights / rate));
      CHECK(b.layer_kinds.backward_weight[time_kind::memory_bound] -
                a.layer_kinds.backward_weight[time_kind::memory_bound] ==
            Approx((2.0 + 2.0 * bytes) * weights / rate));
      // The LM head's weight (V × h over TP) likewise.
      const double table =
          embedding_parameters(fused.model, padded_vocab(fused.model.vocab, l.tp, 128)) / l.tp;
      CHECK(b.head.backward_weight.total() - a.head.backward_weight.total() ==
            Approx((2.0 + 2.0 * bytes) * table / rate));
      // `plan --layer-times` lists the kernel.
      const layer_kernel_times kt = layer_kernel_times_of(unfused, l, recompute_kind::full);
      REQUIRE_FALSE(kt.backward_weight.empty());
      CHECK(kt.backward_weight.back().k.name == "gradient accumulation");
    }
  }
}

TEST_CASE("job_costs: activation sizes per chunk", "[plan][job_costs]") {
  const training_job job = small_job();
  const plan_layout l = layout(2, 4);
  // The default activation model: the tensors each layer keeps (model/layer_tensors.hpp).
  const layer_activation_bytes la = activation_bytes_of_tensors(
      job.model, layer_shard{token_counts::uniform(4096, 1), 2, 1, true});
  const double s = 4096, b = 1, h = 4096;
  const double embed = 8 * s * b;  // the token ids; Llama has no dropout mask
  const double head = 4 * s * b * (h + static_cast<double>(padded_vocab(128256, 2))) / 2;
  const placement pl = placement::sequential(4);
  const shaped_memory_model none =
      make_job_costs(job, l, recompute_kind::none, even(32, 4), pl).memory.for_shape(4, 1, "t");
  CHECK(none.at(0).activation == Approx(8 * la.full + embed));
  CHECK(none.at(1).activation == Approx(8 * la.full));
  CHECK(none.at(3).activation == Approx(8 * la.full + head));
  CHECK(none.at(1).weight_grad_input == Approx(8 * la.weight_grad));
  const shaped_memory_model sel = make_job_costs(job, l, recompute_kind::selective, even(32, 4), pl)
                                      .memory.for_shape(4, 1, "t");
  CHECK(sel.at(1).activation == Approx(8 * la.without_core));
  CHECK(sel.at(1).input == sel.at(1).activation);
  const shaped_memory_model full =
      make_job_costs(job, l, recompute_kind::full, even(32, 4), pl).memory.for_shape(4, 1, "t");
  CHECK(full.at(1).input == Approx(8 * la.input));
  CHECK(full.at(1).activation == Approx(8 * la.input + la.without_core + 8 * la.weight_grad));
  // A BW order frees each layer's W operands with its backward: the inputs and one layer's
  // activations (the last stage also the head's operands), below selective's; no other
  // recompute choice differs.
  const job_costs full_costs = make_job_costs(job, l, recompute_kind::full, even(32, 4), pl);
  const shaped_memory_model fused = full_costs.fused_memory.for_shape(4, 1, "t");
  CHECK(fused.at(1).input == Approx(8 * la.input));
  CHECK(fused.at(1).activation == Approx(8 * la.input + la.without_core));
  CHECK(fused.at(1).activation < sel.at(1).activation);
  const double head_operands = 2 * s * b * (h + static_cast<double>(padded_vocab(128256, 2))) / 2;
  CHECK(fused.at(3).activation == Approx(8 * la.input + head + la.without_core + head_operands));
  CHECK(fused.at(1).weight_grad_input <= fused.at(1).activation);
  CHECK(fused.static_memory(1) == full.static_memory(1));
  for (recompute_kind r : {recompute_kind::none, recompute_kind::selective}) {
    const job_costs jc = make_job_costs(job, l, r, even(32, 4), pl);
    CHECK(jc.fused_memory.for_shape(4, 1, "t").at(1) == jc.memory.for_shape(4, 1, "t").at(1));
  }
  // Megatron-LM's estimator when asked for: its formula, and its embedding terms.
  training_job meg = job;
  meg.activations = activation_model::megatron;
  const layer_activation_bytes lm = activation_bytes_of_layer(job.model, 4096, 1, 2, true);
  const shaped_memory_model m =
      make_job_costs(meg, l, recompute_kind::none, even(32, 4), pl).memory.for_shape(4, 1, "t");
  CHECK(m.at(0).activation == Approx(8 * lm.full + (8 * s * b + s * b * h) / 2));
  CHECK(m.at(1).activation == Approx(8 * lm.full));
}

TEST_CASE("job_costs: shapes are checked", "[plan][job_costs]") {
  const training_job job = small_job();
  CHECK_THROWS_WITH(make_job_costs(job, layout(2, 4), recompute_kind::none, even(32, 2),
                                   placement::sequential(4)),
                    Catch::Contains("must give the layers of each of the p·v = 4 chunks"));
  CHECK_THROWS_WITH(make_job_costs(job, layout(2, 4), recompute_kind::none, {8, 8, 8, 7},
                                   placement::sequential(4)),
                    "plan: partition gives 31 layers, the model has 32");
}

TEST_CASE("job_costs: each pipeline link is timed by where its two stages' ranks are",
          "[plan][job_costs]") {
  training_job job = small_job();
  job.gpus = 16;
  job.cluster.inter_node_bandwidth = 1e9;
  job.cluster.inter_node_latency = 0.01;
  const double bytes = 2.0 * 4096 * 4096;  // s·b·h bf16
  const double intra = bytes / 4 / job.cluster.intra_node_bandwidth + 3e-6;
  const double inter = bytes / 4 / 1e9 + 0.01;
  plan_layout l = layout(4, 4);
  l.dp = 1;  // 4 ranks a stage, 2 stages a node
  const job_costs jc =
      make_job_costs(job, l, recompute_kind::selective, even(32, 4), placement::sequential(4));
  const cost_model& c = jc.costs;
  CHECK(c.comm(0, 1) == Approx(intra));
  CHECK(c.comm(1, 0) == Approx(intra));
  CHECK(c.comm(1, 2) == Approx(inter));
  CHECK(c.comm(2, 1) == Approx(inter));
  CHECK(c.comm(2, 3) == Approx(intra));
  CHECK(c.comm(3, 0) == Approx(inter));  // interleaved wraps from the last stage to the first
  CHECK(c.comm(0, 3) == Approx(inter));
  CHECK(c.comm(2, 2) == 0.0);
  CHECK(jc.pipeline_transfer_s == c.uniform_comm());  // the scalar is the slowest link
  CHECK(jc.pipeline_transfer_s == Approx(inter));
  REQUIRE(c.link_comm().size() == 16);

  // TP 1, PP 16: eight stages a node, one link (7 -> 8) between them; V placement too.
  plan_layout l16 = layout(1, 16, 2);
  l16.dp = 1;
  const job_costs v =
      make_job_costs(job, l16, recompute_kind::selective, even(32, 32), placement::v_shape(16));
  const double intra1 = bytes / job.cluster.intra_node_bandwidth + 3e-6;
  const double inter1 = bytes / 1e9 + 0.01;
  for (stage_index s = 0; s + 1 < 16; ++s) {
    INFO("link " << s << " -> " << s + 1);
    CHECK(v.costs.comm(s, s + 1) == Approx(s == 7 ? inter1 : intra1));
    CHECK(v.costs.comm(s + 1, s) == Approx(s == 7 ? inter1 : intra1));
  }

  // Stages whose blocks straddle a node boundary (TP·DP = 6 on 8-GPU nodes) pair up across it.
  CHECK(stages_in_one_node(4, 0, 1, 8));
  CHECK_FALSE(stages_in_one_node(4, 1, 2, 8));
  CHECK_FALSE(stages_in_one_node(6, 0, 1, 8));
  CHECK_FALSE(stages_in_one_node(6, 1, 2, 8));
  CHECK(stages_in_one_node(1, 0, 7, 8));
  CHECK_FALSE(stages_in_one_node(1, 0, 8, 8));
  CHECK_FALSE(stages_in_one_node(16, 0, 1, 8));

  // Every link between nodes, or every one inside: one scalar, no table.
  const job_costs all = make_job_costs(small_job(), layout(2, 4), recompute_kind::selective,
                                       even(32, 4), placement::sequential(4));
  CHECK(all.costs.link_comm().empty());
}

TEST_CASE("job_costs: a ring across nodes runs on each of its members' network ports",
          "[plan][job_costs]") {
  // Across nodes a ring runs one channel per network port: a node's members of the group
  // cross side by side, k ports' bandwidth, never more than NVLink's; the latency is the
  // network's.
  cluster_spec c = small_job().cluster;
  c.gpus_per_node = 8;
  c.intra_node_bandwidth = 200e9;
  c.inter_node_bandwidth = 22.5e9;
  CHECK(group_link(c, 1, 8).bandwidth == 200e9);           // one node: NVLink
  CHECK(group_link(c, 1, 32).bandwidth == Approx(180e9));  // 8 a node, 8 ports
  CHECK(group_link(c, 2, 16).bandwidth == Approx(90e9));   // TP 2: 4 a node
  CHECK(group_link(c, 8, 32).bandwidth == 22.5e9);         // TP 8: one a node
  CHECK(group_link(c, 16, 4).bandwidth == 22.5e9);         // wider than a node
  CHECK(group_link(c, 3, 8).bandwidth == 22.5e9);          // not aligned to nodes
  CHECK(group_link(c, 1, 32).latency == c.inter_node_latency);
  c.inter_node_bandwidth = 50e9;  // 8 ports of 50 GB/s: NVLink's 200 is the ring's limit
  CHECK(group_link(c, 1, 32).bandwidth == 200e9);
}

TEST_CASE("job_costs: link times that cannot add up to a finite step are refused",
          "[plan][job_costs]") {
  training_job job = small_job();
  plan_layout l = layout(2, 4);
  job.cluster.inter_node_latency = 1e300;  // large, but a step's transfers still add up
  const job_costs jc =
      make_job_costs(job, l, recompute_kind::selective, even(32, 4), placement::sequential(4));
  CHECK(jc.pipeline_transfer_s == Approx(1e300));
  job.cluster.inter_node_latency = 1e306;
  CHECK_THROWS_WITH(
      make_job_costs(job, l, recompute_kind::selective, even(32, 4), placement::sequential(4)),
      Catch::Contains("inter_node_latency (1e+306 s)") &&
          Catch::Contains("would not add up to a finite time"));
  job.cluster.inter_node_latency = 10e-6;
  job.cluster.inter_node_bandwidth = 1e-303;
  CHECK_THROWS_WITH(
      make_job_costs(job, l, recompute_kind::selective, even(32, 4), placement::sequential(4)),
      Catch::Contains("inter_node_bandwidth (1e-303 bytes/s)"));
  // The data-parallel reduction (DP 8 over nodes) is refused by the same rule.
  job = small_job();
  l = layout(1, 8);  // DP 8: 8 ranks a stage, one link between nodes each
  job.cluster.inter_node_latency = 1e307;
  CHECK_THROWS_WITH(
      make_job_costs(job, l, recompute_kind::selective, even(32, 8), placement::sequential(8)),
      Catch::Contains("inter_node_latency"));
  job.cluster.inter_node_latency = 10e-6;
  job.cluster.intra_node_latency = 1e307;  // DP 8 inside a node: 7 ring steps a bucket
  CHECK_THROWS_WITH(
      make_job_costs(job, l, recompute_kind::selective, even(32, 8), placement::sequential(8)),
      Catch::Contains("intra_node_latency (1e+307 s) make a stage's data-parallel"));
}

namespace {

// DeepSeek-V3 on 2048 H800 at PP 16 (DP 128), as the paper ran it but for `ep`.
training_job deepseek_job() {
  training_job job;
  job.model = model_preset("deepseek-v3");
  job.cluster = cluster_preset("h800-sxm-80gb");
  job.gpus = 2048;
  job.sequence = 4096;
  job.global_batch = 15360;
  return job;
}

plan_layout deepseek_layout(std::uint32_t ep) {
  plan_layout l;
  l.pp = 16;
  l.dp = 128;
  l.ep = ep;
  l.microbatches = 120;
  return l;
}

std::vector<std::uint32_t> deepseek_layers() {
  std::vector<std::uint32_t> layers(16, 4);
  layers.back() = 1;
  return layers;
}

}  // namespace

TEST_CASE("job_costs: expert parallelism splits the routed experts and their reduction",
          "[plan][job_costs][ep]") {
  const training_job job = deepseek_job();
  const placement pl = placement::sequential(16);
  const job_costs one =
      make_job_costs(job, deepseek_layout(1), recompute_kind::full, deepseek_layers(), pl);
  const job_costs ep =
      make_job_costs(job, deepseek_layout(64), recompute_kind::full, deepseek_layers(), pl);
  const transformer_spec& t = job.model;
  const double routed = routed_expert_parameters(t, ffn_kind::moe);
  CHECK(routed == Approx(256.0 * 3 * 2048 * 7168));
  CHECK(routed_expert_parameters(t, ffn_kind::dense) == 0.0);
  // Stage 1: four MoE layers, each with 1/64 of its routed experts.
  CHECK(ep.parameters[1].experts == Approx(4.0 * routed / 64));
  CHECK(one.parameters[1].layers - ep.parameters[1].layers == Approx(4.0 * routed * 63 / 64));
  // The dense layers of stage 0 hold no routed experts.
  CHECK(ep.parameters[0].experts == Approx(routed / 64));
  // ZeRO-1: the experts' 12 optimizer bytes over the 128·1/64 = 2 ranks holding the same
  // experts, the rest's over DP·CP = 128.
  const double p1 = ep.parameters[1].total();
  const double x1 = ep.parameters[1].experts;
  CHECK(ep.static_memory[1].optimizer == Approx(12 * (p1 - x1) / 128 + 12 * x1 / 2));
  CHECK(ep.static_memory[1].weights == Approx(2 * p1));
  CHECK(ep.static_memory[1].gradients == Approx(4 * p1));
  // Reduction: the non-expert gradients over DP·CP, the experts' over their own 2 ranks.
  CHECK(ep.expert_dp == 2);
  CHECK(ep.expert_gradient_bytes[1] == Approx(4 * x1));
  CHECK(one.expert_gradient_bytes[1] == 0.0);
  const std::uint32_t k = dp_bucket_count(ep.chunks[1]);
  CHECK(ep.bucket_reduce_time(1, k) ==
        Approx(
            ep.dp_reduce_time((ep.gradient_bytes[1] - 4 * x1) / k) +
            ring_reduce_scatter_time(2, 4 * x1 / k, ep.expert_dp_bandwidth, ep.expert_dp_latency)));
  // EP 64 at TP 1 spans 8 nodes: the experts' group (ranks 64 apart) is on the network.
  CHECK(ep.expert_dp_bandwidth == job.cluster.inter_node_bandwidth);
}

TEST_CASE("job_costs: the experts' all-to-all is timed where the EP group is",
          "[plan][job_costs][ep]") {
  const training_job job = deepseek_job();
  const cluster_spec& c = job.cluster;
  const double bytes = 1e9;
  plan_layout l = deepseek_layout(8);
  // 8 ranks, TP 1: one node, NVLink.
  CHECK(expert_all_to_all_seconds(job, l, bytes) ==
        Approx(bytes / c.intra_node_bandwidth + c.intra_node_latency));
  // 64 ranks over 8 nodes: 7 of each rank's 63 peers in its node (NVLink), 56 across the
  // network; the slower share sets the time.
  l.ep = 64;
  CHECK(expert_all_to_all_seconds(job, l, bytes) ==
        Approx(std::max(bytes * 7 / 63 / c.intra_node_bandwidth,
                        bytes * 56 / 63 / c.inter_node_bandwidth) +
               c.inter_node_latency));
  l.ep = 1;
  CHECK(expert_all_to_all_seconds(job, l, bytes) == 0.0);
  // A layer's F and B each carry a dispatch and a combine: tokens · top_k · h · 2 bytes · 63/64.
  l.ep = 64;
  const layer_kernel_times kt = layer_kernel_times_of(job, l, recompute_kind::none);
  const double a2a = 4096.0 * 8 * 7168 * 2 * 63 / 64;
  int found = 0;
  for (const auto* op : {&kt.forward, &kt.backward_input}) {
    for (const timed_kernel& k : *op) {
      if (k.k.group == comm_group::expert) {
        ++found;
        CHECK(k.k.bytes == Approx(a2a));
        CHECK(k.seconds == Approx(expert_all_to_all_seconds(job, l, a2a)));
      }
    }
  }
  CHECK(found == 4);
}

TEST_CASE("job_costs: a load imbalance scales the busiest rank's expert work and what it keeps",
          "[plan][job_costs][ep]") {
  training_job job = deepseek_job();
  const plan_layout l = deepseek_layout(64);
  const layer_kernel_times even = layer_kernel_times_of(job, l, recompute_kind::none);
  const layer_activation_bytes even_kept =
      activation_bytes_of_tensors(job.model, shard_of(job, l, layout_tokens(job, l)));
  job.moe_imbalance = 1.5;
  const layer_kernel_times busy = layer_kernel_times_of(job, l, recompute_kind::none);
  const layer_activation_bytes busy_kept =
      activation_bytes_of_tensors(job.model, shard_of(job, l, layout_tokens(job, l)));
  for (std::size_t i = 0; i < even.forward.size(); ++i) {
    const std::string_view name = even.forward[i].k.name;
    INFO(name);
    const bool expert = name == "experts up" || name == "experts down";
    CHECK(busy.forward[i].k.flops == Approx(even.forward[i].k.flops * (expert ? 1.5 : 1.0)));
  }
  CHECK(busy_kept.full > even_kept.full);
  // A dense model has no experts to weigh: refused, naming the field.
  training_job dense = small_job();
  dense.moe_imbalance = 1.5;
  CHECK_THROWS_WITH(dense.check(),
                    Catch::Contains("moe_imbalance (1.5) needs a model with experts"));
  job.moe_imbalance = 0.5;
  CHECK_THROWS_WITH(job.check(),
                    Catch::Contains("moe_imbalance (0.5) must be finite and at least 1"));
}

TEST_CASE("job_costs: an overlapped pair hides each op's all-to-alls behind the other's compute",
          "[plan][job_costs][overlap]") {
  const training_job job = deepseek_job();
  const plan_layout l = deepseek_layout(64);
  const job_costs jc =
      make_job_costs(job, l, recompute_kind::none, deepseek_layers(), placement::sequential(16));
  const job_op_times ot = op_times_of(job, l, recompute_kind::none);
  // A dispatch and a combine in F, their gradients' two in B, each of the bytes above.
  const double a2a = expert_all_to_all_seconds(job, l, 4096.0 * 8 * 7168 * 2 * 63 / 64);
  CHECK(ot.layer_exchange_forward == Approx(2 * a2a));
  CHECK(ot.layer_exchange_backward == Approx(2 * a2a));
  // Stage 1 holds four MoE layers: the pair lasts overlapped_pair_time of its F and B split.
  const op_costs c = jc.costs.chunk_costs()[1];
  REQUIRE(c.overlapped);
  const double af = 4 * 2 * a2a;
  const double ab = 4 * 2 * a2a;
  CHECK(*c.overlapped ==
        Approx(overlapped_pair_time({c.forward - af, af}, {c.backward_input - ab, ab},
                                    job.cluster.overlap_slowdown)));
  CHECK(*c.overlapped < c.forward + c.backward_input);
  // Without expert parallelism there is no all-to-all to hide: T_FB unset (T_F + T_B).
  const job_costs none = make_job_costs(job, deepseek_layout(1), recompute_kind::none,
                                        deepseek_layers(), placement::sequential(16));
  CHECK_FALSE(none.costs.chunk_costs()[1].overlapped);
  // Recomputing inside the backward keeps the gain: T_FB grows by T_R as B does.
  const job_costs full =
      make_job_costs(job, l, recompute_kind::full, deepseek_layers(), placement::sequential(16));
  const cost_model rc = inline_recompute(full.costs, full.memory, 16, 1).first;
  const op_costs plain = full.costs.chunk_costs()[1];
  const op_costs inside = rc.chunk_costs()[1];
  REQUIRE(inside.overlapped);
  CHECK(inside.forward + inside.backward_input - *inside.overlapped ==
        Approx(plain.forward + plain.backward_input - *plain.overlapped));
}

TEST_CASE("job_costs: dualpipe's dual placement holds two stages per rank, each route the model",
          "[plan][job_costs][dualpipe]") {
  const training_job job = small_job();
  plan_layout l = layout(2, 4);
  const job_costs one =
      make_job_costs(job, l, recompute_kind::none, even(32, 4), placement::sequential(4));
  l.chunks = 2;
  std::vector<std::uint32_t> twice = even(32, 4);
  twice.insert(twice.end(), twice.begin(), twice.end());
  const job_costs dual = make_job_costs(job, l, recompute_kind::none, twice, placement::dual(4));
  // Rank s holds stage s of route 0 and stage 3 - s of route 1: 1F1B's two stages.
  double one_total = 0.0, dual_total = 0.0;
  for (stage_index s = 0; s < 4; ++s) {
    INFO("stage " << s);
    CHECK(dual.parameters[s].total() ==
          Approx(one.parameters[s].total() + one.parameters[3 - s].total()));
    CHECK(dual.static_memory[s].total() ==
          Approx(one.static_memory[s].total() + one.static_memory[3 - s].total()));
    one_total += one.parameters[s].total();
    dual_total += dual.parameters[s].total();
  }
  // Parameters 2x (DeepSeek-V3 Table 2); a middle rank's exactly twice 1F1B's.
  CHECK(dual_total == Approx(2 * one_total));
  CHECK(dual.parameters[1].layers == Approx(2 * one.parameters[1].layers));
  // Each route's ends: the embedding on its first chunk, the head on its last.
  CHECK(dual.chunks[0].embedding);
  CHECK(dual.chunks[3].head);
  CHECK(dual.chunks[4].embedding);
  CHECK(dual.chunks[7].head);
  CHECK_FALSE(dual.chunks[3].embedding);
  CHECK_FALSE(dual.chunks[4].head);
  // Each route must hold the whole model.
  std::vector<std::uint32_t> short_route = twice;
  short_route[5] = 7;
  CHECK_THROWS_WITH(make_job_costs(job, l, recompute_kind::none, short_route, placement::dual(4)),
                    Catch::Contains("partition gives 31 layers on route 1, the model has 32"));
}

TEST_CASE("job_costs: compute runs slower beside the collectives it hides",
          "[plan][job_costs][overlap]") {
  training_job job = small_job();
  REQUIRE(job.cluster.overlap_slowdown == 0.189);  // the presets', Lee et al.'s mean
  training_job free = job;
  free.cluster.overlap_slowdown = 0.0;
  const plan_layout l = layout(8, 1);
  auto gemm = [](const kind_seconds& k) { return k[time_kind::gemm]; };
  auto comm = [](const kind_seconds& k) { return k[time_kind::communication]; };
  // The backward's tensor-parallel collectives beside the other half of its GEMMs: what they
  // hide comes off the communication as before, and s times it goes on the GEMMs beside them.
  for (tp_overlap mode : {tp_overlap::backward, tp_overlap::all}) {
    job.tp_comm_overlap = free.tp_comm_overlap = mode;
    const job_op_times a = op_times_of(free, l, recompute_kind::none);
    const job_op_times b = op_times_of(job, l, recompute_kind::none);
    const op_kind_seconds& ka = a.layer_kinds;
    const op_kind_seconds& kb = b.layer_kinds;
    INFO(to_string(mode));
    // Hidden: every tensor-parallel collective of the layer less what stays exposed.
    training_job none = free;
    none.tp_comm_overlap = tp_overlap::none;
    const op_kind_seconds& kn = op_times_of(none, l, recompute_kind::none).layer_kinds;
    double hidden = 0.0;
    double slowed = 0.0;
    for (auto op : {&op_kind_seconds::forward, &op_kind_seconds::backward_input,
                    &op_kind_seconds::backward_weight}) {
      hidden += comm(kn.*op) - comm(ka.*op);
      slowed += gemm(kb.*op) - gemm(ka.*op);
    }
    REQUIRE(hidden > 0.0);
    if (mode == tp_overlap::backward) {
      // Each half of the backward's GEMMs outlasts the other's collectives: all stay hidden.
      for (auto op : {&op_kind_seconds::forward, &op_kind_seconds::backward_input,
                      &op_kind_seconds::backward_weight}) {
        CHECK(comm(kb.*op) == Approx(comm(ka.*op)));
      }
      CHECK(slowed == Approx(0.189 * hidden));
      CHECK(b.layer_total() == Approx(a.layer_total() + 0.189 * hidden));
    } else {
      // Beside each its own GEMM, some collectives outlast theirs: the slowed GEMM hides more
      // of them, and the layer lasts no less than unslowed, at most 0.189 · hidden more.
      CHECK(slowed > 0.0);
      CHECK(b.layer_total() > a.layer_total());
      CHECK(b.layer_total() <= a.layer_total() + 0.189 * hidden);
    }
  }
  // The CP ring beside the attention core, which it slows by s times the exchange's seconds.
  job.tp_comm_overlap = free.tp_comm_overlap = tp_overlap::none;
  plan_layout cp = layout(8, 1);
  cp.cp = 2;
  const op_kind_seconds& ca = op_times_of(free, cp, recompute_kind::none).layer_kinds;
  const op_kind_seconds& cb = op_times_of(job, cp, recompute_kind::none).layer_kinds;
  const double attention_slowed =
      cb.forward[time_kind::attention] - ca.forward[time_kind::attention];
  CHECK(attention_slowed > 0.0);
  CHECK(attention_slowed <= 0.189 * ca.forward[time_kind::attention] * (1 + 1e-12));
  CHECK(comm(cb.forward) <= comm(ca.forward));
  // A pipeline send runs beside the stage's next op: the sending op's compute grows by s times
  // the transfer; blocking, the op waits the transfer out instead, as before.
  const plan_layout pp = layout(2, 4);
  const placement pl = placement::sequential(4);
  const job_costs ja = make_job_costs(free, pp, recompute_kind::none, even(32, 4), pl);
  const job_costs jb = make_job_costs(job, pp, recompute_kind::none, even(32, 4), pl);
  const op_costs a1 = ja.costs.chunk_costs()[1];
  const op_costs b1 = jb.costs.chunk_costs()[1];
  CHECK(b1.forward - a1.forward == Approx(0.189 * ja.costs.comm(1, 2)));
  CHECK(b1.backward_input - a1.backward_input == Approx(0.189 * ja.costs.comm(1, 0)));
  CHECK(b1.backward_weight == a1.backward_weight);
  CHECK(jb.costs.chunk_costs()[3].forward == ja.costs.chunk_costs()[3].forward);  // sends no F
  job.blocking_p2p = free.blocking_p2p = true;
  const op_costs blocking =
      make_job_costs(job, pp, recompute_kind::none, even(32, 4), pl).costs.chunk_costs()[1];
  const op_costs blocking_free =
      make_job_costs(free, pp, recompute_kind::none, even(32, 4), pl).costs.chunk_costs()[1];
  CHECK(blocking.forward == blocking_free.forward);
  // ZeRO-3 without pipeline parallelism gathers each F's and B's weights beside the one before.
  const plan_layout one = layout(1, 1);
  const placement single = placement::sequential(1);
  const training_job zero3 = small_job(optimizer_sharding::weights);
  const job_costs gathered = make_job_costs(zero3, one, recompute_kind::none, even(32, 1), single);
  const op_costs plain = make_job_costs(small_job(), one, recompute_kind::none, even(32, 1), single)
                             .costs.chunk_costs()[0];
  const double gather = gathered.dp_gather_time(
      weight_bytes_per_parameter * gathered.gradient_bytes[0] / zero3.gradient_reduce_bytes);
  REQUIRE(gather > 0.0);
  const op_costs z = gathered.costs.chunk_costs()[0];
  CHECK(z.forward == Approx(overlap_split(plain.forward, gather, 0.189).total()));
  CHECK(z.backward_input == Approx(overlap_split(plain.backward_input, gather, 0.189).total()));
  CHECK(z.forward > std::max(plain.forward, gather));
}
