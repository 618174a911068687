#include "proxy/edge/http1_response.h"

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "proxy/edge/batched_sends.h"
#include "proxy/edge/request_parser.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

asio::awaitable<beast::error_code> WriteStreamed(Response& r, ResponseHead head,
                                                 std::vector<std::string> pieces) {
  beast::error_code ec = co_await r.WriteHead(std::move(head));
  for (const std::string& p : pieces) {
    if (ec) co_return ec;
    const std::array<asio::const_buffer, 1> b{asio::buffer(p)};
    ec = co_await r.WriteBody(b);
  }
  if (ec) co_return ec;
  co_return co_await r.End();
}

ResponseHead Head(int status, ResponseHead::Framing framing, uint64_t length = 0) {
  ResponseHead head;
  head.status = status;
  head.fields.set(http::field::content_type, "application/json");
  head.framing = framing;
  head.length = length;
  return head;
}

// Writes `body` whole as the answer to `w`, and returns what its client read.
ParsedResponse AnswerWhole(asio::io_context& ioc, WireCall& w, const std::string& body) {
  CHECK_FALSE(Run(ioc, WriteWhole(w.resp, 200, "application/json", body)));
  return ParseResponse(w.pair.ReadAvailable(), w.r.request.method == http::verb::head);
}

TEST_CASE("Http1Response frames a whole answer with Content-Length up to 2048 bytes, else chunks") {
  asio::io_context ioc;
  WireCall fits(ioc, http::verb::get, "/api/v1/pods");
  const std::string small(2048, 'x');
  auto sized = AnswerWhole(ioc, fits, small);
  REQUIRE(sized.done);
  CHECK(sized.message.result_int() == 200);
  CHECK(sized.message[http::field::content_length] == "2048");
  CHECK_FALSE(sized.message.chunked());
  CHECK(sized.message.body() == small);
  CHECK(sized.consumed == sized.raw.size());
  CHECK(fits.resp.body_bytes() == 2048);
  CHECK(fits.resp.status() == 200);

  WireCall over(ioc, http::verb::get, "/api/v1/pods");
  const std::string large(2049, 'y');
  auto chunked = AnswerWhole(ioc, over, large);
  REQUIRE(chunked.done);
  CHECK(chunked.message.chunked());
  CHECK(chunked.FieldCount("Content-Length") == 0);
  CHECK(chunked.message.body() == large);
  CHECK(chunked.raw.find("\r\n801\r\n") != std::string::npos);  // One chunk of 0x801 bytes.
  CHECK(chunked.raw.ends_with("\r\n0\r\n\r\n"));                // Then the last chunk.
  CHECK(chunked.consumed == chunked.raw.size());
  CHECK(over.resp.reusable());
}

TEST_CASE("Http1Response chunks each piece of a streamed answer on HTTP/1.1") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  CHECK_FALSE(Run(ioc, WriteStreamed(w.resp, Head(200, ResponseHead::Framing::kStreamed),
                                     {"{\"a\":1}\n", "{\"b\":2}\n"})));
  auto got = ParseResponse(w.pair.ReadAvailable());
  REQUIRE(got.done);
  CHECK(got.message.chunked());
  CHECK(got.message.body() == "{\"a\":1}\n{\"b\":2}\n");
  CHECK(got.raw.find("\r\n8\r\n{\"a\":1}\n\r\n8\r\n{\"b\":2}\n\r\n0\r\n\r\n") != std::string::npos);
  CHECK(w.resp.reusable());
}

TEST_CASE("Http1Response ends a streamed answer to an HTTP/1.0 client by closing") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1", 10);
  CHECK_FALSE(Run(
      ioc, WriteStreamed(w.resp, Head(200, ResponseHead::Framing::kStreamed), {"one\n", "two\n"})));
  CHECK_FALSE(w.resp.reusable());  // The end of the body is the end of the connection.
  w.pair.server.tcp().close();
  auto got = ParseResponse(w.pair.ReadAvailable(), /*head_request=*/false, /*eof=*/true);
  REQUIRE(got.done);
  CHECK(got.raw.starts_with("HTTP/1.0 200 OK\r\n"));
  CHECK(got.FieldCount("Transfer-Encoding") == 0);
  CHECK(got.FieldCount("Content-Length") == 0);
  CHECK(got.FieldCount("Connection") == 0);  // HTTP/1.0 closes unless told otherwise.
  CHECK(got.message.body() == "one\ntwo\n");
}

TEST_CASE("Http1Response keeps an HTTP/1.0 keep-alive connection open for a sized answer") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/version", 10);
  auto got = AnswerWhole(ioc, w, "{}");
  REQUIRE(got.done);
  CHECK(got.message[http::field::connection] == "keep-alive");
  CHECK(got.message[http::field::content_length] == "2");
  CHECK(w.resp.reusable());
}

