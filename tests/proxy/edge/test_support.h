// Shared helpers for the request-path tests (edge/, filters/, passthrough/, serve/): running a
// coroutine to its end on an io_context, a loopback TCP pair on port 0, a request built in
// memory with a body source, a Response that records what a handler wrote, and reading an
// HTTP/1.x answer off the client side of a pair.
//
// Every wait is bounded by io_context::run_for(); nothing sleeps.
#ifndef KUBE_FANOUT_TESTS_EDGE_TEST_SUPPORT_H_
#define KUBE_FANOUT_TESTS_EDGE_TEST_SUPPORT_H_

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "proxy/edge/any_stream.h"
#include "proxy/edge/exchange.h"
#include "proxy/edge/filter.h"
#include "proxy/edge/http1_response.h"
#include "proxy/edge/request.h"
#include "proxy/edge/response.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// Steps `ioc` (run_for in short slices) until `done()` or `limit` passes; false on the limit.
bool RunUntil(asio::io_context& ioc, const std::function<bool()>& done,
              std::chrono::milliseconds limit = std::chrono::seconds(5));

// Starts `a` on `ioc` and returns a flag set once it has ended; rethrows its exception there.
struct Spawned {
  std::shared_ptr<bool> done = std::make_shared<bool>(false);
  std::shared_ptr<std::exception_ptr> error = std::make_shared<std::exception_ptr>();
  bool finished() const { return *done; }
  void Rethrow() const {
    if (*error) std::rethrow_exception(*error);
  }
};
Spawned Spawn(asio::io_context& ioc, asio::awaitable<void> a);

// Runs `a` to its end on `ioc` (at most `limit`) and returns its value; throws if it did not end.
template <class T>
T Run(asio::io_context& ioc, asio::awaitable<T> a,
      std::chrono::milliseconds limit = std::chrono::seconds(5)) {
  auto result = std::make_shared<std::optional<T>>();
  auto wrapper = [](asio::awaitable<T> inner,
                    std::shared_ptr<std::optional<T>> out) -> asio::awaitable<void> {
    out->emplace(co_await std::move(inner));
  };
  const Spawned s = Spawn(ioc, wrapper(std::move(a), result));
  const bool ended = RunUntil(
      ioc, [&s] { return s.finished(); }, limit);
  s.Rethrow();
  if (!ended || !result->has_value()) throw std::runtime_error("coroutine did not finish");
  return std::move(**result);
}
void Run(asio::io_context& ioc, asio::awaitable<void> a,
         std::chrono::milliseconds limit = std::chrono::seconds(5));

// A connected TCP pair on 127.0.0.1 (an acceptor on port 0): `client` a plain socket for the
// test to read and write, `server` the accepted side as the proxy's sessions hold it.
struct LoopbackPair {
  explicit LoopbackPair(asio::io_context& ioc);
  asio::ip::tcp::socket client;
  AnyStream server;

  // Everything the client side can read now (non-blocking), up to EOF (then `closed`).
  std::string ReadAvailable();
  bool closed = false;
};

// An answer as the client reads it: the raw bytes, and Beast's parse of them.
struct ParsedResponse {
  std::string raw;
  beast::error_code ec;
  bool done = false;
  http::response<http::string_body> message;
  size_t consumed = 0;  // Bytes the parser took (the rest belongs to a next answer).
  // How many header lines start with `name` + ":" (case-sensitive, as written).
  int FieldCount(std::string_view name) const;
};
// Parses `raw` as one response; `head_request`: no body follows; `eof`: the peer closed after.
ParsedResponse ParseResponse(std::string raw, bool head_request = false, bool eof = false);

// A request body held in memory, handed out `piece` bytes at a time.
class FakeBody : public BodySource {
 public:
  FakeBody() = default;
  void Set(std::string bytes, bool chunked = false) {
    bytes_ = std::move(bytes);
    chunked_ = chunked;
    offset_ = 0;
  }
  bool done() const override { return offset_ >= bytes_.size(); }
  bool chunked() const override { return chunked_; }
  asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(std::span<char> into) override;
  size_t read() const { return offset_; }

  size_t piece = 1000;

 private:
  std::string bytes_;
  bool chunked_ = false;
  size_t offset_ = 0;
};

