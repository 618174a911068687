#include "proxy/edge/representation.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

namespace http = boost::beast::http;

struct MediaRow {
  std::string_view accept;
  bool has_protobuf;
  MediaChoice want;
  std::string_view target = "/api/v1/pods";
  std::string_view user_agent = "";
};

TEST_CASE("NegotiateMedia picks what the apiserver's negotiation picks") {
  const MediaRow rows[] = {
      // No Accept, wildcards and JSON: JSON.
      {"", true, MediaChoice::kJson},
      {"*/*", true, MediaChoice::kJson},
      {"application/*", true, MediaChoice::kJson},
      {"application/json", true, MediaChoice::kJson},
      {"application/json, */*", true, MediaChoice::kJson},
      {"application/json;stream=watch", true, MediaChoice::kJson},
      // client-go's protobuf content config: protobuf where the resource has it.
      {"application/vnd.kubernetes.protobuf,application/json", true, MediaChoice::kProtobuf},
      {"application/vnd.kubernetes.protobuf, application/json", false, MediaChoice::kJson},
      {"application/vnd.kubernetes.protobuf;stream=watch", true, MediaChoice::kProtobuf},
      {"application/vnd.kubernetes.protobuf", true, MediaChoice::kProtobuf},
      // A custom resource asked for protobuf only: the apiserver's 406.
      {"application/vnd.kubernetes.protobuf", false, MediaChoice::kApiserver},
      // Order by q, then concrete before wildcard; ties keep the header's order.
      {"application/json;q=0.5,application/vnd.kubernetes.protobuf", true, MediaChoice::kProtobuf},
      {"application/vnd.kubernetes.protobuf;q=0.5,application/json", true, MediaChoice::kJson},
      {"*/*,application/vnd.kubernetes.protobuf", true, MediaChoice::kProtobuf},
      {"application/json,application/vnd.kubernetes.protobuf", true, MediaChoice::kJson},
      {"application/vnd.kubernetes.protobuf;q=0,application/json", true, MediaChoice::kJson},
      // Serializers the cache does not hold, and nothing acceptable.
      {"application/yaml", true, MediaChoice::kApiserver},
      {"application/yaml,application/json", true, MediaChoice::kApiserver},
      {"text/html", true, MediaChoice::kApiserver},
      {"text/html,application/json", true, MediaChoice::kJson},
      // Pretty JSON is the apiserver's; protobuf is never pretty.
      {"", true, MediaChoice::kApiserver, "/api/v1/pods?pretty=true"},
      {"", true, MediaChoice::kApiserver, "/api/v1/pods", "curl/8.5.0"},
      {"application/vnd.kubernetes.protobuf", true, MediaChoice::kProtobuf, "/api/v1/pods",
       "curl/8.5.0"},
  };
  for (const MediaRow& row : rows) {
    INFO(row.accept << " has_protobuf=" << row.has_protobuf << " " << row.target << " "
                    << row.user_agent);
    http::fields fields;
    if (!row.accept.empty()) fields.set(http::field::accept, row.accept);
    if (!row.user_agent.empty()) fields.set(http::field::user_agent, row.user_agent);
    auto info = RequestInfo::Parse("GET", row.target);
    REQUIRE(info.ok());
    CHECK(NegotiateMedia(*info, fields, row.has_protobuf) == row.want);
  }
}

struct ConversionRow {
  std::string_view accept;
  bool has_protobuf;
  MediaChoice media;
  Conversion conversion;
};

