// libFuzzer target: from_torch_csv on arbitrary bytes. Only pipesched::invalid_argument may
// escape the reader; anything it accepts must survive validate() (bounded by the op count, not
// by the declared sizes), and a valid schedule must come back unchanged (same ranks, and the
// same (kind, global stage, micro-batch) sequence per rank) from to_torch_csv in both spellings
// and both alignments.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <tuple>
#include <vector>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/io/torch_csv.hpp>

namespace {

using namespace pipesched;

using canonical = std::vector<std::vector<std::tuple<op_kind, global_chunk, microbatch_index>>>;

canonical canon(const schedule& s) {
  canonical out(s.stages());
  for (stage_index st = 0; st < s.stages(); ++st) {
    for (const op& o : s.ops(st)) {
      out[st].emplace_back(o.kind, s.layout().global(st, o.chunk), o.mb);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  schedule s;
  try {
    s = from_torch_csv(text);
  } catch (const invalid_argument&) {
    return 0;  // the one allowed failure
  }
  validate_options opts;
  opts.max_violations = 16;
  if (!validate(s, opts).ok()) {
    return 0;
  }
  const canonical want = canon(s);
  for (const auto spelling : {torch_spelling::current, torch_spelling::legacy}) {
    for (const auto align : {torch_alignment::list_order, torch_alignment::unit_steps}) {
      const schedule back = from_torch_csv(to_torch_csv(s, {spelling, align}));
      if (back.microbatches() != s.microbatches() || back.chunks() != s.chunks() ||
          canon(back) != want) {
        std::abort();
      }
    }
  }
  return 0;
}
