// Objects without metadata.managedFields (cache/managed_fields.h): the object's own bytes with
// the member taken out, in JSON (Go's field order and custom resources' sorted keys) and in
// protobuf (a ConfigMap GET the real kube-apiserver v1.36.3 sent, captured with curl), and the
// shared form a CachedObject keeps of it.
#include "cache/managed_fields.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "cache/cached_object.h"
#include "common/api/kube_proto.h"
#include "common/strings.h"

namespace kf {
namespace {

std::string Hex(std::string_view hex) { return absl::HexStringToBytes(ToAbsl(hex)); }

constexpr std::string_view kManaged =
    R"(,"managedFields":[{"manager":"kubectl-create","operation":"Update","apiVersion":"v1",)"
    R"("time":"2026-11-22T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},)"
    R"("f:x":{}}}}])";

std::string ConfigMap(std::string_view managed) {
  return absl::StrCat(
      R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"pb",)"
      R"("uid":"u-a","resourceVersion":"213","creationTimestamp":"2026-11-22T00:00:00Z",)"
      R"("annotations":{"note":"a \"quoted\" }{ ],\\"})",
      ToAbsl(managed), R"(},"data":{"x":"1"}})");
}

TEST_CASE("managedFields leave a built-in object's JSON, and nothing else does") {
  const auto out = JsonWithoutManagedFields(ConfigMap(kManaged));
  REQUIRE(out.has_value());
  CHECK(*out == ConfigMap(""));
  // None to take out: the object itself is the answer.
  CHECK_FALSE(JsonWithoutManagedFields(ConfigMap("")).has_value());
}

TEST_CASE("managedFields leave a custom resource's metadata whatever its place among sorted keys") {
  // A member named metadata deeper in the object is not the object's metadata.
  const std::string first =
      R"({"apiVersion":"x.io/v1","data":{"metadata":{"managedFields":[1]}},"kind":"K",)"
      R"("metadata":{"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}],"name":"n",)"
      R"("resourceVersion":"5"},"spec":{"a":[1,2,{"b":"}"}]}})";
  CHECK(JsonWithoutManagedFields(first) ==
        R"({"apiVersion":"x.io/v1","data":{"metadata":{"managedFields":[1]}},"kind":"K",)"
        R"("metadata":{"name":"n","resourceVersion":"5"},"spec":{"a":[1,2,{"b":"}"}]}})");
  const std::string middle =
      R"({"apiVersion":"x.io/v1","kind":"K","metadata":{"generation":1,"labels":{"a":"b"},)"
      R"("managedFields":[],"name":"n","resourceVersion":"5"}})";
  CHECK(JsonWithoutManagedFields(middle) ==
        R"({"apiVersion":"x.io/v1","kind":"K","metadata":{"generation":1,"labels":{"a":"b"},)"
        R"("name":"n","resourceVersion":"5"}})");
  const std::string alone = R"({ "metadata" : { "managedFields" : [ ] } , "x" : true })";
  CHECK(JsonWithoutManagedFields(alone) == R"({ "metadata" : {  } , "x" : true })");
}

TEST_CASE("Text that is not an object with metadata gives nothing to take out, and no crash") {
  for (std::string_view bad :
       {"", "[]", "{", "{\"metadata\":", "{\"metadata\":[]}", "{\"metadata\":{\"managedFields\"",
        "{\"metadata\":{\"a\":\"unterminated}}", "{\"metadata\":{\"managedFields\":[1,2}",
        "{\"kind\":\"K\"}", "\"metadata\"", "{\"metadata\":{}}x"}) {
    INFO(bad);
    CHECK_FALSE(JsonWithoutManagedFields(bad).has_value());
  }
  for (std::string_view bad : {"", "\x0a", "\x0a\x05\x0a", "\xff\xff\xff", "\x12\x02\x8a\x01"}) {
    CHECK_FALSE(ProtoWithoutManagedFields(bad).has_value());
  }
}

