// ApiClient: a blocking HTTP/1.1 client for the benchmark's and the load test's control traffic
// (creating objects, the churn writes, /metrics scrapes): one keep-alive connection, plain or TLS
// (verifying the server against a CA file), a bearer token, and a deadline on every request.
//
// Blocking by design: it owns a private io_context and runs it until the request completes, so
// each thread that writes uses its own ApiClient. Not thread-safe.
#ifndef KUBE_FANOUT_TESTS_TOOLS_API_CLIENT_H_
#define KUBE_FANOUT_TESTS_TOOLS_API_CLIENT_H_

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kf::tools {

namespace asio = boost::asio;
namespace beast = boost::beast;

// Where to connect: from "http://HOST:PORT", "https://HOST:PORT" or "HOST:PORT" (plain).
struct Endpoint {
  bool tls = false;
  std::string host;
  std::string port;
  std::string ca_file;  // For TLS; empty: the system's trust store.

  static absl::StatusOr<Endpoint> Parse(std::string_view url);
};

class ApiClient {
 public:
  ApiClient(Endpoint endpoint, std::string token);
  ~ApiClient();
  ApiClient(const ApiClient&) = delete;
  ApiClient& operator=(const ApiClient&) = delete;

  struct Response {
    int status = 0;
    std::string body;
  };
  // One request; `make_body` runs just before the request is written (after connecting), so a
  // timestamp it embeds is the moment of sending. A request on a reused connection that fails
  // before any answer is retried once on a new connection.
  absl::StatusOr<Response> Request(beast::http::verb verb, std::string_view target,
                                   const std::function<std::string()>& make_body = nullptr,
                                   std::string_view content_type = "",
                                   std::chrono::milliseconds timeout = std::chrono::seconds(30));
  absl::StatusOr<Response> Get(std::string_view target) {
    return Request(beast::http::verb::get, target);
  }
  // A header sent with every later request (replacing the default of that field, e.g. Accept).
  void SetHeader(beast::http::field field, std::string value);

 private:
  struct Attempt;
  asio::awaitable<void> Run(Attempt& attempt);
  asio::awaitable<beast::error_code> Connect(std::chrono::milliseconds timeout);
  void Disconnect();
  beast::tcp_stream& Lowest();

  const Endpoint endpoint_;
  const std::string token_;
  std::vector<std::pair<beast::http::field, std::string>> headers_;
  asio::io_context ioc_;
  std::optional<asio::ssl::context> ssl_ctx_;
  std::unique_ptr<beast::tcp_stream> plain_;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls_;
};

}  // namespace kf::tools

#endif  // KUBE_FANOUT_TESTS_TOOLS_API_CLIENT_H_
