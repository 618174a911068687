// TlsServerStream: the server side of one TLS connection, OpenSSL driven straight over a
// beast::tcp_stream, holding only the bytes in flight. Asio's ssl::stream keeps four 17 KiB
// buffers for a connection's whole life (two vectors of its own and a BIO pair's), 68 KiB per
// idle watch; here ciphertext waits in buffers sized to what is pending, given back once
// empty, and OpenSSL's own record buffers go back while idle (SSL_MODE_RELEASE_BUFFERS).
//
// Models AsyncReadStream and AsyncWriteStream as Asio's stream does (the same errors: eof after
// the peer's close_notify, ssl::error::stream_truncated for an end without one), and keeps
// tcp_stream's timeouts (tcp().expires_after()) and cancellation (tcp().cancel()). One read and
// one write may be under way at once (full duplex), from the connection's thread only. A write
// takes at most kMaxWrite plaintext bytes (write_some semantics), gathering small pieces into
// one record; renegotiation is refused.
//
// Used by AnyStream for client connections; upstream connections keep Asio's stream.
#ifndef KUBE_FANOUT_EDGE_TLS_SERVER_STREAM_H_
#define KUBE_FANOUT_EDGE_TLS_SERVER_STREAM_H_

#include <openssl/ssl.h>

#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace kf {

namespace asio = boost::asio;
namespace beast = boost::beast;

class TlsServerStream {
 public:
  // Plaintext taken by one write_some at most: a few records, so the ciphertext waiting for the
  // socket stays small.
  static constexpr size_t kMaxWrite = 64 * 1024;
  // Pieces smaller than a record are gathered into one record of at most this.
  static constexpr size_t kRecord = 16 * 1024;
  // How long a TLS 1.3 handshake waits, once the client's last flight is here, for what the
  // client sends next, before the server takes the flight. A client that asks something ends
  // the wait with its first bytes; Go's transport closes a connection it dialed and does not
  // need right after its handshake, and a close_notify seen in time spares the flight's
  // certificate parse and signature check (ClientLeftUnfinished).
  static constexpr std::chrono::milliseconds kLastFlightWait{10};

  // `ctx`'s settings (certificate callback, ALPN, client certificates) apply to the connection.
  TlsServerStream(beast::tcp_stream tcp, SSL_CTX* ctx);
  ~TlsServerStream();
  TlsServerStream(const TlsServerStream&) = delete;
  TlsServerStream& operator=(const TlsServerStream&) = delete;

  using executor_type = beast::tcp_stream::executor_type;
  executor_type get_executor() { return tcp_.get_executor(); }
  SSL* native_handle() { return ssl_; }
  // Something above the socket is waiting to be read (ciphertext not yet taken by OpenSSL,
  // plaintext OpenSSL has decrypted, or the socket's end): a read would not wait for the
  // socket to become readable.
  bool input_buffered() const { return in_.size() > 0 || eof_ || SSL_pending(ssl_) > 0; }
  beast::tcp_stream& tcp() { return tcp_; }

  // The server's handshake; an error as Asio's would be.
  asio::awaitable<beast::error_code> Handshake();
  // The handshake ended with eof because the client had closed the connection right after its
  // Finished, before the server took its last flight (ClientLeftUnfinished): a connection the
  // client dialed and then did not need, not a handshake that failed.
  bool abandoned() const { return abandoned_; }
  // Sends close_notify (within the tcp_stream's timeout); does not wait for the peer's.
  asio::awaitable<void> Shutdown();

  template <class MutableBufferSequence, class Token>
  auto async_read_some(const MutableBufferSequence& buffers, Token&& token) {
    return asio::async_compose<Token, void(beast::error_code, size_t)>(
        ReadOp{this, FirstNonEmpty<asio::mutable_buffer>(buffers)}, token, tcp_);
  }

  template <class ConstBufferSequence, class Token>
  auto async_write_some(const ConstBufferSequence& buffers, Token&& token) {
    return asio::async_compose<Token, void(beast::error_code, size_t)>(
        WriteOp<ConstBufferSequence>{this, buffers}, token, tcp_);
  }

  // Encrypts all of `pieces` and writes what the socket takes now, without waiting (a watch's
  // events from its wake-up). kHeld: the rest waits as ciphertext for Flush(), which must come
  // before any other write. Only while no write is under way.
  enum class TryWriteResult { kWritten, kHeld, kFailed };
  TryWriteResult TryWrite(std::span<const asio::const_buffer> pieces, beast::error_code& ec);
  // TryWrite in two steps, for a send the caller makes (a burst's batched sends): Encrypt all
  // of `pieces` (false: failed, `ec` set), send what ciphertext() holds, then say with Wrote how
  // much the socket took; kHeld as TryWrite's. Only while no write is under way, and nothing
  // else may write or read in between.
  bool EncryptAll(std::span<const asio::const_buffer> pieces, beast::error_code& ec);
  std::string_view ciphertext() const { return out_; }
  TryWriteResult Wrote(size_t n);
  // Sends what TryWrite held (within the tcp_stream's timeout).
  asio::awaitable<beast::error_code> Flush();

  // What the connection holds on the heap now besides OpenSSL's state (for tests).
  size_t held_bytes() const {
    const size_t inline_room = std::string().capacity();
    return in_.capacity() + (out_.capacity() > inline_room ? out_.capacity() : 0) +
           (out_next_.capacity() > inline_room ? out_next_.capacity() : 0);
  }

