#include "proxy/edge/response.h"

#include <array>

namespace kf {

asio::awaitable<beast::error_code> WriteWhole(Response& response, int status,
                                              std::string_view content_type,
                                              std::span<const asio::const_buffer> body,
                                              std::optional<int> retry_after) {
  namespace http = beast::http;
  ResponseHead head;
  head.status = status;
  head.fields.set(http::field::cache_control, "no-cache, private");
  head.fields.set(http::field::content_type, content_type);
  if (retry_after) head.fields.set(http::field::retry_after, std::to_string(*retry_after));
  head.fields.set("X-Content-Type-Options", "nosniff");
  head.framing = ResponseHead::Framing::kWhole;
  head.length = asio::buffer_size(body);
  co_return co_await WriteAnswer(response, std::move(head), body);
}

asio::awaitable<beast::error_code> WriteAnswer(Response& response, ResponseHead head,
                                               std::span<const asio::const_buffer> body) {
  beast::error_code ec = co_await response.WriteHead(std::move(head));
  if (!ec) ec = co_await response.WriteBody(body);
  if (!ec) ec = co_await response.End();
  co_return ec;
}

asio::awaitable<beast::error_code> WriteWhole(Response& response, int status,
                                              std::string_view content_type,
                                              std::string_view body) {
  const std::array<asio::const_buffer, 1> piece{asio::buffer(body)};
  co_return co_await WriteWhole(response, status, content_type, piece);
}

asio::awaitable<beast::error_code> WriteStatus(Response& response, const KubeStatus& status) {
  const std::string body = EncodeStatusBody(status);
  const std::array<asio::const_buffer, 1> piece{asio::buffer(body)};
  co_return co_await WriteWhole(response, status.code, "application/json", piece,
                                status.retry_after_seconds);
}

}  // namespace kf