TEST_CASE("NegotiateRepresentation reads as=, g= and v= as the apiserver's negotiation does") {
  constexpr std::string_view kMetadataInformerWatch =
      "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
      "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
  const ConversionRow rows[] = {
      // client-go's metadata client: protobuf where the resource has it, else JSON.
      {kMetadataInformerWatch, true, MediaChoice::kProtobuf, Conversion::kPartialMetadata},
      {kMetadataInformerWatch, false, MediaChoice::kJson, Conversion::kPartialMetadata},
      {"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", true,
       MediaChoice::kJson, Conversion::kPartialMetadataList},
      {"application/json; as=PartialObjectMetadataList; v=v1; g=meta.k8s.io", true,
       MediaChoice::kJson, Conversion::kPartialMetadataList},
      // A conversion the endpoint does not allow skips its clause: no group or version, another
      // group or kind, Table in protobuf.
      {"application/json;as=PartialObjectMetadata,application/vnd.kubernetes.protobuf", true,
       MediaChoice::kProtobuf, Conversion::kNone},
      {"application/json;as=PartialObjectMetadata;g=apps;v=v1", true, MediaChoice::kApiserver,
       Conversion::kNone},
      {"application/json;as=Pod;g=meta.k8s.io;v=v1,application/json", true, MediaChoice::kJson,
       Conversion::kNone},
      {"application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json", true,
       MediaChoice::kJson, Conversion::kNone},
      // What the apiserver renders: Table, meta.k8s.io/v1beta1, a server version.
      {"application/json;as=Table;g=meta.k8s.io;v=v1,application/json", true, MediaChoice::kJson,
       Conversion::kApiserver},
      {"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1", true,
       MediaChoice::kJson, Conversion::kApiserver},
      {"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;sv=v1", true,
       MediaChoice::kJson, Conversion::kApiserver},
      // Pretty: the apiserver's JSON.
      {"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1;pretty=1", true,
       MediaChoice::kApiserver, Conversion::kPartialMetadata},
  };
  for (const ConversionRow& row : rows) {
    INFO(row.accept << " has_protobuf=" << row.has_protobuf);
    http::fields fields;
    fields.set(http::field::accept, row.accept);
    auto info = RequestInfo::Parse("GET", "/api/v1/pods");
    REQUIRE(info.ok());
    const Representation r = NegotiateRepresentation(*info, fields, row.has_protobuf);
    CHECK(r.media == row.media);
    CHECK(r.conversion == row.conversion);
  }
}

TEST_CASE("A drop= clause is the apiserver's until what it does with drop= is known") {
  // goautoneg reads drop= as any parameter; only the upstream knows whether it reads it (1.38's
  // alpha ManagedFieldsOptOut on) or not (1.36, 1.37, the gate off), so until its answers to
  // the reflector's probe say, the chosen clause's answer is its own, and the upstream is asked.
  const std::pair<std::string_view, MediaChoice> rows[] = {
      {"application/json;drop=metadata.managedFields", MediaChoice::kApiserver},
      {"application/json; drop=spec.someFutureField+metadata.managedFields",
       MediaChoice::kApiserver},
      {"application/vnd.kubernetes.protobuf;drop=metadata.managedFields, application/json",
       MediaChoice::kApiserver},
      // Only the clause the negotiation picks counts.
      {"application/json, application/yaml;drop=metadata.managedFields", MediaChoice::kJson},
      {"application/yaml;q=0.5;drop=metadata.managedFields, application/vnd.kubernetes.protobuf",
       MediaChoice::kProtobuf},
  };
  auto info = RequestInfo::Parse("GET", "/api/v1/pods");
  REQUIRE(info.ok());
  for (const auto& [accept, want] : rows) {
    INFO(accept);
    http::fields fields;
    fields.set(http::field::accept, accept);
    const Representation r = NegotiateRepresentation(*info, fields, /*has_protobuf=*/true);
    CHECK(r.media == want);
    CHECK(r.asks_drop == (want == MediaChoice::kApiserver));
    CHECK_FALSE(r.drop_managed_fields);
  }
}

