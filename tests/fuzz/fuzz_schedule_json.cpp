// libFuzzer target: read_schedule_json on arbitrary bytes. Only pipesched::invalid_argument may
// escape the reader; anything it accepts must survive validate() (bounded by the op count, not
// by the declared p*v*m) and a write/read round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <pipesched/analysis/validate.hpp>
#include <pipesched/io/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  pipesched::schedule s;
  try {
    s = pipesched::read_schedule_json(text);
  } catch (const pipesched::invalid_argument&) {
    return 0;  // the one allowed failure
  }
  pipesched::validate_options opts;
  opts.max_violations = 16;
  const auto report = pipesched::validate(s, opts);
  if (report.total < report.violations.size()) {
    std::abort();
  }
  // Whatever the reader accepts, the writer must write and the reader read back unchanged.
  const pipesched::schedule back = pipesched::read_schedule_json(pipesched::write_schedule_json(s));
  if (!(back == s) || back.name() != s.name()) {
    std::abort();
  }
  return 0;
}
