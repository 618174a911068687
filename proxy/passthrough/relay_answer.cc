#include "proxy/passthrough/relay_answer.h"

#include <array>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/api/watch_framing.h"
#include "proxy/edge/deadlines.h"
#include "proxy/edge/hop_by_hop.h"
#include "proxy/passthrough/upstream_request.h"

namespace kf {
namespace {

namespace http = beast::http;
// Longer than any watch the apiserver keeps open (its default limit is under an hour); TCP
// keep-alive notices a dead peer before then.
constexpr auto kWatchIdleTimeout = std::chrono::minutes(70);
// On a graceful stop, how long the rest of an event already under way may take to arrive.
constexpr auto kStopFinishEventTimeout = std::chrono::seconds(5);

class Http2UpstreamBody final : public UpstreamBody {
 public:
  explicit Http2UpstreamBody(Http2UpstreamStream& stream) : stream_(stream) {}
  bool done() const override { return stream_.done(); }
  asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(
      std::span<char> into, std::chrono::seconds timeout) override {
    co_return co_await stream_.ReadSome(into, std::chrono::steady_clock::now() + timeout);
  }
  void Cancel() override { stream_.Cancel(); }

 private:
  Http2UpstreamStream& stream_;
};

// The response body, piece by piece.
struct BodyPump {
  Exchange& x;
  UpstreamBody& body;
  bool watch;
  WatchFraming framing{WatchFraming::Format::kUnframed};
  bool upstream_clean = true;  // The upstream connection may be reused.
  bool failed = false;         // The relay ended early; the client connection must close.
  bool reading = false;        // Waiting for the upstream (not writing a piece to the client).