TEST_CASE("Http1Response writes the head of a HEAD answer without its body") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::head, "/api/v1/pods");
  auto got = AnswerWhole(ioc, w, std::string(5000, 'z'));
  REQUIRE(got.done);
  CHECK(got.raw.ends_with("\r\n\r\n"));
  CHECK(got.consumed == got.raw.size());  // Nothing after the head.
  CHECK(got.message[http::field::content_length] == "5000");
  CHECK(got.FieldCount("Transfer-Encoding") == 0);
  CHECK(w.resp.body_bytes() == 0);
  CHECK(w.resp.reusable());
}

TEST_CASE("Http1Response frames no body for 204 and 304") {
  for (const int status : {204, 304}) {
    asio::io_context ioc;
    WireCall w(ioc, http::verb::get, "/api/v1/pods");
    CHECK_FALSE(Run(
        ioc, WriteStreamed(w.resp, Head(status, ResponseHead::Framing::kStreamed), {"ignored"})));
    auto got = ParseResponse(w.pair.ReadAvailable());
    INFO(got.raw);
    REQUIRE(got.done);
    CHECK(got.message.result_int() == static_cast<unsigned>(status));
    CHECK(got.FieldCount("Transfer-Encoding") == 0);
    CHECK(got.FieldCount("Content-Length") == 0);
    CHECK(got.raw.ends_with("\r\n\r\n"));
    CHECK(w.resp.reusable());
  }
}

TEST_CASE("Http1Response adds a Date unless the head has one, and only once") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods");
  auto got = AnswerWhole(ioc, w, "{}");
  CHECK(got.FieldCount("Date") == 1);
  CHECK(got.message[http::field::date].ends_with(" GMT"));

  WireCall relayed(ioc, http::verb::get, "/api/v1/pods");
  ResponseHead head = Head(200, ResponseHead::Framing::kLength, 2);
  head.fields.set(http::field::date, "Mon, 02 Jan 2006 15:04:05 GMT");
  CHECK_FALSE(Run(ioc, WriteStreamed(relayed.resp, std::move(head), {"{}"})));
  auto upstream_dated = ParseResponse(relayed.pair.ReadAvailable());
  CHECK(upstream_dated.FieldCount("Date") == 1);
  CHECK(upstream_dated.message[http::field::date] == "Mon, 02 Jan 2006 15:04:05 GMT");
}

TEST_CASE("Http1Response says Connection: close when the connection cannot serve another request") {
  const std::pair<std::string_view, std::function<void(WireCall&)>> reasons[] = {
      {"the client asked to close", [](WireCall& w) { w.r.request.keep_alive = false; }},
      {"CloseAfter()", [](WireCall& w) { w.resp.CloseAfter(); }},
      {"the request body was not all read",
       [](WireCall& w) { w.r.body.Set("{\"kind\":\"Pod\"}"); }},
  };
  for (const auto& [why, setup] : reasons) {
    INFO(why);
    asio::io_context ioc;
    WireCall w(ioc, http::verb::post, "/api/v1/namespaces/ns/pods");
    setup(w);
    const std::string body = "{}";
    CHECK_FALSE(Run(ioc, WriteWhole(w.resp, 403, "application/json", body)));
    auto got = ParseResponse(w.pair.ReadAvailable());
    CHECK(got.message[http::field::connection] == "close");
    CHECK(got.FieldCount("Connection") == 1);
    CHECK_FALSE(w.resp.reusable());
  }
}

TEST_CASE("Http1Response is reusable only once the answer has ended") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods");
  CHECK_FALSE(w.resp.reusable());
  CHECK_FALSE(w.resp.head_written());
  CHECK_FALSE(Run(ioc, w.resp.WriteHead(Head(200, ResponseHead::Framing::kStreamed))));
  CHECK(w.resp.head_written());
  CHECK_FALSE(w.resp.reusable());
  CHECK_FALSE(Run(ioc, w.resp.End()));
  CHECK(w.resp.reusable());
  auto got = ParseResponse(w.pair.ReadAvailable());
  CHECK(got.done);
  CHECK(got.FieldCount("Connection") == 0);
}

asio::awaitable<void> NoteClientGone(Response& r, std::optional<bool>* gone) {
  const bool g = co_await r.ClientGone();
  *gone = g;
}

asio::awaitable<void> ClientGoneOrTimer(Response& r, std::optional<bool>* gone) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(co_await asio::this_coro::executor, std::chrono::milliseconds(1));
  co_await (NoteClientGone(r, gone) || timer.async_wait(asio::use_awaitable));
}

