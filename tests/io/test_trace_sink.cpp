#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <pipesched/io/detail/trace_sink.hpp>

using namespace pipesched;
using nlohmann::json;

TEST_CASE("trace_sink: numbers and strings as nlohmann writes them", "[io][trace_sink]") {
  // The same text as nlohmann for these; where two digit strings are both shortest enough
  // (7e22: nlohmann's Grisu2 writes 7.0000000000000004e+22) the value read back is the same.
  const std::vector<double> same_text = {
      0.0,   -0.0,   1.0,     4000.0, -12.5,   0.1,
      1e-4,  1.5e-5, 1e15,    1e16,   1.5e15,  999999999999999.0,
      1e300, 5e-324, 1.0 / 3, 2.5e-7, 123.456, -1e15,
      1e14,  2e-300, 6.02e23, 1e21,   0.5,     1234567890123456.5};
  for (const double x : same_text) {
    INFO(x);
    std::ostringstream os;
    {
      detail::trace_sink out(os);
      out.number(x);
      out.flush();
    }
    CHECK(os.str() == json(x).dump());
  }
  for (const double x : {7e22, 1.0 / 7, 2.0 / 3 * 1e15, 9.999999999999999e15}) {
    INFO(x);
    std::ostringstream os;
    {
      detail::trace_sink out(os);
      out.number(x);
      out.flush();
    }
    CHECK(json::parse(os.str()).get<double>() == x);
  }
  for (const double x :
       {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    std::ostringstream os;
    detail::trace_sink out(os);
    out.number(x);
    out.flush();
    CHECK(os.str() == "null");
  }
  for (const std::string& text :
       {std::string("plain"), std::string("q\"b\\s/"), std::string("\x01\x1f\b\f\n\r\t"),
        std::string("\xc3\xa4\xe2\x82\xac")}) {
    std::ostringstream os;
    detail::trace_sink out(os);
    out.string(text);
    out.flush();
    CHECK(os.str() == json(text).dump());
  }
}

TEST_CASE("trace_sink: member writes key, value and the comma between members") {
  std::ostringstream os;
  detail::trace_sink out(os);
  out.raw("{");
  out.member("n", std::uint64_t{3});
  out.member("x", 0.5);
  out.member("name", std::string("zb \"h1\""));
  out.member("last", std::string_view("v"), true);
  out.raw("}");
  out.flush();
  CHECK(os.str() == R"({"n":3,"x":0.5,"name":"zb \"h1\"","last":"v"})");
}
