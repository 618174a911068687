#include "common/api/json.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

TEST_CASE("GoJsonString escapes as encoding/json") {
  CHECK(GoJsonString("a\"b\\c") == R"("a\"b\\c")");
  CHECK(GoJsonString(std::string("\0\x1f\n", 3)) == R"("\u0000\u001f\n")");
  CHECK(GoJsonString("<&>") == R"("\u003c\u0026\u003e")");
  CHECK(GoJsonString("\xE2\x80\xA8") == R"("\u2028")");
  CHECK(GoJsonString("caf\xC3\xA9") == "\"caf\xC3\xA9\"");
  CHECK(GoJsonString("\xFF") == R"("\ufffd")");
}

TEST_CASE("JsonValueEnd finds where an object closes, brackets in strings skipped") {
  const std::string_view json = R"({"kind":"X","metadata":{"a":"}\"]","b":[{}]},"spec":{}})";
  const size_t begin = json.find("{\"a\"");
  CHECK(json.substr(begin, JsonValueEnd(json, begin) - begin) == R"({"a":"}\"]","b":[{}]})");
  CHECK(JsonValueEnd(R"({"a":[)", 0) == std::string_view::npos);
}

TEST_CASE("JsonDepth counts nesting outside strings and stops past the limit") {
  CHECK(JsonDepth("{}", 10) == 1);
  CHECK(JsonDepth(R"({"a":[1,{"b":"[[[["}]})", 10) == 3);
  CHECK(JsonDepth(R"({"a":"\"[[[["})", 10) == 1);
  CHECK(JsonDepth(std::string(1000, '['), 10) == 11);
}

TEST_CASE("ParseJson refuses documents too deep or too large, without recursing") {
  rapidjson::Document doc;
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  CHECK(ParseJson(deep, doc).message() == "exceeded max depth");
  const std::string ok_depth = std::string(10000, '[') + std::string(10000, ']');
  CHECK(ParseJson(ok_depth, doc).ok());
  CHECK_FALSE(ParseJson(R"({"a":1})", doc, JsonLimits{4, 10}).ok());
  CHECK_FALSE(ParseJson(R"({"a":1} x)", doc).ok());
  REQUIRE(ParseJson(R"({"a":[1,2]})", doc).ok());
  CHECK(doc["a"].Size() == 2);
}

TEST_CASE("ParseJson rejects a NUL byte rather than ending the document there") {
  // A watch_line_fuzz input (docs/fuzzing.md).
  rapidjson::Document doc;
  CHECK_FALSE(ParseJson(std::string_view("{}\0junk", 7), doc).ok());
  CHECK_FALSE(ParseJson(std::string_view("\"a\0b\"", 5), doc).ok());
  CHECK(ParseJson(R"("a\u0000b")", doc).ok());
}

}  // namespace
}  // namespace kf
