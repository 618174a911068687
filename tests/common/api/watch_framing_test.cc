#include "common/api/watch_framing.h"

#include <catch2/catch.hpp>
#include <string>

namespace kf {
namespace {

TEST_CASE("WatchFraming picks the framing from the Content-Type") {
  CHECK(WatchFraming::ForContentType("application/json") == WatchFraming::Format::kJsonLines);
  CHECK(WatchFraming::ForContentType("application/vnd.kubernetes.protobuf;stream=watch") ==
        WatchFraming::Format::kLengthPrefixed);
  CHECK(WatchFraming::ForContentType("text/plain") == WatchFraming::Format::kUnframed);
}

TEST_CASE("WatchFraming finds the end of a JSON event split across reads") {
  WatchFraming f(WatchFraming::Format::kJsonLines);
  CHECK(f.AtBoundary());
  f.Consume("{\"type\":\"ADDED\",\"object\":{}}\n{\"type\":\"MOD");
  CHECK_FALSE(f.AtBoundary());
  const std::string next = "IFIED\"}\n{\"type\"";
  CHECK(f.PrefixToBoundary(next) == next.find('\n') + 1);
  CHECK(f.PrefixToBoundary("no newline yet") == std::string_view::npos);
  f.Consume(std::string_view(next).substr(0, next.find('\n') + 1));
  CHECK(f.AtBoundary());
  CHECK(f.PrefixToBoundary("{...}\n") == 0);
}

TEST_CASE("WatchFraming follows length-prefixed protobuf frames byte by byte") {
  WatchFraming f(WatchFraming::Format::kLengthPrefixed);
  const std::string frame1 = std::string("\x00\x00\x00\x03", 4) + "abc";
  const std::string frame2 = std::string("\x00\x00\x01\x00", 4) + std::string(256, 'x');
  const std::string stream = frame1 + frame2;
  f.Consume(std::string_view(stream).substr(0, 2));  // Inside the first length prefix.
  CHECK_FALSE(f.AtBoundary());
  CHECK(f.PrefixToBoundary(std::string_view(stream).substr(2)) == 5);
  f.Consume(std::string_view(stream).substr(2, 5));
  CHECK(f.AtBoundary());
  f.Consume(std::string_view(stream).substr(7, 100));
  CHECK_FALSE(f.AtBoundary());
  CHECK(f.PrefixToBoundary(std::string_view(stream).substr(107)) == stream.size() - 107);
  f.Consume(std::string_view(stream).substr(107));
  CHECK(f.AtBoundary());
}

TEST_CASE("WatchFraming::Cut takes one JSON line off the front, or tells how long it is so far") {
  using F = WatchFraming::Format;
  const auto whole = WatchFraming::Cut(F::kJsonLines, "{\"type\":\"ADDED\"}\n{\"ty");
  REQUIRE(whole.complete);
  CHECK(whole.bytes == "{\"type\":\"ADDED\"}");
  CHECK(whole.consumed == 17);
  const auto part = WatchFraming::Cut(F::kJsonLines, "{\"ty", 2);
  CHECK_FALSE(part.complete);
  CHECK(part.size == 4);
  // A line end inside what was scanned already is not looked for again.
  CHECK_FALSE(WatchFraming::Cut(F::kJsonLines, "a\nb", 3).complete);
}

TEST_CASE("WatchFraming::Cut takes one length-prefixed frame off the front once it is whole") {
  using F = WatchFraming::Format;
  const std::string stream = std::string("\x00\x00\x00\x03", 4) + "abc" + "\x00";
  CHECK(WatchFraming::Cut(F::kLengthPrefixed, stream.substr(0, 3)).size == 0);
  const auto head = WatchFraming::Cut(F::kLengthPrefixed, stream.substr(0, 6));
  CHECK_FALSE(head.complete);
  CHECK(head.size == 3);
  const auto frame = WatchFraming::Cut(F::kLengthPrefixed, stream);
  REQUIRE(frame.complete);
  CHECK(frame.bytes == "abc");
  CHECK(frame.consumed == 7);
  const std::string big("\x01\x00\x00\x00", 4);
  CHECK(WatchFraming::Cut(F::kLengthPrefixed, big).size == size_t{1} << 24);
}

}  // namespace
}  // namespace kf
