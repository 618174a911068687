#include "cache/continue_token.h"

#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"

namespace kf {
namespace {

std::string Json(const std::string& token) {
  std::string out;
  REQUIRE(absl::WebSafeBase64Unescape(token, &out));
  return out;
}

TEST_CASE("EncodeContinue writes the apiserver cacher's token") {
  // Observed from kube-apiserver v1.36.3: a cluster-wide configmaps list with limit=2.
  const std::string token = EncodeContinue(std::string("a1/cm2\0", 7), 209);
  CHECK(token == "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjA5LCJzdGFydCI6Ii9hMS9jbTJcdTAwMDAifQ");
  CHECK(Json(token) == R"({"v":"meta.k8s.io/v1","rv":209,"start":"/a1/cm2\u0000"})");
  // Within a namespace, the start is the name only.
  CHECK(EncodeContinue(std::string("cm2\0", 4), 209) ==
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjA5LCJzdGFydCI6Ii9jbTJcdTAwMDAifQ");
}

TEST_CASE("DecodeContinue reads tokens from the cache and from etcd") {
  auto t = DecodeContinue(EncodeContinue(std::string("ns/x\0", 5), 42));
  REQUIRE(t.ok());
  CHECK(t->resource_version == 42);
  CHECK(t->start == std::string("ns/x\0", 5));
  std::string etcd_style;  // etcd's pages carry no leading slash.
  absl::WebSafeBase64Escape(R"({"v":"meta.k8s.io/v1","rv":7,"start":"ns/y\u0000"})", &etcd_style);
  t = DecodeContinue(etcd_style);
  REQUIRE(t.ok());
  CHECK(t->start == std::string("ns/y\0", 5));
  std::string inconsistent;
  absl::WebSafeBase64Escape(R"({"v":"meta.k8s.io/v1","rv":-1,"start":"/a\u0000"})", &inconsistent);
  t = DecodeContinue(inconsistent);
  REQUIRE(t.ok());
  CHECK(t->resource_version == -1);
}

TEST_CASE("DecodeContinue reads invalid UTF-8 in start as U+FFFD, as encoding/json") {
  // A continue_token_fuzz input: raw bytes would not survive EncodeContinue (docs/fuzzing.md).
  std::string token;
  absl::WebSafeBase64Escape("{\"v\":\"meta.k8s.io/v1\",\"rv\":209,\"start\":\"/a\xe8(\"}", &token);
  auto t = DecodeContinue(token);
  REQUIRE(t.ok());
  CHECK(t->start == "a\xef\xbf\xbd(");
  auto again = DecodeContinue(EncodeContinue(t->start, t->resource_version));
  REQUIRE(again.ok());
  CHECK(again->start == t->start);
}

TEST_CASE("DecodeContinue rejects what the apiserver rejects") {
  auto enc = [](const std::string& json) {
    std::string out;
    absl::WebSafeBase64Escape(json, &out);
    return out;
  };
  CHECK_FALSE(DecodeContinue("not base64!").ok());
  CHECK_FALSE(DecodeContinue(enc("[]")).ok());
  CHECK(DecodeContinue(enc(R"({"v":"v2","rv":1,"start":"/a"})")).status().message() ==
        "continue key is not valid: server does not recognize this encoded version");
  CHECK(DecodeContinue(enc(R"({"v":"meta.k8s.io/v1","rv":0,"start":"/a"})")).status().message() ==
        "continue key is not valid: incorrect encoded start resourceVersion (version "
        "meta.k8s.io/v1)");
  CHECK(DecodeContinue(enc(R"({"v":"meta.k8s.io/v1","rv":3,"start":""})")).status().message() ==
        "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)");
  // Path traversal out of the listed prefix.
  CHECK_FALSE(DecodeContinue(enc(R"({"v":"meta.k8s.io/v1","rv":3,"start":"/../x"})")).ok());
  CHECK_FALSE(DecodeContinue(enc(R"({"v":"meta.k8s.io/v1","rv":3,"start":"a//b"})")).ok());
}

TEST_CASE("DecodeContinue refuses a token nesting past Go's decoder limit without recursing") {
  auto enc = [](const std::string& json) {
    std::string out;
    absl::WebSafeBase64Escape(json, &out);
    return out;
  };
  // 200,000 levels: a recursive parser's stack would not survive it.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  auto t = DecodeContinue(enc(R"({"v":"meta.k8s.io/v1","rv":3,"start":"a","x":)" + deep + "}"));
  REQUIRE_FALSE(t.ok());
  CHECK(t.status().message() == "continue key is not valid");
  // Nesting Go accepts (unknown fields are ignored) is accepted here too.
  auto ok = DecodeContinue(enc(R"({"v":"meta.k8s.io/v1","rv":3,"start":"a","x":[[[{"y":[]}]]]})"));
  REQUIRE(ok.ok());
  CHECK(ok->start == "a");
}

}  // namespace
}  // namespace kf
