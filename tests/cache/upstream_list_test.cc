#include "cache/upstream_list.h"

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

}  // namespace
}  // namespace kf
