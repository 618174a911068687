#include "common/api/status_response.h"

#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"
#include "common/api/json.h"
#include "common/api/kube_proto.h"
#include "common/strings.h"

namespace kf {
namespace {

TEST_CASE("StatusResponse maps every status code to the apiserver's HTTP code and reason") {
  struct Row {
    absl::StatusCode code;
    int http;
    const char* reason;
  };
  const Row rows[] = {
      {absl::StatusCode::kInvalidArgument, 400, "BadRequest"},
      {absl::StatusCode::kUnauthenticated, 401, "Unauthorized"},
      {absl::StatusCode::kPermissionDenied, 403, "Forbidden"},
      {absl::StatusCode::kNotFound, 404, "NotFound"},
      {absl::StatusCode::kUnimplemented, 405, "MethodNotAllowed"},
      {absl::StatusCode::kAlreadyExists, 409, "AlreadyExists"},
      {absl::StatusCode::kAborted, 409, "Conflict"},
      {absl::StatusCode::kOutOfRange, 410, "Expired"},
      {absl::StatusCode::kFailedPrecondition, 422, "Invalid"},
      {absl::StatusCode::kResourceExhausted, 429, "TooManyRequests"},
      {absl::StatusCode::kInternal, 500, "InternalError"},
      {absl::StatusCode::kUnknown, 500, "InternalError"},
      {absl::StatusCode::kDataLoss, 500, "InternalError"},
      {absl::StatusCode::kCancelled, 500, "InternalError"},
      {absl::StatusCode::kUnavailable, 503, "ServiceUnavailable"},
      {absl::StatusCode::kDeadlineExceeded, 504, "Timeout"},
  };
  for (const Row& r : rows) {
    INFO(absl::StatusCodeToString(r.code));
    const StatusMapping m = MapStatusCode(r.code);
    CHECK(m.http_code == r.http);
    CHECK(m.reason == r.reason);
  }
}

TEST_CASE("StatusResponse encodes a Status body byte for byte as the apiserver's encoder") {
  // As kube-apiserver 1.36 writes it for GET /api/v1/namespaces/default/pods/x.
  KubeStatus s{404, "NotFound", "pods \"x\" not found", std::nullopt};
  CHECK(EncodeStatusBody(s) ==
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
        "\"message\":\"pods \\\"x\\\" not found\",\"reason\":\"NotFound\",\"code\":404}\n");
}

TEST_CASE("StatusResponse escapes HTML characters as Go's JSON encoder does") {
  KubeStatus s{400, "BadRequest", "a<b>&c\xe2\x80\xa8", std::nullopt};
  CHECK(EncodeStatusBody(s).find("\"a\\u003cb\\u003e\\u0026c\\u2028\"") != std::string::npos);
}

TEST_CASE("StatusResponse carries retryAfterSeconds from a status payload") {
  absl::Status st = absl::ResourceExhaustedError("too many requests, please try again later");
  st.SetPayload(ToAbsl(kRetryAfterPayload), absl::Cord("3"));
  const KubeStatus ks = ToKubeStatus(st);
  CHECK(ks.code == 429);
  REQUIRE(ks.retry_after_seconds == 3);
  CHECK(EncodeStatusBody(ks).find(",\"details\":{\"retryAfterSeconds\":3},\"code\":429}") !=
        std::string::npos);
}

TEST_CASE("StatusResponse builds the apiserver's NotFound with details, the name escaped") {
  CHECK(EncodeStatusBody(NotFoundStatus("apps", "deployments", "web")) ==
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
        R"("message":"deployments.apps \"web\" not found","reason":"NotFound",)"
        R"("details":{"name":"web","group":"apps","kind":"deployments"},"code":404})"
        "\n");
  // A name that tries to close its string and add fields stays inside it.
  const std::string hostile = R"(x","code":200,"kind":"Pod)";
  const std::string body = EncodeStatusBody(NotFoundStatus("", "configmaps", hostile));
  rapidjson::Document doc;
  REQUIRE(ParseJson(body, doc).ok());
  CHECK(doc["code"].GetInt() == 404);
  CHECK(std::string(doc["kind"].GetString()) == "Status");
  CHECK(std::string(doc["details"]["name"].GetString()) == hostile);
  CHECK(std::string(doc["message"].GetString()) ==
        R"(configmaps "x\",\"code\":200,\"kind\":\"Pod" not found)");
  CHECK(doc.MemberCount() == 8);  // kind apiVersion metadata status message reason details code
  // Control characters and invalid UTF-8 as Go writes them.
  CHECK(EncodeStatusJson(NotFoundStatus("", "pods", std::string("a\x01\xff", 3)))
            .find(R"("details":{"name":"a\u0001\ufffd")") != std::string::npos);
}

// The apiserver's (v1.36.3) protobuf answer to GET /api/v1/namespaces/pb/configmaps/nope,
// captured from the test rig.
const std::string kNotFound = absl::HexStringToBytes(
    "6b3873000a0c0a027631120653746174757312550a060a0012001a0012074661696c7572651a1b636f6e6669676d61"
    "70"
    "7320226e6f706522206e6f7420666f756e6422084e6f74466f756e642a180a046e6f706512001a0a636f6e6669676d"
    "61"
    "7073280032003094031a002200");

TEST_CASE("The NotFound Status in protobuf is the apiserver's") {
  CHECK(EncodeStatusProto(NotFoundStatus("", "configmaps", "nope")) == kNotFound);
  UnknownView u;
  REQUIRE(ParseUnknown(kNotFound, &u));
  CHECK(ProtoStatusCode(u.raw) == 404);
}

}  // namespace
}  // namespace kf
