#include "tests/load/list_scanner.h"

#include <catch2/catch.hpp>
#include <string>

namespace kf::load {
namespace {

ListScanner ScanWhole(std::string_view body) {
  ListScanner s;
  s.Feed(body);
  return s;
}

TEST_CASE("ListScanner finds the list metadata before the items") {
  const std::string body =
      R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"12345",)"
      R"("continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},"items":[)"
      R"({"metadata":{"name":"a","resourceVersion":"7","continue":"no"},"spec":{}},)"
      R"({"metadata":{"name":"b","resourceVersion":"9"},"status":{"x":[1,2,{"y":"}"}]}}]})";
  const ListScanner s = ScanWhole(body);
  CHECK(s.done());
  CHECK_FALSE(s.failed());
  CHECK(s.resource_version() == "12345");
  CHECK(s.continue_token() == "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ");
  CHECK(s.items() == 2);
}

TEST_CASE("ListScanner finds the list metadata after the items") {
  const ListScanner s = ScanWhole(R"({"items":[{"metadata":{"resourceVersion":"1"}}],"kind":"X",)"
                                  R"( "metadata" : { "resourceVersion" : "99" } })");
  CHECK(s.done());
  CHECK(s.resource_version() == "99");
  CHECK(s.continue_token().empty());
  CHECK(s.items() == 1);
}

TEST_CASE("ListScanner reads the same in any split of the body") {
  const std::string body =
      R"({"kind":"NodeList","metadata":{"resourceVersion":"4242"},"items":[)"
      R"({"metadata":{"name":"n\"\\{","annotations":{"k":"v\\\"}]"}}},{"metadata":{}}]})";
  for (size_t cut = 0; cut <= body.size(); ++cut) {
    for (size_t cut2 = cut; cut2 <= body.size(); cut2 += 7) {
      CAPTURE(cut, cut2);
      ListScanner s;
      REQUIRE(s.Feed(std::string_view(body).substr(0, cut)));
      REQUIRE(s.Feed(std::string_view(body).substr(cut, cut2 - cut)));
      REQUIRE(s.Feed(std::string_view(body).substr(cut2)));
      CHECK(s.done());
      CHECK(s.resource_version() == "4242");
      CHECK(s.items() == 2);
    }
  }
}

TEST_CASE("ListScanner is not done with a truncated body") {
  const ListScanner s = ScanWhole(R"({"metadata":{"resourceVersion":"5"},"items":[{})");
  CHECK_FALSE(s.done());
  CHECK_FALSE(s.failed());
}

TEST_CASE("ListScanner fails on unbalanced brackets and non-objects") {
  CHECK(ScanWhole(R"({"items":[}])").failed());
  CHECK(ScanWhole(R"(["a"])").failed());
  CHECK(ScanWhole(R"("a")").failed());
}

TEST_CASE("ListScanner ignores a metadata key nested deeper or too long keys") {
  const ListScanner s =
      ScanWhole(R"({"other":{"metadata":{"resourceVersion":"1"}},)"
                R"("metadataXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX":{"resourceVersion":"2"}})");
  CHECK(s.done());
  CHECK(s.resource_version().empty());
}

}  // namespace
}  // namespace kf::load
