#include "common/log.h"

#include <catch2/catch.hpp>

#include "rapidjson/document.h"

namespace kf {
namespace {

TEST_CASE("Logger writes one JSON object per line with typed fields") {
  const std::string line = Logger::Format(
      Logger::Level::kWarning, "request",
      {{"uri", "/api/v1/pods?x=\"y\""}, {"status", 200}, {"latency_ms", 1.5}, {"tls", true}});
  REQUIRE(line.back() == '\n');
  REQUIRE(line.find('\n') == line.size() - 1);
  rapidjson::Document doc;
  doc.Parse(line.c_str());
  REQUIRE_FALSE(doc.HasParseError());
  CHECK(std::string(doc["level"].GetString()) == "warning");
  CHECK(std::string(doc["msg"].GetString()) == "request");
  CHECK(std::string(doc["uri"].GetString()) == "/api/v1/pods?x=\"y\"");
  CHECK(doc["status"].GetInt() == 200);
  CHECK(doc["latency_ms"].GetDouble() == 1.5);
  CHECK(doc["tls"].GetBool());
  CHECK(doc.HasMember("ts"));
}

}  // namespace
}  // namespace kf
