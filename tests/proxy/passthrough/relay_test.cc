#include "proxy/passthrough/relay.h"

#include <catch2/catch.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proxy/passthrough/upstream_request.h"
#include "tests/proxy/edge/test_support.h"

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
  FakeUpstream front{ioc};  // Stands for the pool presenting the front-proxy certificate.
  RequestHeaderNames names;
  Relay relay{RelayPools{&up.pool, &up.pool, &front.pool, &front.pool}, names};
};

// A client certificate as the TLS listener read it.
ClientCertificate Certificate(bool verified, std::string cn, std::vector<std::string> orgs) {
  ClientCertificate c;
  c.presented = true;
  c.verified = verified;
  if (verified) c.user = Identity{std::move(cn), std::move(orgs)};
  if (!verified) c.error = "unable to get local issuer certificate";
  return c;
}

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

TEST_CASE("Relay removes request-header identity fields a client sends") {
  RelayToFake f("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  FilterCall call(http::verb::get, "/api/v1/namespaces/ns/configmaps");
  call.r.fields.set(http::field::authorization, "Bearer alice-token");
  call.r.fields.set("X-Remote-User", "system:admin");
  call.r.fields.insert("x-remote-group", "system:masters");
  call.r.fields.set("X-Remote-Uid", "0");
  call.r.fields.set("X-Remote-Extra-Scopes", "all");
  call.r.fields.set("X-Remote-Userish", "kept");
  f.Serve(call.x);
  CHECK(f.up.request.target() == "/api/v1/namespaces/ns/configmaps");
  CHECK(f.up.request[http::field::authorization] == "Bearer alice-token");
  CHECK(f.up.request.count("X-Remote-User") == 0);
  CHECK(f.up.request.count("X-Remote-Group") == 0);
  CHECK(f.up.request.count("X-Remote-Uid") == 0);
  CHECK(f.up.request.count("X-Remote-Extra-Scopes") == 0);
  CHECK(f.up.request["X-Remote-Userish"] == "kept");
  CHECK(call.resp.head->status == 200);
}

TEST_CASE("Relay sends a client-certificate user through the front proxy as request headers") {
  RelayToFake f("");
  f.front.answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
  FilterCall call(http::verb::get, "/api/v1/nodes/n1");
  const ClientCertificate cert = Certificate(true, "system:node:n1", {"system:nodes", "x"});
  call.r.request.client_cert = &cert;
  call.r.fields.set("X-Remote-User", "system:admin");  // A client's own: never believed.
  call.r.fields.set("X-Remote-Group", "system:masters");
  const auto upstream = Spawn(f.ioc, FakeUpstream::ServeOne(&f.front));
  CHECK(Run(f.ioc, f.relay.Serve(call.x)));
  REQUIRE(RunUntil(f.ioc, [&] { return upstream.finished(); }));
  upstream.Rethrow();
  const auto& req = f.front.request;
  CHECK(req.target() == "/api/v1/nodes/n1");
  CHECK(req["X-Remote-User"] == "system:node:n1");
  std::vector<std::string> groups;
  for (auto it = req.find("X-Remote-Group");
       it != req.end() && it->name_string() == "X-Remote-Group"; ++it) {
    groups.emplace_back(it->value());
  }
  CHECK(groups == std::vector<std::string>{"system:nodes", "x"});
  CHECK(req.count("X-Remote-Uid") == 0);
  CHECK(call.resp.head->status == 200);
}

TEST_CASE("Relay refuses an unverifiable client certificate with the apiserver's 401") {
  RelayToFake f("");
  FilterCall call(http::verb::get, "/api/v1/pods");
  const ClientCertificate cert = Certificate(false, "", {});
  call.r.request.client_cert = &cert;
  CHECK(Run(f.ioc, f.relay.Serve(call.x)));
  REQUIRE(call.resp.head.has_value());
  CHECK(call.resp.head->status == 401);
  CHECK(call.resp.body == R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
                          R"("message":"Unauthorized","reason":"Unauthorized","code":401})"
                          "\n");
  CHECK(call.x.answer == Answer::kRejected);
}

TEST_CASE("Relay lets a bearer token authenticate beside an unverifiable certificate") {
  RelayToFake f("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  FilterCall call(http::verb::get, "/api/v1/pods");
  const ClientCertificate cert = Certificate(false, "", {});
  call.r.request.client_cert = &cert;
  call.r.fields.set(http::field::authorization, "Bearer alice-token");
  f.Serve(call.x);
  CHECK(f.up.request[http::field::authorization] == "Bearer alice-token");
  CHECK(f.up.request.count("X-Remote-User") == 0);
  CHECK(call.resp.head->status == 200);
}

TEST_CASE("Relay refuses a verified certificate whose subject no field can carry, token or not") {
  for (const char* token : {"", "Bearer alice-token"}) {
    RelayToFake f("");
    FilterCall call(http::verb::get, "/api/v1/namespaces/kube-system/secrets");
    ClientCertificate cert = Certificate(true, "x\r\nX-Remote-Group: system:masters", {});
    cert.subject_refused = true;
    cert.error = "subject refused: user name holds the control byte 0x0d at 1";
    call.r.request.client_cert = &cert;
    if (*token != '\0') call.r.fields.set(http::field::authorization, token);
    CHECK(Run(f.ioc, f.relay.Serve(call.x)));
    REQUIRE(call.resp.head.has_value());
    CHECK(call.resp.head->status == 401);
    CHECK(call.resp.body ==
          R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",)"
          R"("message":"Unauthorized","reason":"Unauthorized","code":401})"
          "\n");
    CHECK(call.x.answer == Answer::kRejected);
    CHECK(call.x.error ==
          "client certificate: subject refused: user name holds the control byte 0x0d at 1");
  }
}

TEST_CASE("Relay refuses a certificate user with a trailing blank instead of trimming it") {
  RelayToFake f("");
  FilterCall call(http::verb::get, "/api/v1/pods");
  // Not marked refused by the listener: Vouch checks again.
  const ClientCertificate cert = Certificate(true, "system:node:victim ", {"system:nodes"});
  call.r.request.client_cert = &cert;
  CHECK(Run(f.ioc, f.relay.Serve(call.x)));
  REQUIRE(call.resp.head.has_value());
  CHECK(call.resp.head->status == 401);
  CHECK(call.x.error.find("leading or trailing blanks") != std::string::npos);
}

TEST_CASE("Relay writes no head with a byte HTTP forbids and answers 400 for the client's") {
  RelayToFake f("");
  FilterCall call(http::verb::get, "/api/v1/pods");
  call.r.fields.set(http::field::authorization, "Bearer alice-token");
  // No HTTP parser hands such a value on; the writer must hold even so.
  call.r.fields.set("X-Injected", "a\r\nX-Remote-Group: system:masters");
  CHECK(Run(f.ioc, f.relay.Serve(call.x)));
  REQUIRE(call.resp.head.has_value());
  CHECK(call.resp.head->status == 400);
  CHECK(call.resp.body.find(R"("reason":"BadRequest","code":400)") != std::string::npos);
  CHECK(call.x.answer == Answer::kRejected);
  CHECK(call.x.error.find("X-Injected") != std::string::npos);
  // Nothing reached the upstream: its acceptor never got a connection.
  CHECK(f.up.request.target().empty());
}

TEST_CASE("Relay bounds X-Forwarded-For by dropping the oldest hops") {
  http::fields small;
  small.insert("X-Forwarded-For", "1.1.1.1, 2.2.2.2");
  small.insert("x-forwarded-for", "3.3.3.3");
  CHECK(ForwardedFor(small, "10.0.0.7") == "1.1.1.1, 2.2.2.2, 3.3.3.3, 10.0.0.7");
  CHECK(ForwardedFor(http::fields(), "10.0.0.7") == "10.0.0.7");

  // 6,000 hops of "1.2.3.4" (9 bytes each with ", "): about 54 KB, near Beast's 65,533.
  std::string hops;
  for (int i = 0; i < 6000; ++i) absl::StrAppend(&hops, i == 0 ? "" : ", ", "1.2.3.", i % 10);
  http::fields big;
  big.insert("X-Forwarded-For", hops);
  const std::string xff = ForwardedFor(big, "10.0.0.7");
  CHECK(xff.size() <= kMaxForwardedForBytes);
  CHECK(xff.size() > kMaxForwardedForBytes - 16);
  CHECK(absl::EndsWith(xff, ", 1.2.3.9, 10.0.0.7"));  // The newest hops stay, whole.
  CHECK(absl::StartsWith(xff, "1.2.3."));

  // One hop past the bound: only the peer's address is left.
  http::fields one;
  one.insert("X-Forwarded-For", std::string(20000, 'a'));
  CHECK(ForwardedFor(one, "10.0.0.7") == "10.0.0.7");

  // The relay sends one field: every hop the client sent, then its peer.
  RelayToFake f("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}");
  FilterCall call(http::verb::get, "/api/v1/pods");
  call.r.fields.set(http::field::authorization, "Bearer alice-token");
  call.r.fields.insert("X-Forwarded-For", "1.1.1.1");
  call.r.fields.insert("X-Forwarded-For", "2.2.2.2");
  f.Serve(call.x);
  CHECK(f.up.request.count("X-Forwarded-For") == 1);
  CHECK(f.up.request["X-Forwarded-For"] == "1.1.1.1, 2.2.2.2, 10.0.0.7");
  CHECK(call.resp.head->status == 200);
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
