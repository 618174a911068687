// AnyStream: one connection, plain TCP or TLS over TCP, behind one type, so the HTTP code
// (Beast) is written once for both. Models AsyncReadStream and AsyncWriteStream. A client's TLS
// is a TlsServerStream (no fixed buffers per connection); an upstream's is Asio's stream.
//
// Owned by the session or upstream lease that holds it; used from its io_context's thread only.
// Timeouts are those of the underlying beast::tcp_stream (tcp().expires_after()).
#ifndef KUBE_FANOUT_EDGE_ANY_STREAM_H_
#define KUBE_FANOUT_EDGE_ANY_STREAM_H_

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <memory>
#include <type_traits>
#include <variant>

#include "proxy/edge/tls_server_stream.h"

namespace kf {

namespace asio = boost::asio;
namespace beast = boost::beast;

class AnyStream {
 public:
  using executor_type = beast::tcp_stream::executor_type;
  using TlsStream = beast::ssl_stream<beast::tcp_stream>;

  explicit AnyStream(beast::tcp_stream plain) : stream_(std::move(plain)) {}
  explicit AnyStream(TlsStream tls) : stream_(std::move(tls)) {}
  explicit AnyStream(std::unique_ptr<TlsServerStream> tls) : stream_(std::move(tls)) {}

  executor_type get_executor() { return tcp().get_executor(); }
  bool is_tls() const { return !std::holds_alternative<beast::tcp_stream>(stream_); }
  beast::tcp_stream& tcp() {
    if (auto* p = std::get_if<beast::tcp_stream>(&stream_)) return *p;
    if (auto* p = std::get_if<std::unique_ptr<TlsServerStream>>(&stream_)) return (*p)->tcp();
    return beast::get_lowest_layer(std::get<TlsStream>(stream_));
  }
  // The connection's OpenSSL object; null over plain TCP.
  SSL* ssl() {
    if (auto* p = std::get_if<std::unique_ptr<TlsServerStream>>(&stream_)) {
      return (*p)->native_handle();
    }
    if (auto* p = std::get_if<TlsStream>(&stream_)) return p->native_handle();
    return nullptr;
  }
  // The client connection's TLS, if it is one.
  TlsServerStream* tls_server() {
    auto* p = std::get_if<std::unique_ptr<TlsServerStream>>(&stream_);
    return p != nullptr ? p->get() : nullptr;
  }
  // Over plain TCP: writes what the kernel takes now, without waiting (the socket's
  // user-visible non-blocking mode; its asynchronous operations are not affected), and returns
  // how many bytes that was. `ec` is set only for a real error, not for a full socket.
  template <class ConstBufferSequence>
  size_t WriteWithoutWaiting(const ConstBufferSequence& buffers, beast::error_code& ec) {
    auto& socket = tcp().socket();
    ec = {};
    if (!socket.non_blocking()) socket.non_blocking(true, ec);
    size_t written = 0;
    if (!ec) written = socket.write_some(buffers, ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
    return written;
  }
  // The server's side of the TLS handshake (a plain connection has none).
  asio::awaitable<beast::error_code> ServerHandshake();

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return asio::async_initiate<Token, void(beast::error_code, std::size_t)>(
        [this](auto handler, const MutableBufferSequence& b) {
          std::visit([&](auto& s) { Deref(s).async_read_some(b, std::move(handler)); }, stream_);
        },
        token, buffers);
  }

  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return asio::async_initiate<Token, void(beast::error_code, std::size_t)>(
        [this](auto handler, const ConstBufferSequence& b) {
          std::visit([&](auto& s) { Deref(s).async_write_some(b, std::move(handler)); }, stream_);
        },
        token, buffers);
  }

  // Completes once a read would not wait: the socket is readable (or failed), or bytes are
  // already buffered above it (TLS). Holds no buffer meanwhile, and a smaller operation than a
  // read: what a connection that only might be read (a watch's client) waits with. May
  // complete without anything to read (a TLS record with no application data); cancelled by
  // Cancel().
  template <class Token>
  auto async_wait_readable(Token&& token) {
    return asio::async_initiate<Token, void(beast::error_code)>(
        [this](auto handler) {
          const bool buffered = std::holds_alternative<TlsStream>(stream_) ||
                                (tls_server() != nullptr && tls_server()->input_buffered());
          if (buffered) {
            // (Never completes inside the initiating call.)
            asio::post(tcp().get_executor(),
                       [h = std::move(handler)]() mutable { std::move(h)(beast::error_code{}); });
            return;
          }
          tcp().socket().async_wait(asio::socket_base::wait_read, std::move(handler));
        },
        token);
  }

  // Ends the connection: a bounded TLS close_notify exchange when TLS, then the socket closes.
  asio::awaitable<void> Close(std::chrono::milliseconds tls_shutdown_budget);
  // Cancels pending operations (the owner's coroutine then sees operation_aborted).
  void Cancel() { tcp().cancel(); }

 private:
  template <class S>
  static auto& Deref(S& s) {
    if constexpr (std::is_same_v<S, std::unique_ptr<TlsServerStream>>) {
      return *s;
    } else {
      return s;
    }
  }

  std::variant<beast::tcp_stream, TlsStream, std::unique_ptr<TlsServerStream>> stream_;
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_ANY_STREAM_H_