 private:
  enum class Step { kDone, kRead };
  struct Result {
    Step step = Step::kDone;
    beast::error_code ec;
    size_t n = 0;
  };

  template <class Buffer, class Sequence>
  static Buffer FirstNonEmpty(const Sequence& buffers) {
    for (auto it = asio::buffer_sequence_begin(buffers); it != asio::buffer_sequence_end(buffers);
         ++it) {
      Buffer b(*it);
      if (b.size() > 0) return b;
    }
    return Buffer();
  }

  // What one write takes: a large first piece as it is (up to kMaxWrite); small pieces gathered
  // into the thread's scratch record (SSL_write encrypts it at once, before the thread does
  // anything else).
  template <class Sequence>
  static asio::const_buffer Plaintext(const Sequence& buffers) {
    const asio::const_buffer first = FirstNonEmpty<asio::const_buffer>(buffers);
    if (first.size() >= kRecord)
      return asio::buffer(first.data(), std::min(first.size(), kMaxWrite));
    char* scratch = Scratch();
    size_t n = 0;
    for (auto it = asio::buffer_sequence_begin(buffers);
         it != asio::buffer_sequence_end(buffers) && n < kRecord; ++it) {
      n += asio::buffer_copy(asio::buffer(scratch + n, kRecord - n), asio::const_buffer(*it));
    }
    return asio::buffer(scratch, n);
  }
  static char* Scratch();

  // TLS 1.3, the server's flight sent, the start of the client's last flight here and none of
  // it taken by OpenSSL yet: true when the client sent that flight, close_notify and nothing
  // else, and closed (or reset) the socket. Reads what the socket has; while that is the whole
  // flight (or the flight and an alert) without the socket's end, waits up to kLastFlightWait for
  // more (a request ends the wait at once). The client's certificate and signature are then never
  // checked (about half of a handshake's CPU).
  asio::awaitable<bool> ClientLeftUnfinished();
  // Reads what the socket has now into in_, without waiting (bounded); true once the client's
  // end of the stream has come (its FIN, or a reset).
  bool ReadAvailable();
  // One step of a read: SSL_read into `into`; kRead: ciphertext is needed from the socket.
  Result TryRead(asio::mutable_buffer into);
  // Encrypts `plain` into out_; false: OpenSSL failed (ec set).
  bool Encrypt(asio::const_buffer plain, beast::error_code& ec);
  // Where the next socket read goes, sized to what the socket holds now (kSmallRead when
  // nothing).
  asio::mutable_buffer PrepareRead();
  void Received(const beast::error_code& ec, size_t n);
  // After out_ was sent: gives its room back; what OpenSSL wrote meanwhile becomes out_.
  void Sent();
  beast::error_code SslError(int ret);

  struct ReadOp {
    TlsServerStream* s;
    asio::mutable_buffer into;
    bool reading = false;
    bool started = false;

    template <class Self>
    void operator()(Self& self, beast::error_code ec = {}, size_t n = 0) {
      if (reading) {
        reading = false;
        s->Received(ec, n);
      }
      const Result r = s->TryRead(into);
      if (r.step == Step::kRead) {
        reading = started = true;
        s->tcp_.async_read_some(s->PrepareRead(), std::move(self));
        return;
      }
      if (!started) {  // Never complete inside the initiating call.
        started = true;
        asio::post(s->tcp_.get_executor(),
                   [self = std::move(self), r]() mutable { self.complete(r.ec, r.n); });
        return;
      }
      self.complete(r.ec, r.n);
    }
  };

  template <class Sequence>
  struct WriteOp {
    TlsServerStream* s;
    Sequence buffers;
    size_t taken = 0;
    bool sending = false;

    template <class Self>
    void operator()(Self& self, beast::error_code ec = {}, size_t /*n*/ = 0) {
      if (!sending) {
        const asio::const_buffer plain = Plaintext(buffers);  // Encrypted before anything else.
        taken = plain.size();
        if (taken == 0 || !s->Encrypt(plain, ec)) {
          asio::post(s->tcp_.get_executor(),
                     [self = std::move(self), ec]() mutable { self.complete(ec, 0); });
          return;
        }
        sending = true;
        s->writing_ = true;
        asio::async_write(s->tcp_, asio::buffer(s->out_), std::move(self));
        return;
      }
      s->Sent();
      self.complete(ec, ec ? 0 : taken);
    }
  };

  static BIO_METHOD* Method();
  static int BioRead(BIO* bio, char* data, int size);
  static int BioWrite(BIO* bio, const char* data, int size);
  static long BioCtrl(BIO* bio, int cmd, long num, void* ptr);  // NOLINT(google-runtime-int)

  beast::tcp_stream tcp_;
  SSL* ssl_ = nullptr;
  beast::flat_buffer in_;             // Ciphertext received, not yet taken by OpenSSL.
  std::string out_;                   // Ciphertext made, not yet sent (or being sent).
  std::string out_next_;              // Made while out_ is being sent.
  bool writing_ = false;              // out_ is being sent.
  bool eof_ = false;                  // The socket's end was read.
  bool abandoned_ = false;            // See abandoned().
  bool last_flight_checked_ = false;  // ClientLeftUnfinished was asked (once at most).
  beast::error_code read_ec_;         // The socket read's error, for an SSL_ERROR_SYSCALL.
};

}  // namespace kf

#endif  // KUBE_FANOUT_EDGE_TLS_SERVER_STREAM_H_
