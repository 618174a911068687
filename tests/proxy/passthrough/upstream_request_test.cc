#include "proxy/passthrough/upstream_request.h"

#include <catch2/catch.hpp>
#include <map>

namespace kf::test {
namespace {

namespace http = beast::http;

http::request<http::buffer_body> Head() {
  http::request<http::buffer_body> head;
  head.method(http::verb::get);
  head.target("/api/v1/secrets?watch=1");
  head.set(http::field::host, "10.0.0.1:6443");
  head.set("Authorization", "Bearer t");
  head.set("X-Remote-User", "alice");
  head.set(http::field::connection, "keep-alive");
  head.set("Keep-Alive", "timeout=5");
  head.set(http::field::transfer_encoding, "chunked");
  head.set("Proxy-Connection", "keep-alive");
  head.set(http::field::upgrade, "h2c");
  return head;
}

TEST_CASE("Http2RequestHead sends the pseudo-fields first and names in lower case") {
  auto head = Head();
  head.set(http::field::te, "trailers");
  auto list = Http2RequestHead(head, /*tls=*/true);
  REQUIRE(list.ok());
  REQUIRE(list->size() >= 4);
  CHECK((*list)[0] == std::pair<std::string, std::string>{":method", "GET"});
  CHECK((*list)[1] == std::pair<std::string, std::string>{":scheme", "https"});
  CHECK((*list)[2] == std::pair<std::string, std::string>{":authority", "10.0.0.1:6443"});
  CHECK((*list)[3] == std::pair<std::string, std::string>{":path", "/api/v1/secrets?watch=1"});
  std::map<std::string, std::string> fields(list->begin() + 4, list->end());
  CHECK(fields == std::map<std::string, std::string>{{"authorization", "Bearer t"},
                                                     {"x-remote-user", "alice"},
                                                     {"te", "trailers"}});
}

TEST_CASE("Http2RequestHead leaves out the fields HTTP/2 forbids") {
  auto head = Head();
  head.set(http::field::te, "gzip");
  auto list = Http2RequestHead(head, /*tls=*/false);
  REQUIRE(list.ok());
  CHECK((*list)[1].second == "http");
  for (const auto& [name, value] : *list) {
    CHECK(name != "host");
    CHECK(name != "connection");
    CHECK(name != "keep-alive");
    CHECK(name != "proxy-connection");
    CHECK(name != "transfer-encoding");
    CHECK(name != "upgrade");
    CHECK(name != "te");
  }
}

TEST_CASE("Http2RequestHead refuses a field value holding bytes HTTP forbids") {
  using namespace std::string_view_literals;
  for (std::string_view bad : {"a\r\nX-Remote-Group: system:masters"sv, "a\0b"sv, "a\nb"sv}) {
    auto head = Head();
    head.set("X-Remote-User", bad);
    auto list = Http2RequestHead(head, true);
    CHECK(list.status().code() == absl::StatusCode::kInvalidArgument);
  }
  auto no_host = Head();
  no_host.erase(http::field::host);
  CHECK_FALSE(Http2RequestHead(no_host, true).ok());
}

}  // namespace
}  // namespace kf::test