// kube-apiserver v1.36.3's GET of a ConfigMap in protobuf (the one proto_object_test.cc checks)
// and the same bytes without ObjectMeta's field 17: the metadata's and the raw's lengths shrink.
const std::string kGet = Hex(
    "6b3873000a0f0a0276311209436f6e6669674d617012a2010a97010a016112001a02706222002a24383236363830"
    "65622d386432352d343132662d623230632d6366653766633762363231313203323133380042080889dc92d80610"
    "008a01520a0e6b75626563746c2d63726561746512065570646174651a02763122080889dc92d806100032084669"
    "656c647356313a1e0a1c7b22663a64617461223a7b222e223a7b7d2c22663a78223a7b7d7d7d420012060a017812"
    "01311a002200");
const std::string kGetWithout = Hex(
    "6b3873000a0f0a0276311209436f6e6669674d6170124c0a420a016112001a02706222002a243832363638306562"
    "2d386432352d343132662d623230632d6366653766633762363231313203323133380042080889dc92d806100012"
    "060a01781201311a002200");

const ResourceType kConfigMaps{"", "v1", "configmaps", "ConfigMap", true, false};

TEST_CASE("A protobuf object's form without managedFields answers with the apiserver's framing") {
  UnknownView u;
  REQUIRE(ParseUnknown(kGet, &u));
  auto obj = CachedObject::FromProtobuf(kConfigMaps, std::string(u.raw));
  REQUIRE(obj.ok());
  const ObjectPtr& form = CachedObject::WithoutManagedFields(*obj);
  REQUIRE(form != *obj);
  CHECK(form == CachedObject::WithoutManagedFields(*obj));  // Built once, shared.
  CHECK(form->key() == "pb/a");
  CHECK(form->resource_version() == 213);
  CHECK(std::string(form->proto_get_head()) + std::string(form->bytes()) +
            std::string(kUnknownTail) ==
        kGetWithout);
  // Its own forms are of it: metadata only, without managedFields.
  CHECK(form->PartialMetadata()->bytes().find("kubectl-create") == std::string_view::npos);
  CHECK((*obj)->PartialMetadata()->bytes().find("kubectl-create") != std::string_view::npos);
  // The form has none left: asked again of it, itself.
  CHECK(CachedObject::WithoutManagedFields(form) == form);
}

TEST_CASE("A JSON object's form without managedFields is shared, and so are its own forms") {
  auto obj = CachedObject::FromJson(kConfigMaps, ConfigMap(kManaged));
  REQUIRE(obj.ok());
  const ObjectPtr& form = CachedObject::WithoutManagedFields(*obj);
  REQUIRE(form != *obj);
  CHECK(form->json() == ConfigMap(""));
  CHECK(form->key() == (*obj)->key());
  CHECK(form->labels().size() == (*obj)->labels().size());
  auto [prefix, rest] = form->list_item();
  CHECK(std::string(prefix) + std::string(rest) ==
        "{" + ConfigMap("").substr(
                  std::string_view(R"({"kind":"ConfigMap","apiVersion":"v1",)").size()));
  // A deletion's RV is spliced where the form's resourceVersion is.
  CHECK(form->WithResourceVersion(300)->json() ==
        absl::StrReplaceAll(ConfigMap(""), {{"\"213\"", "\"300\""}}));
  CHECK(form->PartialMetadata() == form->PartialMetadata());
  CHECK(form->PartialMetadata()->json().find("managedFields") == std::string_view::npos);
  CHECK(form->Cbor("binaryData")->bytes().find("managedFields") == std::string_view::npos);
  CHECK((*obj)->Cbor("binaryData")->bytes().find("managedFields") != std::string_view::npos);
  // An object with none is its own form.
  auto plain = CachedObject::FromJson(kConfigMaps, ConfigMap(""));
  REQUIRE(plain.ok());
  CHECK(CachedObject::WithoutManagedFields(*plain) == *plain);
}

}  // namespace
}  // namespace kf
