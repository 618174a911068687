#include "proxy/edge/tls_server_stream.h"

#include <openssl/bio.h>
#include <openssl/err.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/buffers_suffix.hpp>
#include <cstring>
#include <limits>

#include "common/use_nothrow.h"
#include "proxy/edge/peer_state.h"

namespace kf {
namespace {

// A socket read has room for what the socket already holds, between these two: a quiet
// connection's read waits with the small room, however large its last read was; a burst is
// read a record's worth at a time (a record is at most 16 KiB and 256 bytes of overhead).
constexpr size_t kSmallRead = 512;
constexpr size_t kLargeRead = 17 * 1024;
// The most of a client's last flight (and what follows it) read before OpenSSL takes it, and
// the room of each read: a flight with one certificate is about 1 KiB.
constexpr size_t kMaxLastFlight = 64 * 1024;
constexpr size_t kFlightRead = 2048;
}  // namespace

TlsServerStream::TlsServerStream(beast::tcp_stream tcp, SSL_CTX* ctx)
    : tcp_(std::move(tcp)), ssl_(SSL_new(ctx)) {
  if (ssl_ == nullptr) return;  // Handshake() reports it.
  SSL_set_mode(ssl_, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_set_options(ssl_, SSL_OP_NO_RENEGOTIATION);
  BIO* bio = BIO_new(Method());
  BIO_set_data(bio, this);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl_, bio, bio);  // The SSL owns it (one reference for both directions).
  SSL_set_accept_state(ssl_);
}

TlsServerStream::~TlsServerStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
}

char* TlsServerStream::Scratch() {
  thread_local std::array<char, kRecord> scratch;
  return scratch.data();
}

BIO_METHOD* TlsServerStream::Method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kf-tls-server");
    BIO_meth_set_read(m, &TlsServerStream::BioRead);
    BIO_meth_set_write(m, &TlsServerStream::BioWrite);
    BIO_meth_set_ctrl(m, &TlsServerStream::BioCtrl);
    return m;
  }();
  return method;
}

int TlsServerStream::BioRead(BIO* bio, char* data, int size) {
  auto* s = static_cast<TlsServerStream*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (s->in_.size() == 0) {
    if (s->eof_) return 0;
    BIO_set_retry_read(bio);
    return -1;
  }
  const size_t n = std::min(s->in_.size(), static_cast<size_t>(std::max(size, 0)));
  std::memcpy(data, s->in_.data().data(), n);
  s->in_.consume(n);
  return static_cast<int>(n);
}

int TlsServerStream::BioWrite(BIO* bio, const char* data, int size) {
  auto* s = static_cast<TlsServerStream*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  if (size <= 0) return 0;
  // Always taken: a write's plaintext is bounded (kMaxWrite), so is what it makes.
  (s->writing_ ? s->out_next_ : s->out_).append(data, static_cast<size_t>(size));
  return size;
}

long TlsServerStream::BioCtrl(BIO* bio, int cmd, long /*num*/, void* /*ptr*/) {  // NOLINT
  auto* s = static_cast<TlsServerStream*>(BIO_get_data(bio));
  switch (cmd) {
    case BIO_CTRL_FLUSH:
      return 1;
    case BIO_CTRL_PENDING:
      return static_cast<long>(s->in_.size());  // NOLINT(google-runtime-int)
    case BIO_CTRL_WPENDING:
      return static_cast<long>(s->out_.size() + s->out_next_.size());  // NOLINT
    default:
      return 0;
  }
}

beast::error_code TlsServerStream::SslError(int ret) {
  const int err = SSL_get_error(ssl_, ret);
  if (err == SSL_ERROR_ZERO_RETURN) return asio::error::eof;  // The peer's close_notify.
  const unsigned long code = ERR_get_error();                 // NOLINT(google-runtime-int)
  ERR_clear_error();
  if (err == SSL_ERROR_SYSCALL || (err == SSL_ERROR_SSL && eof_ &&
                                   ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING)) {
    if (read_ec_ && read_ec_ != asio::error::eof) return read_ec_;  // A timeout, a cancel.
    if (code == 0 || eof_) return asio::ssl::error::stream_truncated;
  }
  if (code == 0) return asio::ssl::error::unexpected_result;
  return beast::error_code(static_cast<int>(code), asio::error::get_ssl_category());
}

