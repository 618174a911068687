#include "tests/tools/event_stream_parser.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace kf::tools {
namespace {

const std::string kHead =
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";

std::string Chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  return size + data + "\r\n";
}

std::vector<std::string> FeedInPieces(const std::string& wire, size_t piece, EventStreamParser& p) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < wire.size(); i += piece) {
    p.Feed(std::string_view(wire).substr(i, piece),
           [&](std::string_view l) { lines.emplace_back(l); });
  }
  return lines;
}

TEST_CASE("EventStreamParser yields the same event lines however the bytes are split") {
  const std::string a = R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})";
  const std::string b = R"({"type":"MODIFIED","object":{"metadata":{"name":"b"}}})";
  // One chunk with two events, then an event split across two chunks, then the last chunk.
  const std::string wire = kHead + Chunk(a + "\n" + b + "\n") + Chunk(a.substr(0, 10)) +
                           Chunk(a.substr(10) + "\n") + "0\r\n\r\n";
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, wire.size()}) {
    EventStreamParser p;
    const auto lines = FeedInPieces(wire, piece, p);
    CAPTURE(piece);
    REQUIRE(lines == std::vector<std::string>{a, b, a});
    CHECK(p.status() == 200);
    CHECK(p.state() == EventStreamParser::State::kDone);
  }
}

// A protobuf WatchEvent message: {1: type, 2: {1: object bytes}} (one-byte lengths).
std::string ProtoEvent(const std::string& type, const std::string& object) {
  const std::string raw_ext = std::string("\x0a") + static_cast<char>(object.size()) + object;
  return std::string("\x0a") + static_cast<char>(type.size()) + type + "\x12" +
         static_cast<char>(raw_ext.size()) + raw_ext;
}

std::string Framed(const std::string& message) {
  const auto n = static_cast<uint32_t>(message.size());
  std::string out{static_cast<char>(n >> 24), static_cast<char>((n >> 16) & 0xff),
                  static_cast<char>((n >> 8) & 0xff), static_cast<char>(n & 0xff)};
  return out + message;
}

TEST_CASE("EventStreamParser yields protobuf frames however the bytes are split") {
  // An annotation map entry {1: key, 2: value}, and the managedFields' "f:key" that must not
  // match.
  const std::string key = "kube-fanout.bench/written-at";
  const std::string entry =
      std::string("\x0a") + static_cast<char>(key.size()) + key + "\x12\x03" + "123";
  const std::string a = ProtoEvent("ADDED", "{\"f:" + key + "\":{}}" + entry);
  const std::string b = ProtoEvent("BOOKMARK", "x");
  const std::string frames = Framed(a) + Framed(b) + Framed(a);
  const std::string wire =
      kHead + Chunk(frames.substr(0, 5)) + Chunk(frames.substr(5)) + "0\r\n\r\n";
  for (size_t piece : {size_t{1}, size_t{3}, size_t{11}, wire.size()}) {
    EventStreamParser p;
    p.set_protobuf(true);
    const auto lines = FeedInPieces(wire, piece, p);
    CAPTURE(piece);
    REQUIRE(lines == std::vector<std::string>{a, b, a});
    CHECK(p.state() == EventStreamParser::State::kDone);
  }
  CHECK(EventFields::TypeLetter(a) == 'A');
  CHECK(EventFields::TypeLetter(b) == 'B');
  CHECK(EventFields::Annotation(a, "\"" + key + "\":\"") == 123);
  CHECK(EventFields::Annotation(b, "\"" + key + "\":\"") == std::nullopt);
}

TEST_CASE("EventStreamParser accepts chunk extensions and upper-case hex sizes") {
  EventStreamParser p;
  std::vector<std::string> lines;
  const std::string wire = kHead + "A;ext=1\r\n123456789\n\r\n0\r\n\r\n";
  p.Feed(wire, [&](std::string_view l) { lines.emplace_back(l); });
  CHECK(lines == std::vector<std::string>{"123456789"});
}

TEST_CASE("EventStreamParser reports a non-200 answer and a body that is not chunked") {
  EventStreamParser forbidden;
  CHECK_FALSE(forbidden.Feed("HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\n{}",
                             [](std::string_view) {}));
  CHECK(forbidden.state() == EventStreamParser::State::kError);
  CHECK(forbidden.status() == 403);
  EventStreamParser plain;
  CHECK_FALSE(
      plain.Feed("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", [](std::string_view) {}));
  CHECK(plain.error() == "response is not chunked");
}

TEST_CASE("EventStreamParser ends the watch at the last chunk and keeps a refusal's head") {
  EventStreamParser ended;
  std::vector<std::string> lines;
  CHECK_FALSE(ended.Feed(kHead + Chunk("{}\n") + "0\r\n",
                         [&](std::string_view l) { lines.emplace_back(l); }));
  CHECK(ended.state() == EventStreamParser::State::kDone);
  CHECK(lines == std::vector<std::string>{"{}"});

  EventStreamParser refused;
  CHECK_FALSE(
      refused.Feed("HTTP/1.1 410 Gone\r\nContent-Length: 0\r\n\r\n", [](std::string_view) {}));
  CHECK(refused.error() == "HTTP status 410");
  CHECK(refused.head() == "HTTP/1.1 410 Gone\r\nContent-Length: 0");
}

TEST_CASE("EventStreamParser rejects a malformed chunk size") {
  EventStreamParser p;
  CHECK_FALSE(p.Feed(kHead + "zz\r\n", [](std::string_view) {}));
  CHECK(p.state() == EventStreamParser::State::kError);
}

TEST_CASE("EventFields finds the type and a numeric annotation but not its managedFields entry") {
  const std::string line =
      R"({"type":"MODIFIED","object":{"metadata":{"annotations":{"kube-fanout.bench/written-at":)"
      R"("1700000000123456789"},"managedFields":[{"fieldsV1":{"f:metadata":{"f:annotations":)"
      R"({"f:kube-fanout.bench/written-at":{}}}}}]}}})";
  CHECK(EventFields::TypeLetter(line) == 'M');
  CHECK(EventFields::Annotation(line, "\"kube-fanout.bench/written-at\":\"") ==
        1700000000123456789);
  CHECK_FALSE(EventFields::Annotation(R"({"type":"ADDED","object":{}})",
                                      "\"kube-fanout.bench/written-at\":\"")
                  .has_value());
  CHECK(EventFields::TypeLetter("garbage") == 0);
}

}  // namespace
}  // namespace kf::tools
