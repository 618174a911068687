// Http1Body: the body of an HTTP/1.1 request as a BodySource, read through the session's
// parser (Content-Length or chunked; Beast removes the framing). Each read has a deadline.
//
// Owned by the session for one request; used on its thread only.
#ifndef KUBE_FANOUT_EDGE_HTTP1_BODY_H_
#define KUBE_FANOUT_EDGE_HTTP1_BODY_H_

#include <boost/beast/core/flat_buffer.hpp>

#include "common/any_stream.h"
#include "edge/request.h"
#include "edge/request_parser.h"

namespace kf {

class Http1Body : public BodySource {
 public:
  Http1Body(AnyStream& stream, beast::flat_buffer& buffer, RequestParser& parser)
      : stream_(stream), buffer_(buffer), parser_(parser) {}

  bool done() const override { return parser_.is_done(); }
  bool chunked() const override { return parser_.chunked(); }
  asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(std::span<char> into) override;

 private:
  AnyStream& stream_;
  beast::flat_buffer& buffer_;
  RequestParser& parser_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HTTP1_BODY_H_
