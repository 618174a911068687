#include "common/api/cbor.h"

#include <catch2/catch.hpp>

#include "absl/strings/escaping.h"

namespace kf {
namespace {

std::string Hex(std::string_view json, std::string_view bytes_map = {}) {
  auto cbor = JsonToCbor(json, bytes_map);
  REQUIRE(cbor.ok());
  return absl::BytesToHexString(cbor->bytes);
}

TEST_CASE("JsonToCbor writes integers in their shortest heads (RFC 8949 appendix A)") {
  const std::pair<std::string_view, std::string_view> rows[] = {
      {"0", "00"},
      {"23", "17"},
      {"24", "1818"},
      {"100", "1864"},
      {"1000", "1903e8"},
      {"1000000", "1a000f4240"},
      {"1000000000000", "1b000000e8d4a51000"},
      {"18446744073709551615", "1bffffffffffffffff"},
      {"-1", "20"},
      {"-10", "29"},
      {"-100", "3863"},
      {"-1000", "3903e7"},
      {"-9223372036854775808", "3b7fffffffffffffff"},
  };
  for (const auto& [json, hex] : rows) CHECK(Hex(json) == hex);
}

TEST_CASE("JsonToCbor writes floats in the shortest width that keeps them, as ShortestFloat16") {
  const std::pair<std::string_view, std::string_view> rows[] = {
      {"0.0", "f90000"},
      {"-0.0", "f98000"},
      {"1.0", "f93c00"},
      {"1.1", "fb3ff199999999999a"},
      {"1.5", "f93e00"},
      {"65504.0", "f97bff"},
      {"100000.0", "fa47c35000"},
      {"3.4028234663852886e+38", "fa7f7fffff"},
      {"1.0e+300", "fb7e37e43c8800759c"},
      {"5.960464477539063e-8", "f90001"},
      {"0.00006103515625", "f90400"},
      {"-4.0", "f9c400"},
      {"-4.1", "fbc010666666666666"},
  };
  for (const auto& [json, hex] : rows) CHECK(Hex(json) == hex);
}

TEST_CASE("JsonToCbor writes strings and keys as byte strings, as the apiserver's encoder") {
  CHECK(Hex(R"({"a":"b","c":[true,false,null],"d":{}})") == "a341614162416383f5f4f64164a0");
  CHECK(Hex(R"("caf\u00e9 \"q\"")") ==
        "49636166c3a9202271"
        "22");
  CHECK(Hex("[]") == "80");
  const std::string long_string(30, 'x');
  CHECK(Hex("\"" + long_string + "\"") == "581e" + absl::BytesToHexString(long_string));
}

TEST_CASE("JsonToCbor writes the []byte member's values under tag 22, and only those") {
  // A ConfigMap as the apiserver's JSON holds it: binaryData's values are base64.
  const std::string_view cm =
      R"({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","binaryData":"AAEC"},)"
      R"("binaryData":{"b":"AAEC","e":""},"data":{"k":"AAEC"}})";
  auto cbor = JsonToCbor(cm, "binaryData");
  REQUIRE(cbor.ok());
  CHECK(absl::BytesToHexString(cbor->bytes) ==
        "a5"
        "446b696e64"
        "49436f6e6669674d6170"
        "4a61706956657273696f6e"
        "427631"
        "486d65746164617461"
        "a2"
        "446e616d65"
        "4161"
        "4a62696e61727944617461"
        "44414145"
        "43"
        "4a62696e61727944617461"
        "a2"
        "4162"
        "d643000102"
        "4165"
        "d640"
        "4464617461"
        "a1"
        "416b"
        "4441414543");
  // The LIST item form: the members after kind and apiVersion.
  CHECK(cbor->members_after_type_meta == 3);
  CHECK(cbor->bytes.substr(cbor->after_type_meta, 9) == "\x48metadata");
  CHECK(!JsonToCbor(R"({"binaryData":{"b":"not base64!"}})", "binaryData").ok());
}

TEST_CASE("JsonToCbor marks no list item form for objects not led by kind and apiVersion") {
  auto status = JsonToCbor(R"({"apiVersion":"v1","kind":"X","metadata":{}})");
  REQUIRE(status.ok());
  CHECK(status->after_type_meta == 0);
  auto bare = JsonToCbor(R"({"kind":"X","apiVersion":"v1"})");
  REQUIRE(bare.ok());
  CHECK(bare->after_type_meta == bare->bytes.size());
  CHECK(bare->members_after_type_meta == 0);
}

TEST_CASE("JsonToCbor refuses what is not JSON, too large or too deep") {
  CHECK(!JsonToCbor(R"({"a":)").ok());
  CHECK(!JsonToCbor(R"({"a":1} x)").ok());
  CHECK(!JsonToCbor(std::string("\"\"\0\0x", 5)).ok());  // A NUL is not the end of the input.
  CHECK(!JsonToCbor("{}", {}, JsonLimits{.max_bytes = 1}).ok());
  CHECK(!JsonToCbor(std::string(100, '[') + std::string(100, ']'), {}, JsonLimits{.max_depth = 64})
             .ok());
  CHECK(JsonToCbor(std::string(64, '[') + std::string(64, ']'), {}, JsonLimits{.max_depth = 64})
            .ok());
}

}  // namespace
}  // namespace kf
