#include "tests/tools/response_reader.h"

#include <catch2/catch.hpp>
#include <string>

namespace kf::tools {
namespace {

struct Read {
  ResponseReader reader;
  std::string body;
  size_t fed = 0;  // Bytes of the input up to the end of the response.
};

// Feeds `wire` in pieces of `step` bytes until the reader stops.
Read FeedInSteps(std::string_view wire, size_t step) {
  Read r;
  auto on_body = [&r](std::string_view b) { r.body.append(b); };
  while (r.fed < wire.size()) {
    const std::string_view piece = wire.substr(r.fed, step);
    r.fed += piece.size();
    if (!r.reader.Feed(piece, on_body)) break;
  }
  return r;
}

TEST_CASE("ResponseReader reads a Content-Length body in any split") {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: 11\r\n\r\n"
      "{\"a\":\"bcd\"}";
  for (size_t step = 1; step <= wire.size(); ++step) {
    CAPTURE(step);
    const Read r = FeedInSteps(wire, step);
    CHECK(r.reader.done());
    CHECK(r.reader.status() == 200);
    CHECK(r.reader.keep_alive());
    CHECK(r.body == "{\"a\":\"bcd\"}");
  }
}

TEST_CASE("ResponseReader decodes chunks and trailers and stops at the response's end") {
  const std::string wire =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\nA;ext=1\r\n, world!!!\r\n0\r\nX-Trailer: y\r\n\r\n"
      "HTTP/1.1 200 OK\r\n";
  for (size_t step = 1; step <= wire.size(); ++step) {
    CAPTURE(step);
    const Read r = FeedInSteps(wire, step);
    REQUIRE(r.reader.done());
    CHECK(r.body == "hello, world!!!");
    CHECK(r.reader.keep_alive());
  }
}

TEST_CASE("ResponseReader runs an unframed body to the end of the connection") {
  ResponseReader reader;
  std::string body;
  auto on_body = [&body](std::string_view b) { body.append(b); };
  CHECK(reader.Feed("HTTP/1.1 500 Oops\r\nConnection: close\r\n\r\nbroken", on_body));
  CHECK_FALSE(reader.done());
  reader.OnEof();
  CHECK(reader.done());
  CHECK(reader.status() == 500);
  CHECK_FALSE(reader.keep_alive());
  CHECK(body == "broken");
}

TEST_CASE("ResponseReader fails on a truncated body and on garbage") {
  ResponseReader truncated;
  truncated.Feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345", [](std::string_view) {});
  truncated.OnEof();
  CHECK(truncated.failed());

  ResponseReader garbage;
  CHECK_FALSE(garbage.Feed("SSH-2.0-OpenSSH\r\n\r\n", [](std::string_view) {}));
  CHECK(garbage.failed());

  ResponseReader bad_chunk;
  CHECK_FALSE(bad_chunk.Feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                             [](std::string_view) {}));
  CHECK(bad_chunk.failed());
}

TEST_CASE("ResponseReader takes 204 and HTTP/1.0 as they are") {
  const Read no_content = FeedInSteps("HTTP/1.1 204 No Content\r\n\r\n", 3);
  CHECK(no_content.reader.done());
  CHECK(no_content.reader.keep_alive());
  const Read old = FeedInSteps("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 100);
  CHECK(old.reader.done());
  CHECK_FALSE(old.reader.keep_alive());
}

}  // namespace
}  // namespace kf::tools
