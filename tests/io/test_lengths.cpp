#include <string>

#include <catch2/catch.hpp>

#include <pipesched/io/lengths.hpp>

using namespace pipesched;

TEST_CASE("read_lengths: one whole number of tokens per line", "[io][lengths]") {
  const sequence_lengths l = read_lengths("# a batch\n4096\n  512\t\r\n\n   \n16384\n1");
  CHECK(l.lengths == std::vector<std::uint64_t>{4096, 512, 16384, 1});
  CHECK(l.lines == std::vector<std::size_t>{2, 3, 6, 7});
  CHECK(read_lengths("2147483648\n").lengths.front() == max_sequence_length);
}

TEST_CASE("read_lengths: bad lines name the line and the value", "[io][lengths]") {
  CHECK_THROWS_WITH(read_lengths("10\n-5\n", "b.txt"),
                    "b.txt line 2: -5 tokens: a sequence length must be at least 1");
  CHECK_THROWS_WITH(read_lengths("10\n0\n", "b.txt"),
                    "b.txt line 2: 0 tokens: a sequence length must be at least 1");
  CHECK_THROWS_WITH(read_lengths("1.5\n", "b.txt"),
                    "b.txt line 1: \"1.5\" is not a whole number of tokens (one length per line)");
  CHECK_THROWS_WITH(
      read_lengths("12 13\n", "b.txt"),
      "b.txt line 1: \"12 13\" is not a whole number of tokens (one length per line)");
  CHECK_THROWS_WITH(read_lengths("+7\n", "b.txt"),
                    "b.txt line 1: \"+7\" is not a whole number of tokens (one length per line)");
  CHECK_THROWS_WITH(
      read_lengths("2147483649\n", "b.txt"),
      "b.txt line 1: 2147483649 tokens: a sequence length must be at most 2147483648");
  CHECK_THROWS_WITH(read_lengths("99999999999999999999999999\n", "b.txt"),
                    Catch::EndsWith("a sequence length must be at most 2147483648"));
  CHECK_THROWS_WITH(read_lengths("# nothing\n\n", "b.txt"),
                    "b.txt: no sequence lengths (one whole number of tokens per line)");
  CHECK_THROWS_WITH(read_lengths(""),
                    "lengths: no sequence lengths (one whole number of tokens per line)");
  // Control bytes are shown escaped, never echoed to the terminal raw.
  CHECK_THROWS_WITH(read_lengths("1\x1b[31m00\n", "b.txt"),
                    "b.txt line 1: \"1\\x1b[31m00\" is not a whole number of tokens (one length "
                    "per line)");
  CHECK_THROWS_WITH(read_lengths(std::string("7\0\x7f\n", 4), "b.txt"),
                    Catch::StartsWith("b.txt line 1: \"7\\x00\\x7f\""));
}

TEST_CASE("read_lengths: a byte-order mark is skipped, other non-ASCII bytes are shown escaped",
          "[io][lengths]") {
  const sequence_lengths r = read_lengths(
      "\xef\xbb\xbf"
      "4096\r\n2048\n",
      "bom.txt");
  CHECK(r.lengths == std::vector<std::uint64_t>{4096, 2048});
  CHECK(r.lines == std::vector<std::size_t>{1, 2});
  // Only at the very start: anywhere else it is a bad line, shown byte by byte.
  CHECK_THROWS_WITH(read_lengths("1\n\xef\xbb\xbf"
                                 "2\n",
                                 "b.txt"),
                    "b.txt line 2: \"\\xef\\xbb\\xbf2\" is not a whole number of tokens (one "
                    "length per line)");
  CHECK_THROWS_WITH(read_lengths("4\xc3\xa4\n", "b.txt"),
                    Catch::StartsWith("b.txt line 1: \"4\\xc3\\xa4\""));
}
