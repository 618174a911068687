// UpstreamClient: kube-fanout's own requests to the upstream (the cache's LIST and WATCH, RV
// probes) and authorization checks made with a client's credentials. Requests go through an
// UpstreamPool (keep-alive reuse, endpoint failover).
//
// Credentials are explicit per call: `authorization` is the Authorization header to send —
// kube-fanout's own bearer token for cache requests (and its client certificate, through the
// pool's TLS context), or a client's own header for checks made on that client's behalf.
// Used from the io thread that owns the pool.
#ifndef KUBE_FANOUT_UPSTREAM_UPSTREAM_CLIENT_H_
#define KUBE_FANOUT_UPSTREAM_UPSTREAM_CLIENT_H_

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proxy/edge/any_stream.h"
#include "proxy/edge/request_parser.h"
#include "proxy/upstream/upstream_pool.h"

namespace kf {

namespace http = beast::http;

// A watch with this request header (and allowWatchBookmarks) asks kube-fanout to prove its
// cache current against its own upstream (as a consistent read does) and then send a bookmark
// at once, instead of at its next scheduled time. Tiers use it so a lower tier's consistent
// read is not held back by what the tier above has not proven yet. Unknown to the apiserver,
// which ignores it.
inline constexpr std::string_view kProgressRequestHeader = "X-Kube-Fanout-Progress-Request";

struct UpstreamResponse {
  int status = 0;
  std::string body;
  std::string content_type;
  // Retry-After of a refusal (429, 5xx), when it gave one kube-fanout understands.
  std::optional<std::chrono::seconds> retry_after;
};

// A Retry-After value in delta-seconds ("3"), as the apiserver sends with 429 (API Priority and
// Fairness) and 503; nullopt for anything else (an HTTP-date, a sign, more than 9 digits).
std::optional<std::chrono::seconds> ParseRetryAfter(std::string_view value);

// How long to wait before trying again after a failure: `backoff` (already jittered), or the
// upstream's Retry-After when longer, capped at `cap` (an upstream asking for an hour is not
// left alone for an hour).
std::chrono::milliseconds RetryWait(std::optional<std::chrono::seconds> retry_after,
                                    std::chrono::milliseconds backoff,
                                    std::chrono::milliseconds cap);

// One request, response read whole, all within `timeout` (a new connection's dial included).
// Unavailable when no endpoint answers.
asio::awaitable<absl::StatusOr<UpstreamResponse>> UpstreamCall(
    UpstreamPool& pool, http::verb method, std::string target, std::string authorization,
    std::string body = "", std::chrono::milliseconds timeout = std::chrono::seconds(60),
    std::string_view accept = "application/json");

// An open upstream watch, read one event line at a time.
class UpstreamWatch {
 public:
  // Opens `target` (a watch URL). A non-200 answer comes back as a response, not a watch.
  // `idle_timeout`: the longest silence (no byte at all) before a read fails with
  // DeadlineExceeded: a watch whose connection stays open while nothing flows is dead.
  // `progress_request`: asks an upstream kube-fanout (a tier above) for a bookmark as soon as
  // it has proven itself current (kProgressRequestHeader); the apiserver ignores the field.
  // `accept_encoding`: sent as Accept-Encoding when not empty (only a probe of the answer's
  // Content-Encoding asks for one: the events are read as sent, never decompressed).
  static asio::awaitable<
      absl::StatusOr<std::variant<std::unique_ptr<UpstreamWatch>, UpstreamResponse>>>
  Open(UpstreamPool& pool, std::string target, std::string authorization,
       std::chrono::milliseconds idle_timeout, std::string_view accept = "application/json",
       bool progress_request = false, std::string_view accept_encoding = {});

  // The answer's Content-Encoding ("" when it has none).
  std::string content_encoding() const {
    return std::string(parser_.get()[http::field::content_encoding]);
  }

  // The next line (without '\n'); NotFound at the clean end of the stream; DeadlineExceeded
  // after the idle timeout without a byte.
  asio::awaitable<absl::StatusOr<std::string>> NextLine();
  // The next length-delimited frame (a protobuf watch: 4-byte big-endian length, then the
  // message), without its length; NotFound at the clean end of the stream.
  asio::awaitable<absl::StatusOr<std::string>> NextFrame();
  // One event in the stream's encoding: NextFrame for protobuf, else NextLine.
  asio::awaitable<absl::StatusOr<std::string>> NextEvent(bool protobuf);

  // Abandons the stream (pending reads end with an error).
  void Cancel() { stream_->Cancel(); }

 private:
  UpstreamWatch(std::unique_ptr<AnyStream> stream, std::chrono::milliseconds idle)
      : stream_(std::move(stream)), idle_(idle) {}

  std::unique_ptr<AnyStream> stream_;
  beast::flat_buffer buffer_;
  BoundedParser<false, http::buffer_body> parser_;
  // Reads more of the body into pending_; NotFound at its end.
  asio::awaitable<absl::Status> ReadMore();

  std::string pending_;  // Bytes after the last complete line.
  std::chrono::milliseconds idle_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_UPSTREAM_UPSTREAM_CLIENT_H_
