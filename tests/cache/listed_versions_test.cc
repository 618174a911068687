#include "cache/listed_versions.h"

#include <catch2/catch.hpp>
#include <string>

namespace kf {

TEST_CASE("ListedVersions reads each item's key and resourceVersion from its metadata",
          "[shared_proof]") {
  const std::string body =
      R"({"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":)"
      R"({"resourceVersion":"40"},"items":[{"kind":"PartialObjectMetadata","apiVersion":)"
      R"("meta.k8s.io/v1","metadata":{"name":"cm-1","namespace":"ns","resourceVersion":"12"}},)"
      R"({"metadata":{"name":"node-a","resourceVersion":"7"}}]})";
  auto page = ParseListPage(body);
  REQUIRE(page.ok());
  CHECK(page->resource_version == 40);
  auto listed = ListedVersions(*page);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 2);
  CHECK((*listed)[0].key == "ns/cm-1");
  CHECK((*listed)[0].resource_version == 12);
  CHECK((*listed)[1].key == "node-a");
  CHECK((*listed)[1].resource_version == 7);

  auto no_rv =
      ParseListPage(R"({"kind":"PodList","metadata":{},"items":[{"metadata":{"name":"a"}}]})");
  REQUIRE(no_rv.ok());
  CHECK_FALSE(ListedVersions(*no_rv).ok());
}

}  // namespace kf