TEST_CASE("Http1Response's ClientGone is true when the client closes, keeping what it sent") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  std::optional<bool> gone;
  const auto watching = Spawn(ioc, NoteClientGone(w.resp, &gone));
  ioc.poll();
  CHECK_FALSE(watching.finished());
  asio::write(w.pair.client, asio::buffer(std::string_view("GET /x")));
  w.pair.client.close();
  REQUIRE(RunUntil(ioc, [&] { return watching.finished(); }));
  watching.Rethrow();
  REQUIRE(gone.has_value());
  CHECK(*gone);
  CHECK(beast::buffers_to_string(w.buffer.data()) == "GET /x");
  CHECK_FALSE(w.resp.reusable());  // The client left.
}

TEST_CASE("Http1Response's ClientGone holds no session buffer while the client is quiet") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  // What reading the request head left: capacity, nothing unread.
  w.buffer.commit(asio::buffer_copy(w.buffer.prepare(2048), asio::buffer(std::string(2048, 'x'))));
  w.buffer.consume(w.buffer.size());
  REQUIRE(w.buffer.capacity() >= 2048);
  std::optional<bool> gone;
  const auto watching = Spawn(ioc, NoteClientGone(w.resp, &gone));
  ioc.poll();
  REQUIRE_FALSE(watching.finished());
  CHECK(w.buffer.capacity() == 0);
  // A client that then sends more than one small read's worth: all of it is kept, in order.
  std::string sent;
  for (int i = 0; sent.size() < 40000; ++i) sent += std::to_string(i) + ",";
  asio::write(w.pair.client, asio::buffer(sent));
  w.pair.client.close();
  REQUIRE(RunUntil(ioc, [&] { return watching.finished(); }));
  watching.Rethrow();
  REQUIRE(gone.has_value());
  CHECK(*gone);
  CHECK(beast::buffers_to_string(w.buffer.data()) == sent);
}

TEST_CASE("Http1Response's WatchClient tells once when the client closes, keeping what it sent") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  w.buffer.commit(asio::buffer_copy(w.buffer.prepare(1024), asio::buffer(std::string(1024, 'x'))));
  w.buffer.consume(w.buffer.size());
  std::vector<bool> told;
  w.resp.WatchClient(ioc.get_executor(), [&](bool gone) { told.push_back(gone); });
  CHECK(told.empty());  // Never from inside the call.
  ioc.poll();
  CHECK(told.empty());
  CHECK(w.buffer.capacity() == 0);  // Quiet: the session's buffer is given back.
  std::string sent;
  for (int i = 0; sent.size() < 40000; ++i) sent += std::to_string(i) + ",";
  asio::write(w.pair.client, asio::buffer(sent));
  w.pair.client.close();
  REQUIRE(RunUntil(ioc, [&] { return !told.empty(); }));
  ioc.poll();
  CHECK(told == std::vector<bool>{true});
  CHECK(beast::buffers_to_string(w.buffer.data()) == sent);
  CHECK_FALSE(w.resp.reusable());
  w.resp.StopWatchingClient();  // After the end: nothing more.
  ioc.poll();
  CHECK(told.size() == 1);
}

TEST_CASE("Http1Response's WatchClient tells false once stopped while the client stays") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  std::vector<bool> told;
  w.resp.WatchClient(ioc.get_executor(), [&](bool gone) { told.push_back(gone); });
  ioc.poll();
  REQUIRE(told.empty());
  w.resp.StopWatchingClient();
  CHECK(told.empty());
  REQUIRE(RunUntil(ioc, [&] { return !told.empty(); }));
  CHECK(told == std::vector<bool>{false});
  // The connection is still there: an answer can still be written on it, and it carries the
  // next request once that answer ended (a watch ended by its timeout, as the apiserver does).
  CHECK_FALSE(Run(ioc, w.resp.WriteHead(Head(200, ResponseHead::Framing::kStreamed))));
  CHECK_FALSE(Run(ioc, w.resp.End()));
  const auto got = ParseResponse(w.pair.ReadAvailable());
  CHECK(got.done);
  CHECK(got.FieldCount("Connection") == 0);
  CHECK(w.resp.reusable());
}

TEST_CASE("Http1Response's ClientGone is false when cancelled by a racing timer") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  std::optional<bool> gone;
  Run(ioc, ClientGoneOrTimer(w.resp, &gone));
  REQUIRE(gone.has_value());
  CHECK_FALSE(*gone);
}

