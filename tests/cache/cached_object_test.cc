#include "cache/cached_object.h"

#include <catch2/catch.hpp>

#include "cache/watch_event.h"
#include "tests/cache/test_objects.h"

namespace kf {
namespace {

using testing::Pod;
using testing::PodJson;
using testing::PodsType;

TEST_CASE("CachedObject keeps the upstream bytes and reads key, RV, labels and fields") {
  const ObjectPtr p = Pod("ns1", "a", 42, "node-1", "web");
  CHECK(p->key() == "ns1/a");
  CHECK(p->resource_version() == 42);
  CHECK(p->json() == PodJson("ns1", "a", 42, "node-1", "web"));
  REQUIRE(p->labels().Get("app") != nullptr);
  CHECK(*p->labels().Get("app") == "web");
  REQUIRE(p->fields().Get("spec.nodeName") != nullptr);
  CHECK(*p->fields().Get("spec.nodeName") == "node-1");
}

TEST_CASE("CachedObject's list item form drops kind and apiVersion, as built-in lists do") {
  const ObjectPtr p = Pod("ns1", "a", 42);
  auto [prefix, rest] = p->list_item();
  const std::string item = std::string(prefix) + std::string(rest);
  CHECK(item.rfind("{\"metadata\":{\"name\":\"a\"", 0) == 0);
  CHECK(std::string(p->json()) == "{\"kind\":\"Pod\",\"apiVersion\":\"v1\"," + item.substr(1));
}

TEST_CASE("CachedObject's CBOR form is built once, shared, and drops type fields in list items") {
  const ObjectPtr p = Pod("ns1", "a", 42);
  const ObjectPtr& cbor = p->Cbor("");
  CHECK(cbor == p->Cbor(""));  // Built once; every watcher and answer shares it.
  CHECK(cbor->encoding() == Encoding::kCbor);
  CHECK(cbor->key() == "ns1/a");
  CHECK(cbor->resource_version() == 42);
  // A map of byte strings: "kind" first, as in the JSON.
  CHECK(cbor->bytes().substr(1, 5) == "\x44kind");
  auto [head, rest] = cbor->list_item();
  const auto whole = static_cast<uint8_t>(cbor->bytes()[0]);
  REQUIRE(head.size() == 1);
  CHECK(static_cast<uint8_t>(head[0]) == whole - 2);  // The same map less kind and apiVersion.
  CHECK(rest.substr(0, 9) == "\x48metadata");
  // A frame: the self-described {"type", "object"} map, then the shared bytes.
  const FramePieces frame = Frame("MODIFIED", cbor);
  CHECK(frame[0].bytes == CborFramePrefix("MODIFIED"));
  CHECK(frame[1].bytes.data() == cbor->bytes().data());
  CHECK(frame[2].bytes.empty());
}

TEST_CASE("CachedObject keeps type fields in list items of custom resources") {
  ResourceType crd{"example.com", "v1", "widgets", "Widget", true, true};
  auto o = CachedObject::FromJson(
      crd,
      "{\"apiVersion\":\"example.com/v1\",\"kind\":\"Widget\",\"metadata\":{\"name\":\"w\","
      "\"namespace\":\"n\",\"resourceVersion\":\"7\"}}");
  REQUIRE(o.ok());
  auto [prefix, rest] = (*o)->list_item();
  CHECK(prefix.empty());
  CHECK(rest == (*o)->json());
}

TEST_CASE("CachedObject rewrites only metadata.resourceVersion for a deletion's RV") {
  const ObjectPtr p = Pod("ns1", "a", 42);
  const ObjectPtr d = p->WithResourceVersion(1234);
  CHECK(d->resource_version() == 1234);
  std::string expected = PodJson("ns1", "a", 42);
  expected.replace(expected.find("\"42\""), 4, "\"1234\"");
  CHECK(d->json() == expected);
  CHECK(p->resource_version() == 42);  // The original is untouched.
}

TEST_CASE("CachedObject rejects objects without a usable resourceVersion") {
  CHECK_FALSE(CachedObject::FromJson(PodsType(), "{\"metadata\":{\"name\":\"x\"}}").ok());
  CHECK_FALSE(CachedObject::FromJson(PodsType(), "not json").ok());
  CHECK_FALSE(CachedObject::FromJson(PodsType(), "[]").ok());
}

TEST_CASE("CachedObject keys sort like the apiserver's storage keys") {
  // "/registry/pods/a-b/x" < "/registry/pods/a/x": '-' sorts before '/'.
  CHECK(CachedObject::Key("a-b", "x") < CachedObject::Key("a", "x"));
  CHECK(CachedObject::Key("", "node-1") == "node-1");
}

}  // namespace
}  // namespace kf
