#include "common/api/upstream_list.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

TEST_CASE("ParseListPage splits a LIST body into the raw bytes of each item") {
  const std::string body =
      "{\"kind\":\"ConfigMapList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"204\","
      "\"continue\":\"abc\",\"remainingItemCount\":2},\"items\":[{\"metadata\":{\"name\":\"c1\","
      "\"resourceVersion\":\"202\"},\"data\":{\"k\":\"{[\\\"]}\"}},{\"metadata\":{\"name\":\"c2\","
      "\"resourceVersion\":\"203\"}}]}\n";
  auto page = ParseListPage(body);
  REQUIRE(page.ok());
  CHECK(page->resource_version == 204);
  CHECK(page->continue_token == "abc");
  CHECK(page->kind == "ConfigMapList");
  CHECK(page->api_version == "v1");
  REQUIRE(page->items.size() == 2);
  CHECK(
      page->items[0] ==
      "{\"metadata\":{\"name\":\"c1\",\"resourceVersion\":\"202\"},\"data\":{\"k\":\"{[\\\"]}\"}}");
  CHECK(page->items[1] == "{\"metadata\":{\"name\":\"c2\",\"resourceVersion\":\"203\"}}");
  CHECK(ItemToEventForm(page->items[1], "ConfigMap", "v1") ==
        "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c2\","
        "\"resourceVersion\":\"203\"}}");
}

TEST_CASE("ParseListPage accepts an empty list and rejects what is not a list") {
  auto empty = ParseListPage(
      "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"9\"},"
      "\"items\":[]}");
  REQUIRE(empty.ok());
  CHECK(empty->items.empty());
  CHECK_FALSE(ParseListPage("{\"kind\":\"Status\"}").ok());
  CHECK_FALSE(ParseListPage("{\"kind\":").ok());
}

TEST_CASE("ItemToEventForm stays JSON for an empty item and for kinds that need escaping") {
  // An upstream_list_fuzz input: "{}" must not become {"kind":"Pod","apiVersion":"v1",}.
  CHECK(ItemToEventForm("{}", "Pod", "v1") == R"({"kind":"Pod","apiVersion":"v1"})");
  CHECK(ItemToEventForm("{ }", "Pod", "v1") == R"({"kind":"Pod","apiVersion":"v1" })");
  CHECK(ItemToEventForm(R"({"a":1})", "P\"d", "v1") ==
        R"({"kind":"P\"d","apiVersion":"v1","a":1})");
}

TEST_CASE("ParseWatchLine finds the object's raw bytes and the event's RV") {
  auto ev = ParseWatchLine(
      "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
      "\"name\":\"p\",\"resourceVersion\":\"77\"}}}\n");
  REQUIRE(ev.ok());
  CHECK(ev->type == "MODIFIED");
  CHECK(ev->resource_version == 77);
  CHECK(ev->object ==
        "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"p\","
        "\"resourceVersion\":\"77\"}}");
  auto err = ParseWatchLine(
      "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
      "\"status\":\"Failure\",\"message\":\"too old resource version: 1 (5)\",\"reason\":"
      "\"Expired\",\"code\":410}}");
  REQUIRE(err.ok());
  CHECK(err->error_code == 410);
  CHECK(err->error_message == "too old resource version: 1 (5)");
  CHECK_FALSE(ParseWatchLine("{\"type\":\"ADDED\"}").ok());
}

TEST_CASE("ParseWatchLine and ParseListPage reject a NUL byte instead of stopping at it") {
  // A watch_line_fuzz input: RapidJSON ends the document at a NUL, and the object's raw bytes
  // would run on to the end of the line.
  using namespace std::string_literals;
  CHECK_FALSE(ParseWatchLine("{\"type\":\"ADDED\",\"object\":{\"a\":1}}\0junk}\n"s).ok());
  CHECK_FALSE(ParseListPage("{\"kind\":\"PodList\",\"items\":[]}\0{\"x\":1}"s).ok());
}

TEST_CASE("ParseWatchLine takes the object only from Go's layout") {
  // A watch_line_fuzz input: members after "object" (here a second "object") must not be cut
  // into the object's raw bytes.
  CHECK_FALSE(ParseWatchLine(R"({"type":"ADDED","object":{"a":1},"x":1,"object":{"b":2}})").ok());
  CHECK_FALSE(ParseWatchLine(R"({"object":{"a":1,"object":{}},"type":"ADDED"})").ok());
  auto ev = ParseWatchLine(R"({"type":"ADDED","object":{"a":{"object":1}}})");
  REQUIRE(ev.ok());
  CHECK(ev->object == R"({"a":{"object":1}})");
}

}  // namespace
}  // namespace kf