  std::chrono::seconds ReadTimeout() const {
    if (!watch) return kBodyIdleTimeout;
    return x.stopping() ? kStopFinishEventTimeout : kWatchIdleTimeout;
  }
  bool StopHere() const { return x.stopping() && watch && framing.AtBoundary(); }
};

asio::awaitable<void> PumpBody(BodyPump& b) {
  std::array<char, kRelayPiece> buf;
  while (!b.body.done()) {
    if (b.StopHere()) {
      b.upstream_clean = false;  // The rest of the upstream stream is abandoned.
      break;
    }
    b.reading = true;
    auto [rec, rn] = co_await b.body.ReadSome(buf, b.ReadTimeout());
    b.reading = false;
    if (rec) {
      if (b.StopHere()) {
        b.upstream_clean = false;
        break;
      }
      // The upstream failed mid-body: the client sees its stream cut, as it would have. Or
      // the client reset its stream, which closed the upstream connection (Serve).
      b.x.error = b.x.stop.cancelled ? std::string("client reset the stream")
                                     : absl::StrCat("upstream ", b.x.upstream, ": ", rec.message());
      b.failed = true;
      co_return;
    }
    std::string_view piece(buf.data(), rn);
    if (piece.empty()) continue;
    if (b.x.stopping() && b.watch) {
      if (const size_t end = b.framing.PrefixToBoundary(piece); end != std::string_view::npos) {
        piece = piece.substr(0, end);
        b.upstream_clean = false;
      }
    }
    const std::array<asio::const_buffer, 1> out{asio::buffer(piece)};
    if (auto ec = co_await b.x.response->WriteBody(out)) {
      b.x.error = absl::StrCat("client: ", ec.message());
      b.failed = true;
      co_return;
    }
    b.framing.Consume(piece);
    if (!b.upstream_clean) break;
  }
  if (auto ec = co_await b.x.response->End()) {
    b.x.error = absl::StrCat("client: ", ec.message());
    b.failed = true;
  }
}

// Completes when the client ends its side, after cancelling the upstream stream.
asio::awaitable<void> CancelWhenClientLeaves(Response& response, UpstreamBody& up, bool* left) {
  const bool gone = co_await response.ClientGone();
  if (gone) {
    *left = true;
    up.Cancel();
  }
}

asio::awaitable<void> RelayBody(BodyPump& b, std::string_view content_type) {
  if (!b.watch) {
    co_await PumpBody(b);
    co_return;
  }
  // On a graceful stop a watch ends between two events: at once when it waits for the
  // upstream at an event boundary (that read is cancelled), else after forwarding the rest of
  // the event in flight. A piece being written is not yet counted by the framing: the pump
  // looks again once it is written.
  b.x.stop.hook = [&b] {
    if (b.reading && b.framing.AtBoundary()) b.body.Cancel();
  };
  absl::Cleanup clear_hook = [&b] { b.x.stop.hook = nullptr; };
  b.framing = WatchFraming(WatchFraming::ForContentType(content_type));
  // A quiet watch whose client went away must not hold its upstream watch open until the next
  // event happens to fail the write: notice the client's end and cancel.
  using namespace asio::experimental::awaitable_operators;
  bool client_left = false;
  co_await (PumpBody(b) || CancelWhenClientLeaves(*b.x.response, b.body, &client_left));
  if (client_left) b.x.error = "client closed";
}

bool ResponseHasBody(int status, bool head) {
  return !head && status >= 200 && status != 204 && status != 304;
}

}  // namespace

asio::awaitable<bool> RelayAnswer(Exchange& x, ResponseHead head, UpstreamBody& body) {
  const int status = head.status;
  const std::string content_type(head.fields[http::field::content_type]);
  if (auto ec = co_await x.response->WriteHead(std::move(head))) {
    x.error = absl::StrCat("client: ", ec.message());
    co_return false;
  }
  const bool head_request = x.request.method == http::verb::head;
  BodyPump b{x, body, x.request.info.verb == "watch"};
  if (ResponseHasBody(status, head_request) && !body.done()) {
    co_await RelayBody(b, content_type);
  } else if (auto ec = co_await x.response->End()) {
    x.error = absl::StrCat("client: ", ec.message());
    b.failed = true;
  }
  co_return !b.failed && b.upstream_clean;
}

ResponseHead AnswerHead(int status, std::string reason, const http::fields& fields,
                        std::optional<uint64_t> length) {
  ResponseHead head;
  head.status = status;
  head.reason = std::move(reason);
  CopyEndToEndFields(fields, head.fields);
  if (length) {
    head.framing = ResponseHead::Framing::kLength;
    head.length = *length;
  } else {
    head.framing = ResponseHead::Framing::kStreamed;
  }
  return head;
}

namespace {

// The reason phrase Go's HTTP/1.1 server writes for `status` (http.StatusText); HTTP/2 has
// none.
std::string ReasonOf(int status) {
  const auto known = http::int_to_status(static_cast<unsigned>(status));
  if (known == http::status::unknown) return {};
  return std::string(http::obsolete_reason(known));
}

// Go's servers give a length to an answer the handler wrote whole before it returned, up to
// what they buffer: HTTP/1.1's 2,048 bytes (bufferBeforeChunkingSize), HTTP/2's 4,096
// (handlerChunkWriteSize). An HTTP/2 answer with a length in between is sent on to an HTTP/1.x
// client chunked, as the apiserver's HTTP/1.1 server sends it.
constexpr uint64_t kHttp1LengthBuffer = 2048;
constexpr uint64_t kHttp2LengthBuffer = 4096;

}  // namespace

asio::awaitable<void> RelayHttp2Response(Exchange& x, Http2UpstreamStream& stream) {
  Http2UpstreamBody body(stream);
  std::optional<uint64_t> length = stream.content_length();
  if (length && x.request.version < 20 && *length > kHttp1LengthBuffer &&
      *length <= kHttp2LengthBuffer) {
    length.reset();
  }
  ResponseHead head =
      AnswerHead(stream.status(), ReasonOf(stream.status()), stream.fields(), length);
  // Date, then Content-Length, after the handler's fields, as Go's HTTP/1.1 server orders them.
  for (const http::field f : {http::field::date, http::field::content_length}) {
    const auto it = head.fields.find(f);
    if (it == head.fields.end()) continue;
    const std::string value(it->value());
    head.fields.erase(f);
    if (f == http::field::date || length) head.fields.insert(f, value);
  }
  co_await RelayAnswer(x, std::move(head), body);
}

}  // namespace kf
