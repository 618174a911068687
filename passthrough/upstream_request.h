// The request as it goes upstream: the client's end-to-end fields (Authorization and
// Impersonate-* unchanged; kube-fanout adds no credentials), the upstream's target and Host,
// X-Forwarded-For, explicit framing; then its body, streamed in bounded pieces (or sent as a
// filter read it whole).
#ifndef KUBE_FANOUT_PASSTHROUGH_UPSTREAM_REQUEST_H_
#define KUBE_FANOUT_PASSTHROUGH_UPSTREAM_REQUEST_H_

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>

#include "common/any_stream.h"
#include "edge/request.h"
#include "upstream/upstream_config.h"

namespace kf {

// Bodies are relayed in pieces of one TLS record: memory per relayed stream stays bounded.
inline constexpr size_t kRelayPiece = 16 * 1024;

beast::http::request<beast::http::buffer_body> UpstreamRequestHead(const Request& r,
                                                                   const UpstreamEndpoint& ep,
                                                                   bool upgrade);

// Sends the head and the body. `body_write_failed`: the head went out but writing the body
// failed, which is how an upstream that answers before reading the body (the apiserver
// refusing a request, then closing) looks from here; its answer may still be waiting.
asio::awaitable<beast::error_code> SendRequest(Request& r, AnyStream& up,
                                               beast::http::request<beast::http::buffer_body>& req,
                                               bool* body_write_failed);

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_UPSTREAM_REQUEST_H_
