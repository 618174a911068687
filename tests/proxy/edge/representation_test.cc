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

}  // namespace
}  // namespace kf