TlsServerStream::Result TlsServerStream::TryRead(asio::mutable_buffer into) {
  if (into.size() == 0) return {};
  if (read_ec_ && read_ec_ != asio::error::eof) {
    Result r{Step::kDone, read_ec_, 0};
    read_ec_ = {};  // A timeout or cancel ends this read only.
    return r;
  }
  size_t got = 0;
  const int size = static_cast<int>(std::min(into.size(), size_t{std::numeric_limits<int>::max()}));
  ERR_clear_error();
  const int ret = SSL_read_ex(ssl_, into.data(), static_cast<size_t>(size), &got);
  if (ret == 1) return {Step::kDone, {}, got};
  if (SSL_get_error(ssl_, ret) == SSL_ERROR_WANT_READ && !eof_) return {Step::kRead, {}, 0};
  return {Step::kDone, SslError(ret), 0};
}

asio::mutable_buffer TlsServerStream::PrepareRead() {
  // The bytes the socket holds now (FIONREAD): none for a connection that waits for its
  // client's next request, a keep-alive connection's or an idle watch's, which then keeps only
  // the small room however long it waits.
  beast::error_code ec;
  const size_t ready = tcp_.socket().available(ec);
  const size_t room = std::clamp(ec ? size_t{0} : ready, kSmallRead, kLargeRead);
  if (in_.size() == 0 && in_.capacity() > room) in_.shrink_to_fit();  // A burst's room.
  return in_.prepare(room);
}

void TlsServerStream::Received(const beast::error_code& ec, size_t n) {
  if (ec) {
    read_ec_ = ec;
    if (ec == asio::error::eof) eof_ = true;
    return;
  }
  in_.commit(n);
}

bool TlsServerStream::Encrypt(asio::const_buffer plain, beast::error_code& ec) {
  if (ssl_ == nullptr) {
    ec = asio::error::bad_descriptor;
    return false;
  }
  size_t written = 0;
  // Room for the records (a header and a tag each, at most 64 bytes with TLS 1.2's padding).
  out_.reserve(out_.size() + plain.size() + (plain.size() / kRecord + 1) * 64);
  ERR_clear_error();
  const int ret = SSL_write_ex(ssl_, plain.data(), plain.size(), &written);
  if (ret != 1) {
    ec = SslError(ret);
    return false;
  }
  return true;
}

bool TlsServerStream::EncryptAll(std::span<const asio::const_buffer> pieces,
                                 beast::error_code& ec) {
  if (writing_) {  // Not while a write is under way: its bytes would be overtaken.
    ec = asio::error::in_progress;
    return false;
  }
  // Record by record as async_write_some takes them (Plaintext: small pieces gathered, a large
  // one as it is).
  for (beast::buffers_suffix<std::span<const asio::const_buffer>> rest(pieces);
       asio::buffer_size(rest) > 0;) {
    const asio::const_buffer plain = Plaintext(rest);
    if (!Encrypt(plain, ec)) return false;
    rest.consume(plain.size());
  }
  return true;
}

TlsServerStream::TryWriteResult TlsServerStream::Wrote(size_t n) {
  if (n >= out_.size()) {
    std::string().swap(out_);
    return TryWriteResult::kWritten;
  }
  out_.erase(0, n);
  return TryWriteResult::kHeld;
}

