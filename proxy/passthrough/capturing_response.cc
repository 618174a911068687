#include "proxy/passthrough/capturing_response.h"

namespace kf {

asio::awaitable<beast::error_code> CapturingResponse::WriteHead(ResponseHead head) {
  namespace http = beast::http;
  capture_.status = static_cast<unsigned>(head.status);
  capture_.reason = head.reason;
  capture_.fields = head.fields;
  capture_.fields.erase(http::field::content_length);
  capture_.fields.erase(http::field::transfer_encoding);
  co_return co_await inner_.WriteHead(std::move(head));
}

asio::awaitable<beast::error_code> CapturingResponse::WriteBody(
    std::span<const asio::const_buffer> pieces) {
  if (!overflow_ && capture_.body.size() + asio::buffer_size(pieces) <= capture_.limit) {
    for (const auto& p : pieces) capture_.body.append(static_cast<const char*>(p.data()), p.size());
  } else {
    overflow_ = true;
    capture_.body.clear();
  }
  co_return co_await inner_.WriteBody(pieces);
}

asio::awaitable<beast::error_code> CapturingResponse::End() {
  auto ec = co_await inner_.End();
  capture_.complete = !ec && !overflow_;
  co_return ec;
}

}  // namespace kf
