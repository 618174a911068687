// Http1Body: the body of an HTTP/1.1 request as a BodySource, read through the session's
// parser (Content-Length or chunked; Beast removes the framing). Each read has a deadline, and
// the whole body one (--request-timeout from the head, the apiserver's request timeout): past
// either the read fails with beast::error::timeout.
//
// Owned by the session for one request; used on its thread only.
#ifndef KUBE_FANOUT_EDGE_HTTP1_BODY_H_
#define KUBE_FANOUT_EDGE_HTTP1_BODY_H_

#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <chrono>

#include "proxy/edge/any_stream.h"
#include "proxy/edge/request.h"
#include "proxy/edge/request_parser.h"

namespace kf {

class Http1Body : public BodySource {
 public:
  // `deadline`: the whole body's, from now (--request-timeout).
  Http1Body(AnyStream& stream, beast::flat_buffer& buffer, RequestParser& parser,
            std::chrono::milliseconds deadline);
  Http1Body(const Http1Body&) = delete;
  Http1Body& operator=(const Http1Body&) = delete;

  bool done() const override { return parser_.is_done(); }
  bool chunked() const override { return parser_.chunked(); }
  // The whole body's deadline passed before it was read (kube_fanout_request_body_timeouts_total).
  bool timed_out() const override { return timed_out_; }
  asio::awaitable<std::pair<beast::error_code, size_t>> ReadSome(std::span<char> into) override;

 private:
  AnyStream& stream_;
  beast::flat_buffer& buffer_;
  RequestParser& parser_;
  // The whole body's; armed by the first read. Its destructor cancels a wait still pending (the
  // handler sees operation_aborted and does nothing), without the throwing cancel().
  asio::steady_timer deadline_;
  bool deadline_armed_ = false;
  bool timed_out_ = false;
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_HTTP1_BODY_H_
