// The request as it goes upstream: the client's end-to-end fields (Authorization and
// Impersonate-* unchanged; kube-fanout adds no credentials of its own) less any request-header
// identity fields (proxy/upstream/request_header.h), the upstream's target and Host,
// X-Forwarded-For (bounded: kMaxForwardedForBytes), explicit framing; then its body, streamed in
// bounded pieces (or sent as a filter read it whole). No head is written with a field name, field
// value, method or target holding bytes HTTP forbids (proxy/edge/field_syntax.h), whatever their
// source.
#ifndef KUBE_FANOUT_PASSTHROUGH_UPSTREAM_REQUEST_H_
#define KUBE_FANOUT_PASSTHROUGH_UPSTREAM_REQUEST_H_

#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/message.hpp>

#include "absl/status/statusor.h"
#include "proxy/edge/any_stream.h"
#include "proxy/edge/request.h"
#include "proxy/upstream/http2_upstream.h"
#include "proxy/upstream/request_header.h"
#include "proxy/upstream/upstream_config.h"

namespace kf {

// Bodies are relayed in pieces of one TLS record: memory per relayed stream stays bounded.
inline constexpr size_t kRelayPiece = 16 * 1024;

// X-Forwarded-For as sent upstream holds at most this many bytes: the client's hops, joined as
// Go's httputil.ReverseProxy joins them, then the peer's address; past it the oldest hops are
// dropped, whole, until it fits (the peer's address always stays). The apiserver takes any
// size (within its 1 MiB of header), but only the last hops say anything it can trust, and a
// value past Beast's 65,533 bytes could not be written at all.
inline constexpr size_t kMaxForwardedForBytes = 8 * 1024;

// The X-Forwarded-For value for a client at `remote_ip` whose request carried `fields`.
std::string ForwardedFor(const beast::http::fields& fields, std::string_view remote_ip);

// `as_user`: the user to assert in request-header fields (the connection to the upstream then
// presents the front-proxy certificate); null for a request that carries its own credentials.
// A head that cannot be written as it should: InvalidArgument when the client's own bytes are
// at fault (its method, target or fields: answered 400), Internal when `as_user` could not be
// asserted (vouched identities are checked before, so never expected: answered 500).
absl::StatusOr<beast::http::request<beast::http::buffer_body>> UpstreamRequestHead(
    const Request& r, const UpstreamEndpoint& ep, bool upgrade, const RequestHeaderNames& names,
    const Identity* as_user);

// UpstreamRequestHead's head (already checked) as an HTTP/2 field list (RFC 9113 §8.3): :method,
// :scheme, :authority (the Host field's value), :path, then the fields with lower-case names,
// less those HTTP/2 forbids (Host, Connection, Keep-Alive, Proxy-Connection, Transfer-Encoding,
// Upgrade; TE other than "trailers"). Every name and value is checked once more as it will go:
// InvalidArgument (nothing sent) otherwise.
absl::StatusOr<Http2HeaderList> Http2RequestHead(
    const beast::http::request<beast::http::buffer_body>& head, bool tls);

// Sends the head and the body. `body_write_failed`: the head went out but writing the body
// failed, which is how an upstream that answers before reading the body (the apiserver
// refusing a request, then closing) looks from here; its answer may still be waiting.
asio::awaitable<beast::error_code> SendRequest(Request& r, AnyStream& up,
                                               beast::http::request<beast::http::buffer_body>& req,
                                               bool* body_write_failed);

}  // namespace kf

#endif  // KUBE_FANOUT_PASSTHROUGH_UPSTREAM_REQUEST_H_
