#include "tests/tools/api_client.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <exception>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace kf::tools {
namespace {

namespace http = beast::http;
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr size_t kMaxBody = 256u << 20;  // The apiserver's /metrics is several MB.

}  // namespace

absl::StatusOr<Endpoint> Endpoint::Parse(std::string_view url) {
  Endpoint e;
  std::string_view rest = url;
  if (rest.substr(0, 8) == "https://") {
    e.tls = true;
    rest.remove_prefix(8);
  } else if (rest.substr(0, 7) == "http://") {
    rest.remove_prefix(7);
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("want [http[s]://]HOST:PORT, got \"", ToAbsl(url), "\""));
  }
  e.host = std::string(rest.substr(0, colon));
  e.port = std::string(rest.substr(colon + 1));
  if (e.host.size() > 2 && e.host.front() == '[' && e.host.back() == ']') {
    e.host = e.host.substr(1, e.host.size() - 2);
  }
  return e;
}

struct ApiClient::Attempt {
  http::verb verb;
  std::string_view target;
  const std::function<std::string()>* make_body;
  std::string_view content_type;
  std::chrono::milliseconds timeout;
  bool reused = false;
  bool answered = false;  // Some of the response arrived.
  beast::error_code ec;
  std::string where;
  Response response;
};

ApiClient::ApiClient(Endpoint endpoint, std::string token)
    : endpoint_(std::move(endpoint)), token_(std::move(token)) {
  if (endpoint_.tls) {
    ssl_ctx_.emplace(asio::ssl::context::tls_client);
    beast::error_code ec;
    if (endpoint_.ca_file.empty()) {
      ssl_ctx_->set_default_verify_paths(ec);
    } else {
      ssl_ctx_->load_verify_file(endpoint_.ca_file, ec);
    }
    // A bad CA file shows as a handshake failure on the first request.
    ssl_ctx_->set_verify_mode(asio::ssl::verify_peer, ec);
  }
}

ApiClient::~ApiClient() { Disconnect(); }

beast::tcp_stream& ApiClient::Lowest() { return tls_ ? beast::get_lowest_layer(*tls_) : *plain_; }

void ApiClient::Disconnect() {
  beast::error_code ignored;
  if (tls_) beast::get_lowest_layer(*tls_).socket().close(ignored);
  if (plain_) plain_->socket().close(ignored);
  tls_.reset();
  plain_.reset();
}

asio::awaitable<beast::error_code> ApiClient::Connect(std::chrono::milliseconds timeout) {
  asio::ip::tcp::resolver resolver(ioc_);
  auto [rec, results] =
      co_await resolver.async_resolve(endpoint_.host, endpoint_.port, use_nothrow);
  if (rec) co_return rec;
  if (endpoint_.tls) {
    tls_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ioc_, *ssl_ctx_);
  } else {
    plain_ = std::make_unique<beast::tcp_stream>(ioc_);
  }
  Lowest().expires_after(timeout);
  auto [cec, ep] = co_await Lowest().async_connect(results, use_nothrow);
  if (cec) co_return cec;
  Lowest().socket().set_option(asio::ip::tcp::no_delay(true), cec);
  if (!tls_) co_return beast::error_code{};
  beast::error_code ec;
  boost::system::error_code addr_ec;
  (void)asio::ip::make_address(endpoint_.host, addr_ec);
  if (addr_ec) {  // A name, not an address literal: send SNI.
    SSL_set_tlsext_host_name(tls_->native_handle(), endpoint_.host.c_str());
  }
  tls_->set_verify_callback(asio::ssl::host_name_verification(endpoint_.host), ec);
  if (ec) co_return ec;
  auto [hec] = co_await tls_->async_handshake(asio::ssl::stream_base::client, use_nothrow);
  co_return hec;
}

asio::awaitable<void> ApiClient::Run(Attempt& a) {
  if (!plain_ && !tls_) {
    if (auto ec = co_await Connect(a.timeout)) {
      a.ec = ec;
      a.where = "connect";
      co_return;
    }
  } else {
    a.reused = true;
  }
  http::request<http::string_body> req(a.verb, std::string(a.target), 11);
  req.set(http::field::host, absl::StrCat(endpoint_.host, ":", endpoint_.port));
  req.set(http::field::user_agent, "kf-fanout-bench/0.1");
  req.set(http::field::accept, "application/json, */*");
  if (!token_.empty()) req.set(http::field::authorization, absl::StrCat("Bearer ", token_));
  for (const auto& [field, value] : headers_) req.set(field, value);
  if (a.make_body != nullptr && *a.make_body) {
    req.set(http::field::content_type, std::string(a.content_type));
    req.body() = (*a.make_body)();
  }
  req.prepare_payload();
  Lowest().expires_after(a.timeout);
  beast::error_code ec;
  if (tls_) {
    std::tie(ec, std::ignore) = co_await http::async_write(*tls_, req, use_nothrow);
  } else {
    std::tie(ec, std::ignore) = co_await http::async_write(*plain_, req, use_nothrow);
  }
  if (ec) {
    a.ec = ec;
    a.where = "write";
    co_return;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxBody);
  if (tls_) {
    std::tie(ec, std::ignore) =
        co_await http::async_read_header(*tls_, buffer, parser, use_nothrow);
  } else {
    std::tie(ec, std::ignore) =
        co_await http::async_read_header(*plain_, buffer, parser, use_nothrow);
  }
  a.answered = buffer.size() > 0 || parser.got_some();
  if (!ec) {
    if (tls_) {
      std::tie(ec, std::ignore) = co_await http::async_read(*tls_, buffer, parser, use_nothrow);
    } else {
      std::tie(ec, std::ignore) = co_await http::async_read(*plain_, buffer, parser, use_nothrow);
    }
  }
  if (ec) {
    a.ec = ec;
    a.where = "read";
    co_return;
  }
  a.response.status = static_cast<int>(parser.get().result_int());
  a.response.body = std::move(parser.get().body());
  if (!parser.get().keep_alive()) Disconnect();
}

void ApiClient::SetHeader(http::field field, std::string value) {
  for (auto& [f, v] : headers_) {
    if (f == field) {
      v = std::move(value);
      return;
    }
  }
  headers_.emplace_back(field, std::move(value));
}

absl::StatusOr<ApiClient::Response> ApiClient::Request(
    http::verb verb, std::string_view target, const std::function<std::string()>& make_body,
    std::string_view content_type, std::chrono::milliseconds timeout) {
  for (int attempt = 0;; ++attempt) {
    Attempt a{verb, target, &make_body, content_type, timeout};
    std::exception_ptr failure;
    asio::co_spawn(ioc_, Run(a), [&failure](std::exception_ptr e) { failure = e; });
    ioc_.restart();
    ioc_.run();
    if (failure) {
      Disconnect();
      return absl::InternalError(
          absl::StrCat("request to ", ToAbsl(target), " failed unexpectedly"));
    }
    if (!a.ec) return std::move(a.response);
    Disconnect();
    if (a.reused && !a.answered && attempt == 0) continue;  // A stale keep-alive connection.
    return absl::UnavailableError(
        absl::StrCat(ToAbsl(target), ": ", a.where, ": ", a.ec.message()));
  }
}

}  // namespace kf::tools
