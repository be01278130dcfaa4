// Variable-length batches: pipesched.pack(model, lengths, ...) with the `pipesched pack` options
// as keywords; the request is the library's pack_request (the same rules and messages as the
// CLI) and comes back as the packing JSON (a dict) or the CLI's report.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pipesched/io/json.hpp>
#include <pipesched/io/lengths.hpp>
#include <pipesched/io/pack_io.hpp>
#include <pipesched/io/plan_json.hpp>
#include <pipesched/plan/pack.hpp>

#include "bindings.hpp"

namespace pipesched::python {

void bind_pack(py::module_& m) {
  m.def(
      "pack",
      [](const std::string& model, const py::object& lengths, const std::string& gpu,
         std::optional<std::uint64_t> tokens_per_microbatch,
         std::optional<std::uint32_t> microbatches, std::optional<std::uint32_t> stages,
         const std::string& schedule, std::optional<std::uint32_t> chunks,
         std::optional<std::uint32_t> tp, bool sequence_parallel, const std::string& recompute,
         const py::object& memory_limit, std::optional<std::size_t> search_evaluations,
         std::optional<double> search_budget, const std::string& format) -> py::object {
        const bool json = json_format(format);
        if (!stages) {
          detail::fail("stages: the pipeline stages must be given");
        }
        pack_request req;
        req.model = load_transformer_spec(model);
        req.cluster = load_cluster_spec(gpu);
        if (py::isinstance<py::str>(lengths)) {
          const std::string path = lengths.cast<std::string>();
          sequence_lengths l = read_lengths(read_text_file(path), path);
          req.lengths = std::move(l.lengths);
          req.lines = std::move(l.lines);
        } else {
          std::vector<std::int64_t> given;
          try {
            given = lengths.cast<std::vector<std::int64_t>>();
          } catch (const py::cast_error&) {
            detail::fail("lengths: expected a file name or a sequence of whole numbers");
          }
          for (std::size_t i = 0; i < given.size(); ++i) {
            if (given[i] < 1) {
              detail::fail("pack: lengths: sequence ", i, " has ", given[i],
                           " tokens: every length must be at least 1");
            }
            req.lengths.push_back(static_cast<std::uint64_t>(given[i]));
          }
        }
        req.tokens_per_microbatch = tokens_per_microbatch;
        req.microbatches = microbatches;
        req.stages = *stages;
        req.schedule = schedule;
        req.chunks = chunks;
        req.tp = tp.value_or(1);
        req.sequence_parallel = sequence_parallel;
        req.recompute = recompute_kind_named(recompute, "recompute:");
        if (py::isinstance<py::str>(memory_limit)) {
          const std::string text = memory_limit.cast<std::string>();
          const std::optional<double> bytes = parse_bytes(text);
          if (!bytes) {
            detail::fail(
                "memory_limit: must be a number of bytes > 0 with an optional unit (B, "
                "kB, MB, GB, TB, KiB, MiB, GiB, TiB), not \"",
                text, "\"");
          }
          req.memory_limit = *bytes;
        } else if (!memory_limit.is_none()) {
          req.memory_limit = memory_limit.cast<double>();
        }
        if (search_evaluations) {
          req.search_evaluations = *search_evaluations;
        }
        if (search_budget) {
          req.search_budget_ms = *search_budget;
        }
        pack_result r;
        {
          py::gil_scoped_release unlocked;  // a search can take seconds; other threads may run
          r = pack(req);
        }
        if (json) {
          return python_json(pack_to_json(req, r));
        }
        return py::str(pack_text(req, r));
      },
      py::arg("model"), py::arg("lengths"), py::kw_only(), py::arg("gpu") = "h100-sxm-80gb",
      py::arg("tokens_per_microbatch") = py::none(), py::arg("microbatches") = py::none(),
      py::arg("stages") = py::none(), py::arg("schedule") = "1f1b", py::arg("chunks") = py::none(),
      py::arg("tp") = py::none(), py::arg("sequence_parallel") = false,
      py::arg("recompute") = "selective", py::arg("memory_limit") = py::none(),
      py::arg("search_evaluations") = py::none(), py::arg("search_budget") = py::none(),
      py::arg("format") = "json",
      R"(Pack one global batch's sequences into micro-batches (docs/model.md section 10.1):
`pipesched pack`.

model: a preset (model_presets()) or a model JSON file; lengths: a lengths file (one whole
number of tokens per line) or a sequence of lengths. Keywords are the CLI's long options: gpu,
tokens_per_microbatch or microbatches (one of them), stages, schedule, chunks, tp,
sequence_parallel, recompute ('none', 'selective', 'full'), memory_limit (bytes, or text with a
unit such as '72GiB'; default the GPU's usable memory), search_evaluations, search_budget (ms).
Returns the packing JSON as a dict (format='json': "microbatches", "order", "step_time" and
"baseline_step_time" in seconds, "peak_memory" per stage and "memory_limit" in bytes, "fits")
or the CLI's report ('text'). Nothing fitting is no error: "fits" is False.)");
}

}  // namespace pipesched::python
