// Http2Body and Http2Wakeup (http2_stream.h): a stream's request body as its handler reads it,
// and the wakeup its reads and writes wait on.
#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <utility>

#include "proxy/edge/http2_stream.h"

namespace kf {

namespace http = beast::http;

void Http2Wakeup::Notify() {
  // Once is enough until the waiter took it: a timer's cancel takes the reactor's lock, and a
  // connection's writer is notified by each stream that queued something.
  if (fired_) return;
  fired_ = true;
  if (timer_) timer_->cancel();  // None: nobody waits yet.
}

asio::awaitable<bool> Http2Wakeup::Wait(asio::steady_timer::time_point deadline) {
  if (!fired_) {
    if (!timer_) timer_ = std::make_unique<asio::steady_timer>(*executor_);
    timer_->expires_at(deadline);
    co_await timer_->async_wait(asio::as_tuple(asio::use_awaitable));
    if (!keep_timer_) timer_.reset();  // Its wait is over: nothing is pending on it.
  }
  const bool fired = fired_;
  fired_ = false;
  co_return fired;
}

bool Http2Body::done() const {
  return stream_.drop_body_ || (stream_.body_end_ && stream_.unconsumed() == 0);
}

bool Http2Body::chunked() const {
  return !stream_.bodiless_ &&
         stream_.headers().find(http::field::content_length) == stream_.headers().end();
}

asio::awaitable<std::pair<beast::error_code, size_t>> Http2Body::ReadSome(std::span<char> into) {
  Http2Stream& s = stream_;
  if (timed_out_) co_return std::pair{beast::error_code(beast::error::timeout), size_t{0}};
  if (s.drop_body_) co_return std::pair{beast::error_code{}, size_t{0}};
  for (;;) {
    if (s.unconsumed() > 0) {
      const size_t n = std::min(into.size(), s.unconsumed());
      std::memcpy(into.data(), s.body_in_.data() + s.body_offset_, n);
      s.body_offset_ += n;
      if (!s.closed_ && s.session_ != nullptr) {
        // The client may send as much again (flow control follows what was consumed).
        nghttp2_session_consume(s.session_, s.id_, n);
        if (s.writer != nullptr) s.writer->Flush();
      }
      co_return std::pair{beast::error_code{}, n};
    }
    if (s.body_end_) co_return std::pair{beast::error_code{}, size_t{0}};
    if (s.reset_ || s.session_ == nullptr) {
      co_return std::pair{beast::error_code(asio::error::connection_reset), size_t{0}};
    }
    // Bytes the client sent in time are read even past the deadline; only a wait for more ends.
    if (std::chrono::steady_clock::now() >= s.body_deadline_) {
      timed_out_ = true;
      co_return std::pair{beast::error_code(beast::error::timeout), size_t{0}};
    }
    const bool woken = co_await s.body_wake_.Wait(s.body_deadline_);
    if (!woken && std::chrono::steady_clock::now() < s.body_deadline_) {
      co_return std::pair{beast::error_code(asio::error::operation_aborted), size_t{0}};
    }
  }
}

}  // namespace kf