TlsServerStream::TryWriteResult TlsServerStream::TryWrite(
    std::span<const asio::const_buffer> pieces, beast::error_code& ec) {
  if (!EncryptAll(pieces, ec)) return TryWriteResult::kFailed;
  if (out_.empty()) return TryWriteResult::kWritten;
  // A synchronous write that returns what the kernel took instead of waiting (the socket's
  // user-visible non-blocking mode; its asynchronous operations are not affected).
  auto& socket = tcp_.socket();
  if (!socket.non_blocking()) socket.non_blocking(true, ec);
  size_t written = 0;
  if (!ec) written = socket.write_some(asio::buffer(out_), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
  if (ec) return TryWriteResult::kFailed;
  return Wrote(written);
}

asio::awaitable<beast::error_code> TlsServerStream::Flush() {
  if (out_.empty()) co_return beast::error_code{};
  writing_ = true;
  auto [ec, n] = co_await asio::async_write(tcp_, asio::buffer(out_), use_nothrow);
  Sent();
  co_return ec;
}

void TlsServerStream::Sent() {
  writing_ = false;
  std::string().swap(out_);  // A quiet watch keeps no room (an allocation per write instead).
  if (!out_next_.empty()) std::swap(out_, out_next_);
}

bool TlsServerStream::ReadAvailable() {
  auto& socket = tcp_.socket();
  beast::error_code ec;
  if (!socket.non_blocking()) socket.non_blocking(true, ec);
  while (!ec && !eof_ && in_.size() < kMaxLastFlight) {
    const size_t n = socket.read_some(in_.prepare(kFlightRead), ec);
    in_.commit(n);
    if (ec == asio::error::eof) Received(ec, 0);
  }
  return eof_ || ec == asio::error::connection_reset;
}

asio::awaitable<bool> TlsServerStream::ClientLeftUnfinished() {
  const auto received = [this] {
    const auto bytes = in_.data();
    return std::string_view(static_cast<const char*>(bytes.data()), bytes.size());
  };
  bool ended = ReadAvailable();
  // Waits while what came is the flight alone, or the flight and an alert without the end of
  // the stream yet (Go's client closes the socket right after its close_notify).
  asio::steady_timer timer(tcp_.get_executor(), kLastFlightWait);
  while (!ended && (EndsWithFinished(received()) || ClosedRightAfterFinished(received())) &&
         timer.expiry() > asio::steady_timer::clock_type::now()) {
    using namespace asio::experimental::awaitable_operators;
    (void)co_await (tcp_.socket().async_wait(asio::socket_base::wait_read, use_nothrow) ||
                    timer.async_wait(use_nothrow));
    const size_t before = in_.size();
    ended = ReadAvailable();
    if (in_.size() == before && !ended) break;  // The wait ended with nothing new.
  }
  // Only the flight, close_notify and the end: nothing was or can be asked.
  const bool left = ended && ClosedRightAfterFinished(received());
  co_return left;
}

asio::awaitable<beast::error_code> TlsServerStream::Handshake() {
  if (ssl_ == nullptr) co_return asio::error::no_memory;
  for (;;) {
    // Once its Finished is written, OpenSSL 3.0 waits for the client's last flight in
    // TLS_ST_EARLY_DATA (whether early data is on or not), having asked for bytes when in_ was
    // empty: in_ starts at a record of that flight, none of it taken yet. Looked at once.
    if (!last_flight_checked_ && in_.size() > 0 && SSL_version(ssl_) == TLS1_3_VERSION &&
        SSL_get_state(ssl_) == TLS_ST_EARLY_DATA) {
      last_flight_checked_ = true;
      const bool left = co_await ClientLeftUnfinished();
      if (left) {
        abandoned_ = true;
        co_return asio::error::eof;
      }
    }
    ERR_clear_error();
    const int ret = SSL_do_handshake(ssl_);
    const int err = ret == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl_, ret);
    if (!out_.empty()) {  // What the handshake has to say goes first, whatever comes next.
      writing_ = true;
      auto [ec, n] = co_await asio::async_write(tcp_, asio::buffer(out_), use_nothrow);
      Sent();
      if (ec) co_return ec;
    }
    if (ret == 1) {
      if (in_.size() == 0) in_.shrink_to_fit();  // No room held until the first read.
      co_return beast::error_code{};
    }
    if (err != SSL_ERROR_WANT_READ || eof_) co_return SslError(ret);
    auto [ec, n] = co_await tcp_.async_read_some(PrepareRead(), use_nothrow);
    Received(ec, n);
    if (ec && ec != asio::error::eof) co_return ec;
  }
}

asio::awaitable<void> TlsServerStream::Shutdown() {
  if (ssl_ == nullptr || !SSL_is_init_finished(ssl_) || writing_) co_return;
  ERR_clear_error();
  (void)SSL_shutdown(ssl_);  // Queues close_notify; the peer's is not waited for.
  ERR_clear_error();
  if (out_.empty()) co_return;
  writing_ = true;
  (void)co_await asio::async_write(tcp_, asio::buffer(out_), use_nothrow);  // Best effort.
  Sent();
}

}  // namespace kf
