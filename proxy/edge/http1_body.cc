#include "proxy/edge/http1_body.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/http/read.hpp>

#include "proxy/edge/deadlines.h"

namespace kf {

Http1Body::Http1Body(AnyStream& stream, beast::flat_buffer& buffer, RequestParser& parser,
                     std::chrono::milliseconds deadline)
    : stream_(stream),
      buffer_(buffer),
      parser_(parser),
      deadline_(stream.get_executor(), std::chrono::steady_clock::now() + deadline) {}

asio::awaitable<std::pair<beast::error_code, size_t>> Http1Body::ReadSome(std::span<char> into) {
  namespace http = beast::http;
  if (parser_.is_done()) co_return std::pair{beast::error_code{}, size_t{0}};
  if (timed_out_) co_return std::pair{beast::error_code(beast::error::timeout), size_t{0}};
  if (!deadline_armed_) {
    // Past the deadline the read under way is cancelled, not the connection closed (as the
    // stream's own timeout would), so that the request can still be answered.
    deadline_armed_ = true;
    deadline_.async_wait([this](beast::error_code ec) {
      if (ec) return;  // Cancelled: the body ended in time, or the request is gone.
      timed_out_ = true;
      stream_.tcp().cancel();
    });
  }
  parser_.get().body().data = into.data();
  parser_.get().body().size = into.size();
  stream_.tcp().expires_after(kBodyIdleTimeout);
  auto [ec, n] = co_await http::async_read_some(stream_, buffer_, parser_,
                                                asio::as_tuple(asio::use_awaitable));
  if (ec == http::error::need_buffer) ec = {};
  if (timed_out_ && ec) ec = beast::error::timeout;
  if (parser_.is_done()) deadline_.cancel();
  co_return std::pair{ec, into.size() - parser_.get().body().size};
}

}  // namespace kf
