// Relaying an upstream answer to the client: its head at once, then its body as it arrives
// (a watch's up to an event boundary on a graceful stop), from an HTTP/1.1 connection or an
// HTTP/2 stream (relay.h opens the call).
#ifndef KUBE_FANOUT_PASSTHROUGH_RELAY_ANSWER_H_
#define KUBE_FANOUT_PASSTHROUGH_RELAY_ANSWER_H_

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/fields.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "proxy/edge/exchange.h"
#include "proxy/edge/response.h"
#include "proxy/upstream/http2_upstream.h"

namespace kf {

// The answer's body as it arrives: from an HTTP/1.1 connection or an HTTP/2 stream.
class UpstreamBody {
 public:
  virtual ~UpstreamBody() = default;
  virtual bool done() const = 0;
  // Some bytes (possibly none, before the end) within `timeout`.
  virtual asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(
      std::span<char> into, std::chrono::seconds timeout) = 0;
  // A pending read fails (operation_aborted); the rest of the answer is abandoned.
  virtual void Cancel() = 0;
};

// The head of an answer relayed with `fields`' end-to-end fields: with a length when the
// upstream gave one, else streamed.
ResponseHead AnswerHead(int status, std::string reason, const boost::beast::http::fields& fields,
                        std::optional<uint64_t> length);

// The upstream's answer, relayed: head at once (a watch's client learns at once that it is
// open), then the body as it comes. True when the exchange ended cleanly (the upstream
// connection may be reused).
boost::asio::awaitable<bool> RelayAnswer(Exchange& x, ResponseHead head, UpstreamBody& body);

// An HTTP/2 upstream stream's answer, relayed with the framing and field order the apiserver's
// own server gives it on the client's protocol.
boost::asio::awaitable<void> RelayHttp2Response(Exchange& x, Http2UpstreamStream& stream);

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_RELAY_ANSWER_H_
