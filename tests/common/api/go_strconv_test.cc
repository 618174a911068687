#include "common/api/go_strconv.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

TEST_CASE("ParseGoUint takes strconv.ParseUint's base-10 digits and nothing else") {
  CHECK(ParseGoUint("0") == 0u);
  CHECK(ParseGoUint("01") == 1u);  // Leading zeros are Go's too.
  CHECK(ParseGoUint("18446744073709551615") == UINT64_MAX);
  // What absl::SimpleAtoi would take and Go refuses, and what both refuse.
  for (const char* bad : {"", "+1", " 1", "1 ", "\t1", "1\n", "-1", "-0", "0x1", "1e3", "1_000",
                          "18446744073709551616", "99999999999999999999999", "\xd9\xa1"}) {
    INFO(bad);
    CHECK_FALSE(ParseGoUint(bad).has_value());
  }
}

TEST_CASE("ParseGoInt takes an optional sign, then ParseGoUint's digits, within int64") {
  CHECK(ParseGoInt("+5") == 5);
  CHECK(ParseGoInt("-5") == -5);
  CHECK(ParseGoInt("007") == 7);
  CHECK(ParseGoInt("9223372036854775807") == INT64_MAX);
  CHECK(ParseGoInt("-9223372036854775808") == INT64_MIN);
  for (const char* bad :
       {"", "+", "-", " 5", "5 ", "+-5", "9223372036854775808", "-9223372036854775809", "5s"}) {
    INFO(bad);
    CHECK_FALSE(ParseGoInt(bad).has_value());
  }
}

}  // namespace
}  // namespace kf