// Sends what a direct write held (FinishWrite) while the client reads, ends the answer, and
// returns it as the client read it (`seen`: what it had read before).
ParsedResponse FinishHeldAndEnd(asio::io_context& ioc, WireCall& w, std::string seen) {
  const Spawned finish = Spawn(ioc, [](Response& r) -> asio::awaitable<void> {
    const beast::error_code ec = co_await r.FinishWrite();
    if (ec) throw std::runtime_error(ec.message());
  }(w.resp));
  const bool finished = RunUntil(
      ioc,
      [&] {
        seen += w.pair.ReadAvailable();
        return finish.finished();
      },
      std::chrono::seconds(10));
  REQUIRE(finished);
  finish.Rethrow();
  CHECK(w.resp.can_write_now());
  CHECK_FALSE(Run(ioc, w.resp.End()));
  seen += w.pair.ReadAvailable();
  ParsedResponse got = ParseResponse(seen);
  REQUIRE(got.done);
  return got;
}

TEST_CASE(
    "Http1Response's TryWriteBody writes a chunk at once, holds what the socket does not take") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  const std::string_view event = "{\"a\":1}\n";
  const std::array<asio::const_buffer, 1> small{asio::buffer(event)};
  CHECK_FALSE(w.resp.can_write_now());  // No head yet.
  CHECK(w.resp.TryWriteBody(small) == Response::TryWrite::kUnsupported);
  REQUIRE_FALSE(Run(ioc, w.resp.WriteHead(Head(200, ResponseHead::Framing::kStreamed))));
  REQUIRE(w.resp.can_write_now());
  CHECK(w.resp.TryWriteBody(small) == Response::TryWrite::kWritten);
  std::string seen = w.pair.ReadAvailable();
  CHECK(seen.find("\r\n8\r\n{\"a\":1}\n\r\n") != std::string::npos);

  // The client does not read: more than the socket buffers is held, and nothing else goes out
  // until FinishWrite sent it, in order.
  const std::string big(8 << 20, 'x');
  const std::array<asio::const_buffer, 2> pieces{asio::buffer(big), asio::buffer(event)};
  REQUIRE(w.resp.TryWriteBody(pieces) == Response::TryWrite::kHeld);
  CHECK_FALSE(w.resp.can_write_now());
  CHECK(w.resp.TryWriteBody(small) == Response::TryWrite::kUnsupported);
  auto got = FinishHeldAndEnd(ioc, w, seen);
  const std::string want = "{\"a\":1}\n" + big + "{\"a\":1}\n";
  CHECK(got.message.body().size() == want.size());
  const bool same = got.message.body() == want;  // (Not printed: 8 MiB.)
  CHECK(same);
  CHECK(w.resp.reusable());
}

struct WrittenLater final : Response::WriteDone {
  virtual ~WrittenLater() = default;
  void Written(Response::TryWrite r) override { results.push_back(r); }
  std::vector<Response::TryWrite> results;
};

TEST_CASE("Http1Response's TryWriteBodyOrQueue joins a burst's batched sends, told at its end") {
  const absl::Status uring = BatchedSends::Probe();
  INFO("io_uring on this machine: " << uring.ToString());
  REQUIRE(uring.ok());
  BatchedSends::Enable(true);
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  REQUIRE_FALSE(Run(ioc, w.resp.WriteHead(Head(200, ResponseHead::Framing::kStreamed))));
  std::string seen = w.pair.ReadAvailable();
  const std::string_view event = "{\"a\":1}\n";
  const std::array<asio::const_buffer, 1> small{asio::buffer(event)};
  WrittenLater done;
  // Outside a burst: written at once, as TryWriteBody.
  CHECK(w.resp.TryWriteBodyOrQueue(small, done) == Response::TryWrite::kWritten);
  BatchedSends::StartBurst();
  REQUIRE(w.resp.TryWriteBodyOrQueue(small, done) == Response::TryWrite::kQueued);
  CHECK_FALSE(w.resp.can_write_now());  // Nothing else until it is done.
  CHECK(w.resp.TryWriteBodyOrQueue(small, done) == Response::TryWrite::kUnsupported);
  CHECK(done.results.empty());
  BatchedSends::EndBurst();
  REQUIRE(done.results == std::vector<Response::TryWrite>{Response::TryWrite::kWritten});
  CHECK(w.resp.can_write_now());

  // The client does not read: the socket takes part, the rest is held for FinishWrite.
  const std::string big(8 << 20, 'x');
  const std::array<asio::const_buffer, 2> pieces{asio::buffer(big), asio::buffer(event)};
  BatchedSends::StartBurst();
  REQUIRE(w.resp.TryWriteBodyOrQueue(pieces, done) == Response::TryWrite::kQueued);
  BatchedSends::EndBurst();
  REQUIRE(done.results.size() == 2);
  REQUIRE(done.results[1] == Response::TryWrite::kHeld);
  CHECK_FALSE(w.resp.can_write_now());
  auto got = FinishHeldAndEnd(ioc, w, seen);
  const std::string want = "{\"a\":1}\n{\"a\":1}\n" + big + "{\"a\":1}\n";
  CHECK(got.message.body().size() == want.size());
  const bool same = got.message.body() == want;  // (Not printed: 8 MiB.)
  CHECK(same);
}