// A client request built in memory: `fields` and `body` may be changed until it is used.
struct TestRequest {
  TestRequest(http::verb method, std::string target, unsigned version = 11);
  TestRequest(const TestRequest&) = delete;
  TestRequest& operator=(const TestRequest&) = delete;

  std::string target_storage;
  http::fields fields;
  FakeBody body;
  Request request;
  StopSignal stop;
};

// A Response that keeps what was written to it. `fail` makes every write fail with it.
class RecordingResponse : public Response {
 public:
  asio::awaitable<beast::error_code> WriteHead(ResponseHead head) override;
  asio::awaitable<beast::error_code> WriteBody(std::span<const asio::const_buffer> pieces) override;
  asio::awaitable<beast::error_code> End() override;
  // Waits until cancelled: false (a recorded client never leaves).
  asio::awaitable<bool> ClientGone() override;
  // Never gone: `gone(false)` once stopped.
  void WatchClient(const asio::any_io_executor& executor, std::function<void(bool)> gone) override;
  void StopWatchingClient() override;
  asio::awaitable<beast::error_code> Continue() override;
  void Cancel() override { ++cancels; }
  void CloseAfter() override { close_after = true; }
  std::optional<Upgraded> TakeUpgraded() override { return std::nullopt; }
  bool head_written() const override { return head.has_value(); }
  int status() const override { return head ? head->status : 0; }
  uint64_t body_bytes() const override { return body.size(); }

  std::optional<ResponseHead> head;
  std::string body;
  bool ended = false;
  bool close_after = false;
  int continues = 0;
  int cancels = 0;
  beast::error_code fail;
  std::optional<asio::any_io_executor> watch_executor;
  std::function<void(bool)> watch_gone;
};

// The rest of the chain for a filter under test: counts the calls that reach it and runs
// `then` (if set) inside, while the request is in flight.
struct NextProbe {
  int calls = 0;
  Next then;
  Next next();
};

// A request going through a filter or handler under test, answered to a recording Response.
struct FilterCall {
  FilterCall(http::verb method, std::string target) : r(method, std::move(target)) {}
  TestRequest r;
  RecordingResponse resp;
  Exchange x{r.request, &resp, r.stop};
  NextProbe probe;
  const Next next = probe.next();
};

// Checks that a filter refused `call` itself: the rest of the chain never ran, a Status answer
// with `status` and `retry_after` ("" for none), the exchange kRejected for `error`.
void CheckRefused(const FilterCall& call, int status, std::string_view retry_after,
                  std::string_view error);

// An upstream apiserver stand-in on 127.0.0.1, port 0, and a pool that dials it. ServeOne takes
// one connection, reads one request into `request`, writes `answer` as given (raw bytes, so the
// test chooses the framing), then closes its side (after `hold`: a peer that goes silent).
struct FakeUpstream {
  explicit FakeUpstream(asio::io_context& ioc);
  uint16_t port() const { return acceptor.local_endpoint().port(); }
  static asio::awaitable<void> ServeOne(FakeUpstream* up);

  asio::ip::tcp::acceptor acceptor;
  UpstreamConfig config;
  std::string answer;
  std::chrono::milliseconds hold{0};
  http::request<http::string_body> request;
  asio::ssl::context tls{asio::ssl::context::tls_client};
  UpstreamPoolStats stats;
  UpstreamPool pool;
};

// Serves each of `calls` through `filter`, one after the other.
asio::awaitable<void> ServeEach(Filter& filter, std::vector<FilterCall*> calls);

// A request answered by an Http1Response on the server side of a loopback pair.
struct WireCall {
  WireCall(asio::io_context& ioc, http::verb method, std::string target, unsigned version = 11)
      : r(method, std::move(target), version), pair(ioc) {}
  TestRequest r;
  LoopbackPair pair;
  beast::flat_buffer buffer;
  Http1Response resp{pair.server, buffer, r.request, r.stop};
  Exchange x{r.request, &resp, r.stop};
};

// A self-signed certificate (P-256, CN `name`, valid for an hour) and its key, in PEM, written
// to `<temp dir>/<name>-<pid>.crt` and `.key` (both removed when the process exits); returns
// the two paths.
std::pair<std::string, std::string> WriteSelfSigned(const std::string& name);

}  // namespace kf::test

#endif  // KUBE_FANOUT_TESTS_EDGE_TEST_SUPPORT_H_
