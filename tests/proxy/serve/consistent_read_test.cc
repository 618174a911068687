#include "proxy/serve/consistent_read.h"

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/escaping.h"
#include "common/strings.h"

namespace kf {
namespace {

// kube-apiserver v1.36.3's answers to GET /api/v1/namespaces/default/pods?resourceVersion=99999999
// after its 3 s wait, with its watch cache at RV 309 (captured with curl, JSON and protobuf).
constexpr std::string_view kApiserverJson =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
    R"("Timeout: Too large resource version: 99999999, current: 309","reason":"Timeout",)"
    R"("details":{"causes":[{"reason":"ResourceVersionTooLarge","message":)"
    R"("Too large resource version"}],"retryAfterSeconds":1},"code":504})";
constexpr std::string_view kApiserverProtoHex =
    "6b3873000a0c0a0276311206537461747573129f010a060a0012001a0012074661696c7572651a3b54696d65"
    "6f75743a20546f6f206c61726765207265736f757263652076657273696f6e3a2039393939393939392c2063"
    "757272656e743a20333039220754696d656f75742a430a0012001a0022370a175265736f7572636556657273"
    "696f6e546f6f4c61726765121a546f6f206c61726765207265736f757263652076657273696f6e1a00280132"
    "0030f8031a002200";

TEST_CASE("An RV the cache did not reach in time gets the apiserver's 504, byte for byte") {
  const Freshness late{Freshness::Verdict::kTooLarge, 99999999, 309};
  const KubeStatus status = UnfreshStatus(late);
  CHECK(status.code == 504);
  CHECK(status.retry_after_seconds == 1);
  CHECK(EncodeStatusJson(status) == kApiserverJson);
  const std::string proto = absl::HexStringToBytes(ToAbsl(kApiserverProtoHex));
  REQUIRE(proto.size() == 184);
  CHECK((EncodeStatusProto(status) == proto));
}

TEST_CASE("A consistent read the cache could not prove current gets the apiserver's 429") {
  const Freshness unproven{Freshness::Verdict::kUnproven, 0, 12};
  const KubeStatus status = UnfreshStatus(unproven);
  CHECK(status.code == 429);
  CHECK(status.retry_after_seconds == 1);
  CHECK(EncodeStatusJson(status) ==
        R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":)"
        R"("Too many requests, please try again later.","reason":"TooManyRequests",)"
        R"("details":{"retryAfterSeconds":1},"code":429})");
}

}  // namespace
}  // namespace kf
