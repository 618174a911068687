#include "passthrough/relay.h"

#include <catch2/catch.hpp>

#include "tests/edge/test_support.h"

namespace kf::test {
namespace {

// A relay in front of a fake upstream that answers `answer`.
struct RelayToFake {
  explicit RelayToFake(std::string answer) { up.answer = std::move(answer); }
  // Relays `x` and waits for the upstream to have finished too.
  void Serve(Exchange& x) {
    const auto upstream = Spawn(ioc, FakeUpstream::ServeOne(&up));
    CHECK(Run(ioc, relay.Serve(x)));
    REQUIRE(RunUntil(ioc, [&] { return upstream.finished(); }));
    upstream.Rethrow();
  }
  std::string Url() const { return "http://127.0.0.1:" + std::to_string(up.port()); }

  asio::io_context ioc;
  FakeUpstream up{ioc};
  Relay relay{up.pool, up.pool};
};

TEST_CASE("Relay forwards the request and relays status, end-to-end fields and body") {
  RelayToFake f(
      "HTTP/1.1 201 Created\r\n"
      "Content-Type: application/json\r\n"
      "Audit-Id: a1\r\n"
      "Connection: X-Hop\r\n"
      "X-Hop: dropped\r\n"
      "Keep-Alive: timeout=5\r\n"
      "Content-Length: 11\r\n\r\n"
      "{\"ok\":true}");
  FilterCall call(http::verb::post, "/api/v1/namespaces/ns/configmaps?fieldManager=kubectl");
  call.r.fields.set(http::field::authorization, "Bearer client-token");
  call.r.fields.set(http::field::connection, "X-Client-Hop");
  call.r.fields.set("X-Client-Hop", "dropped");
  call.r.fields.set(http::field::content_type, "application/json");
  call.r.fields.set(http::field::content_length, "15");
  call.r.body.Set("{\"kind\":\"Pod\"}\n");
  f.Serve(call.x);
  const auto& up = f.up;
  const auto& resp = call.resp;

  CHECK(up.request.method() == http::verb::post);
  CHECK(up.request.target() == "/api/v1/namespaces/ns/configmaps?fieldManager=kubectl");
  CHECK(up.request[http::field::authorization] == "Bearer client-token");
  CHECK(up.request[http::field::host] == "127.0.0.1:" + std::to_string(up.port()));
  CHECK(up.request["X-Forwarded-For"] == "10.0.0.7");
  CHECK(up.request.count("X-Client-Hop") == 0);
  CHECK(up.request.body() == "{\"kind\":\"Pod\"}\n");

  REQUIRE(resp.head.has_value());
  CHECK(resp.head->status == 201);
  CHECK(resp.head->reason == "Created");
  CHECK(resp.head->fields[http::field::content_type] == "application/json");
  CHECK(resp.head->fields["Audit-Id"] == "a1");
  CHECK(resp.head->fields.count(http::field::connection) == 0);
  CHECK(resp.head->fields.count("X-Hop") == 0);
  CHECK(resp.head->fields.count(http::field::keep_alive) == 0);
  CHECK(resp.head->framing == ResponseHead::Framing::kLength);
  CHECK(resp.head->length == 11);
  CHECK(resp.body == "{\"ok\":true}");
  CHECK(resp.ended);
  CHECK_FALSE(resp.close_after);
  CHECK(call.x.upstream == f.Url());
  CHECK(call.x.error.empty());
}

TEST_CASE("Relay sends a body a filter read whole instead of reading the request's") {
  RelayToFake f("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}");
  FilterCall call(http::verb::post, "/api/v1/namespaces/ns/events");
  call.r.fields.set(http::field::content_length, "9");
  call.r.request.whole_body = "{\"e\":\"1\"}";
  f.Serve(call.x);
  CHECK(f.up.request.body() == "{\"e\":\"1\"}");
  CHECK(call.resp.status() == 201);
}

TEST_CASE("Relay answers 503 with a Status and closes when the upstream cannot be reached") {
  RelayToFake f("");
  f.up.acceptor.close();  // Nobody listens on its port any more.
  FilterCall call(http::verb::get, "/api/v1/namespaces/ns/configmaps");
  CHECK(Run(f.ioc, f.relay.Serve(call.x)));
  const auto& resp = call.resp;
  const Exchange& x = call.x;
  REQUIRE(resp.head.has_value());
  CHECK(resp.head->status == 503);
  CHECK(resp.head->fields[http::field::retry_after] == "1");
  CHECK(resp.body.find("\"reason\":\"ServiceUnavailable\"") != std::string::npos);
  CHECK(resp.body.find("could not reach the upstream apiserver") != std::string::npos);
  CHECK(resp.close_after);
  CHECK(resp.ended);
  CHECK(x.upstream.empty());  // How the pipeline counts an unavailable upstream.
  CHECK_FALSE(x.error.empty());
}

TEST_CASE("Relay re-chunks a chunked upstream body for the client") {
  RelayToFake f(
      "HTTP/1.1 200 OK\r\n"
      "Content-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n"
      "7\r\n, world\r\n"
      "0\r\n\r\n");
  WireCall w(f.ioc, http::verb::get, "/api/v1/namespaces/ns/configmaps");
  f.Serve(w.x);
  auto got = ParseResponse(w.pair.ReadAvailable());
  INFO(got.raw);
  REQUIRE(got.done);
  CHECK(got.message.result_int() == 200);
  CHECK(got.message.chunked());
  CHECK(got.FieldCount("Transfer-Encoding") == 1);
  CHECK(got.FieldCount("Content-Length") == 0);
  CHECK(got.message.body() == "hello, world");
  CHECK(got.raw.ends_with("\r\n0\r\n\r\n"));
  CHECK(got.consumed == got.raw.size());
  CHECK(w.resp.reusable());
}

TEST_CASE("Relay streams a close-delimited upstream body to the client chunked") {
  RelayToFake f("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end");
  WireCall w(f.ioc, http::verb::get, "/api/v1/namespaces/ns/pods/p/log");
  f.Serve(w.x);
  auto got = ParseResponse(w.pair.ReadAvailable());
  INFO(got.raw);
  REQUIRE(got.done);
  CHECK(got.message.chunked());
  CHECK(got.message.body() == "until the end");
  CHECK(w.x.error.empty());
  CHECK(w.resp.reusable());
}

TEST_CASE("Relay answers HEAD with the upstream's length and no body") {
  RelayToFake f(
      "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1234\r\n\r\n");
  WireCall w(f.ioc, http::verb::head, "/api/v1/namespaces/ns/configmaps");
  f.Serve(w.x);
  CHECK(f.up.request.method() == http::verb::head);
  auto got = ParseResponse(w.pair.ReadAvailable(), /*head_request=*/true);
  INFO(got.raw);
  REQUIRE(got.done);
  CHECK(got.FieldCount("Content-Length") == 1);
  CHECK(got.message[http::field::content_length] == "1234");
  CHECK(got.consumed == got.raw.size());
  CHECK(w.resp.reusable());
}

}  // namespace
}  // namespace kf::test
