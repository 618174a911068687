#include "tests/tools/resource_version.h"

#include <catch2/catch.hpp>

namespace kf::tools {
namespace {

TEST_CASE("ParseResourceVersion takes whole decimal numbers only") {
  CHECK(ParseResourceVersion("0") == 0u);
  CHECK(ParseResourceVersion("18446744073") == 18446744073u);
  CHECK(ParseResourceVersion("9999999999999999999") == 9999999999999999999u);
  CHECK_FALSE(ParseResourceVersion(""));
  CHECK_FALSE(ParseResourceVersion("12a"));
  CHECK_FALSE(ParseResourceVersion("012"));
  CHECK_FALSE(ParseResourceVersion("99999999999999999999999"));
}

TEST_CASE("ObjectResourceVersion reads the metadata of a write's answer") {
  CHECK(ObjectResourceVersion(
            R"({"kind":"Pod","metadata":{"name":"p","resourceVersion":"4711"},"spec":{}})") ==
        4711u);
  CHECK_FALSE(ObjectResourceVersion(R"({"kind":"Status","status":"Failure","code":409})"));
  CHECK_FALSE(ObjectResourceVersion(R"({"metadata":{"resourceVersion":4711}})"));
  CHECK_FALSE(ObjectResourceVersion("not json"));
}

}  // namespace
}  // namespace kf::tools