// A passthrough watch the apiserver refused (422) or ended: the relay read the client while it
// wrote the answer. An answer that said keep-alive must be followed by the next request's
// answer, not by a close: a tier's pool sent its next request (a SubjectAccessReview) there.
TEST_CASE("Http1Response stays reusable when ClientGone was cancelled, keeping the next request") {
  const std::string next = "GET /api/v1/namespaces/default HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const bool pipelined : {false, true}) {
    CAPTURE(pipelined);
    asio::io_context ioc;
    WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1&resourceVersionMatch=Exact");
    const std::string status = R"({"kind":"Status","code":422})";
    CHECK_FALSE(Run(
        ioc,
        WriteStreamed(w.resp, Head(422, ResponseHead::Framing::kLength, status.size()), {status})));
    if (pipelined) asio::write(w.pair.client, asio::buffer(next));
    std::optional<bool> gone;
    Run(ioc, ClientGoneOrTimer(w.resp, &gone));
    REQUIRE(gone.has_value());
    CHECK_FALSE(*gone);
    const auto got = ParseResponse(w.pair.ReadAvailable());
    CHECK(got.done);
    CHECK(got.FieldCount("Connection") == 0);  // Said keep-alive: so it is.
    CHECK(w.resp.reusable());
    CHECK(beast::buffers_to_string(w.buffer.data()) == (pipelined ? next : ""));
  }
}

TEST_CASE("Http1Response is not reusable once it dropped what the client sent meanwhile") {
  asio::io_context ioc;
  WireCall w(ioc, http::verb::get, "/api/v1/pods?watch=1");
  CHECK_FALSE(Run(ioc, WriteStreamed(w.resp, Head(200, ResponseHead::Framing::kStreamed), {})));
  REQUIRE(w.resp.reusable());
  std::optional<bool> gone;
  const auto watching = Spawn(ioc, NoteClientGone(w.resp, &gone));
  // More than a request head's worth: the rest is read and dropped, the stream is lost.
  const std::string flood(RequestParser::kMaxHeaderBytes + 1000, 'x');
  std::thread writer([&] { asio::write(w.pair.client, asio::buffer(flood)); });
  const bool lost = RunUntil(ioc, [&] { return !w.resp.reusable(); });
  writer.join();
  CHECK(lost);
  CHECK(w.buffer.size() == RequestParser::kMaxHeaderBytes);
  w.resp.Cancel();
  REQUIRE(RunUntil(ioc, [&] { return watching.finished(); }));
  watching.Rethrow();
  REQUIRE(gone.has_value());
  CHECK_FALSE(*gone);
  CHECK_FALSE(w.resp.reusable());
}

TEST_CASE("Http1Response answers 100 Continue once, only to a client waiting with a body") {
  SECTION("Expect: 100-continue and a body not yet read") {
    asio::io_context ioc;
    WireCall w(ioc, http::verb::post, "/api/v1/namespaces/ns/pods");
    w.r.fields.set(http::field::expect, "100-continue");
    w.r.body.Set("{}");
    CHECK_FALSE(Run(ioc, w.resp.Continue()));
    CHECK_FALSE(Run(ioc, w.resp.Continue()));
    CHECK(w.pair.ReadAvailable() == "HTTP/1.1 100 Continue\r\n\r\n");
    CHECK_FALSE(w.resp.head_written());
  }
  SECTION("no Expect") {
    asio::io_context ioc;
    WireCall w(ioc, http::verb::post, "/api/v1/namespaces/ns/pods");
    w.r.body.Set("{}");
    CHECK_FALSE(Run(ioc, w.resp.Continue()));
    CHECK(w.pair.ReadAvailable().empty());
  }
  SECTION("the body already read") {
    asio::io_context ioc;
    WireCall w(ioc, http::verb::post, "/api/v1/namespaces/ns/pods");
    w.r.fields.set(http::field::expect, "100-continue");
    CHECK_FALSE(Run(ioc, w.resp.Continue()));
    CHECK(w.pair.ReadAvailable().empty());
  }
}

}  // namespace
}  // namespace kf::test