TEST_CASE("A drop= clause read as the upstream reads it: managedFields left out, or ignored") {
  // As kube-apiserver v1.38.0-beta.0 with ManagedFieldsOptOut on answered a GET of a ConfigMap:
  // drop=metadata.managedFields 200 without them (JSON and protobuf, metadata forms too);
  // drop= empty 200 whole; any other target 406 (the clause not acceptable); the last of a
  // repeated drop= counts; names are case-sensitive and not quoted.
  struct Row {
    std::string_view accept;
    MediaChoice media;
    bool drop;
  };
  const Row read[] = {
      {"application/json;drop=metadata.managedFields", MediaChoice::kJson, true},
      {"application/vnd.kubernetes.protobuf;drop=metadata.managedFields", MediaChoice::kProtobuf,
       true},
      {"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1;"
       "drop=metadata.managedFields",
       MediaChoice::kJson, true},
      {"application/json;drop=", MediaChoice::kJson, false},
      {"application/json;drop=foo", MediaChoice::kApiserver, false},
      {"application/json;drop=metadata.managedFields;drop=foo", MediaChoice::kApiserver, false},
      {"application/json;drop=foo;drop=metadata.managedFields", MediaChoice::kJson, true},
      {"application/json;drop=Metadata.ManagedFields", MediaChoice::kApiserver, false},
      {"application/json;drop=\"metadata.managedFields\"", MediaChoice::kApiserver, false},
      {"application/yaml;drop=metadata.managedFields", MediaChoice::kApiserver, true},
  };
  auto info = RequestInfo::Parse("GET", "/api/v1/pods");
  REQUIRE(info.ok());
  for (const Row& row : read) {
    INFO(row.accept);
    http::fields fields;
    fields.set(http::field::accept, row.accept);
    const Representation r = NegotiateRepresentation(*info, fields, true, true, false, Drop::kRead);
    CHECK(r.media == row.media);
    CHECK(r.drop_managed_fields == row.drop);
    CHECK_FALSE(r.asks_drop);
    // An upstream that ignores drop= answers as without it: the cache's usual answer.
    const Representation ignored =
        NegotiateRepresentation(*info, fields, true, true, false, Drop::kIgnored);
    http::fields plain;
    plain.set(http::field::accept, std::string(row.accept.substr(0, row.accept.find(";drop"))));
    const Representation without = NegotiateRepresentation(*info, plain, true);
    CHECK(ignored.media == without.media);
    CHECK(ignored.conversion == without.conversion);
    CHECK_FALSE(ignored.drop_managed_fields);
    CHECK_FALSE(ignored.asks_drop);
  }
}

TEST_CASE("CBOR is the cache's only where the upstream serves it") {
  auto info = RequestInfo::Parse("GET", "/api/v1/pods");
  REQUIRE(info.ok());
  const std::pair<std::string_view, MediaChoice> served[] = {
      {"application/cbor", MediaChoice::kCbor},
      {"application/cbor;stream=watch", MediaChoice::kCbor},
      {"application/cbor, application/json", MediaChoice::kCbor},
      {"application/json;q=0.5, application/cbor", MediaChoice::kCbor},
      {"application/json, application/cbor", MediaChoice::kJson},
      // No such serializer: the apiserver's 406 (it streams watches as cbor-seq itself).
      {"application/cbor-seq", MediaChoice::kApiserver},
      {"application/cbor;as=Table;g=meta.k8s.io;v=v1", MediaChoice::kApiserver},
  };
  for (const auto& [accept, want] : served) {
    INFO(accept);
    http::fields fields;
    fields.set(http::field::accept, accept);
    const Representation r = NegotiateRepresentation(*info, fields, true, true, /*has_cbor=*/true);
    CHECK((r.conversion == Conversion::kNone ? r.media : MediaChoice::kApiserver) == want);
    // Without it, every CBOR clause the cache would serve is the apiserver's.
    const Representation off = NegotiateRepresentation(*info, fields, true, true, false);
    if (want == MediaChoice::kCbor) CHECK(off.media == MediaChoice::kApiserver);
  }
}

TEST_CASE("An error's Status is negotiated without conversions, as the apiserver negotiates it") {
  http::fields fields;
  fields.set(http::field::accept,
             "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
             "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json");
  auto info = RequestInfo::Parse("GET", "/api/v1/namespaces/ns/pods/p");
  REQUIRE(info.ok());
  const Representation r =
      NegotiateRepresentation(*info, fields, /*has_protobuf=*/true, /*allow_conversion=*/false);
  CHECK(r.media == MediaChoice::kJson);
  CHECK(r.conversion == Conversion::kNone);
}

}  // namespace
}  // namespace kf
