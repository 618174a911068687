#include "proxy/edge/http1_response.h"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/status.hpp>
#include <cerrno>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/strings.h"
#include "common/use_nothrow.h"
#include "proxy/edge/deadlines.h"
#include "proxy/edge/request_parser.h"

namespace kf {
namespace {

namespace http = beast::http;
// Go's net/http buffers a handler's output up to this size; an answer that fits goes out with a
// Content-Length, a longer one chunked.
constexpr size_t kGoChunkingThreshold = 2048;
// Buffers per gathered write: a large list is many shared pieces.
constexpr size_t kBuffersPerWrite = 512;

std::string ChunkSize(size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), kHex[n & 15]);
    n >>= 4;
  } while (n > 0);
  s += "\r\n";
  return s;
}

}  // namespace

std::string Http1Response::SerializeHead(const ResponseHead& head) {
  const bool http10 = request_->version == 10;
  const bool head_only = request_->method == http::verb::head;
  std::string reason = head.reason;
  if (reason.empty()) reason = std::string(http::obsolete_reason(http::int_to_status(head.status)));
  std::string out =
      absl::StrCat(http10 ? "HTTP/1.0 " : "HTTP/1.1 ", head.status, " ", reason, "\r\n");
  for (const auto& f : head.fields) {
    absl::StrAppend(&out, ToAbsl(f.name_string()), ": ", ToAbsl(f.value()), "\r\n");
  }
  if (head.status < 200) return out + "\r\n";  // An interim or upgrade head: as relayed.
  if (head.fields.find(http::field::date) == head.fields.end()) {
    absl::StrAppend(&out, "Date: ",
                    absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", absl::Now(), absl::UTCTimeZone()),
                    "\r\n");
  }
  const bool has_length = head.fields.find(http::field::content_length) != head.fields.end();
  using Framing = ResponseHead::Framing;
  if (!StatusHasBody(head.status)) {
    body_ = Body::kNone;
  } else if (head.framing == Framing::kLength ||
             (head.framing == Framing::kWhole &&
              (head.length <= kGoChunkingThreshold || head_only))) {
    body_ = head_only ? Body::kNone : Body::kLength;
    if (!has_length) absl::StrAppend(&out, "Content-Length: ", head.length, "\r\n");
  } else if (head_only) {
    body_ = Body::kNone;
  } else if (!http10) {
    body_ = Body::kChunked;
    out += "Transfer-Encoding: chunked\r\n";
  } else {
    body_ = Body::kUntilClose;
    keep_alive_ = false;
  }
  if (!http10 && !keep_alive_) out += "Connection: close\r\n";
  if (http10 && keep_alive_) out += "Connection: keep-alive\r\n";
  out += "\r\n";
  return out;
}

asio::awaitable<beast::error_code> Http1Response::WriteHead(ResponseHead head) {
  if (request_ == nullptr) co_return asio::error::operation_not_supported;
  // A connection whose request body was not all read cannot carry the next request (Go's
  // server closes it too when a handler answers without reading the body).
  keep_alive_ = request_->keep_alive && !close_after_ && !stop_.requested && request_->body.done();
  status_ = head.status;
  const std::string bytes = SerializeHead(head);
  const std::array<asio::const_buffer, 1> buffers{asio::buffer(bytes)};
  co_return co_await Write(buffers);
}

asio::awaitable<beast::error_code> Http1Response::WriteBody(
    std::span<const asio::const_buffer> pieces) {
  const size_t n = asio::buffer_size(pieces);
  if (body_ == Body::kNone || n == 0) co_return beast::error_code{};
  body_bytes_ += n;
  if (body_ != Body::kChunked) co_return co_await Write(pieces);
  static constexpr std::string_view kCrlf = "\r\n";
  const std::string size = ChunkSize(n);
  // Inline for the usual few pieces: no allocation per write on a watch's hot path.
  absl::InlinedVector<asio::const_buffer, 18> framed;
  framed.push_back(asio::buffer(size));
  framed.insert(framed.end(), pieces.begin(), pieces.end());
  framed.push_back(asio::buffer(kCrlf));
  co_return co_await Write(framed);
}

bool Http1Response::can_write_now() const {
  // Asio's TLS stream cannot write without waiting; a client's TlsServerStream can.
  return (!stream_.is_tls() || stream_.tls_server() != nullptr) && status_ != 0 && !ended_ &&
         !failed_ && held_.empty() && !tls_held_ && queued_ == nullptr;
}

Response::TryWrite Http1Response::TryWriteBody(std::span<const asio::const_buffer> pieces) {
  return DirectWrite(pieces, nullptr);
}

Response::TryWrite Http1Response::TryWriteBodyOrQueue(std::span<const asio::const_buffer> pieces,
                                                      WriteDone& done) {
  return DirectWrite(pieces, &done);
}

Response::TryWrite Http1Response::DirectWrite(std::span<const asio::const_buffer> pieces,
                                              WriteDone* done) {
  if (!can_write_now()) return TryWrite::kUnsupported;
  const size_t n = asio::buffer_size(pieces);
  if (body_ == Body::kNone || n == 0) return TryWrite::kWritten;
  body_bytes_ += n;
  static constexpr std::string_view kCrlf = "\r\n";
  absl::InlinedVector<asio::const_buffer, 18> framed;
  if (body_ == Body::kChunked) {
    chunk_size_ = ChunkSize(n);
    framed.push_back(asio::buffer(chunk_size_));
  }
  framed.insert(framed.end(), pieces.begin(), pieces.end());
  if (body_ == Body::kChunked) framed.push_back(asio::buffer(kCrlf));
  // What goes to the socket: the chunk's pieces, or over TLS its records, encrypted at once.
  beast::error_code ec;
  std::array<asio::const_buffer, 1> records;
  std::span<const asio::const_buffer> out = framed;
  TlsServerStream* tls = stream_.tls_server();
  if (tls != nullptr) {
    if (!tls->EncryptAll(framed, ec)) {
      failed_ = true;
      return TryWrite::kFailed;
    }
    records[0] = asio::buffer(tls->ciphertext());
    if (records[0].size() == 0) return TryWrite::kWritten;
    out = records;
  }
  if (done != nullptr && BatchedSends::Queue(stream_.tcp().socket().native_handle(), out, this)) {
    queued_ = done;
    return TryWrite::kQueued;
  }
  const size_t written = stream_.WriteWithoutWaiting(out, ec);
  if (ec) {
    failed_ = true;
    return TryWrite::kFailed;
  }
  return tls != nullptr ? TlsWrote(*tls, written) : HoldRest(framed, written);
}

Response::TryWrite Http1Response::TlsWrote(TlsServerStream& tls, size_t written) {
  if (tls.Wrote(written) == TlsServerStream::TryWriteResult::kWritten) return TryWrite::kWritten;
  tls_held_ = true;  // The rest of the records wait in the TLS stream (FinishWrite).
  return TryWrite::kHeld;
}

template <class Buffers>
Response::TryWrite Http1Response::HoldRest(const Buffers& framed, size_t written) {
  // What is left, for FinishWrite (a client behind, or more buffers than one call takes).
  size_t first = 0;
  while (first < framed.size() && written >= framed[first].size()) {
    written -= framed[first++].size();
  }
  if (first == framed.size()) return TryWrite::kWritten;
  held_.assign(framed.begin() + static_cast<std::ptrdiff_t>(first), framed.end());
  held_.front() += written;
  return TryWrite::kHeld;
}

void Http1Response::Sent(int64_t result, std::span<const iovec> sent) {
  WriteDone* done = std::exchange(queued_, nullptr);
  TryWrite outcome;
  if (result < 0 && result != -EAGAIN && result != -EWOULDBLOCK) {
    failed_ = true;
    outcome = TryWrite::kFailed;
  } else if (TlsServerStream* tls = stream_.tls_server()) {
    outcome = TlsWrote(*tls, result > 0 ? static_cast<size_t>(result) : 0);
  } else {
    absl::InlinedVector<asio::const_buffer, BatchedSends::kMaxPieces> framed;
    for (const iovec& v : sent) framed.emplace_back(v.iov_base, v.iov_len);
    outcome = HoldRest(framed, result > 0 ? static_cast<size_t>(result) : 0);
  }
  done->Written(outcome);
}

asio::awaitable<beast::error_code> Http1Response::FinishWrite() {
  if (tls_held_) {
    tls_held_ = false;
    stream_.tcp().expires_after(kWriteTimeout);
    const beast::error_code ec = co_await stream_.tls_server()->Flush();
    if (ec) failed_ = true;
    co_return ec;
  }
  if (held_.empty()) co_return beast::error_code{};
  const beast::error_code ec = co_await Write(held_);
  std::vector<asio::const_buffer>().swap(held_);  // No room kept while the client keeps up.
  co_return ec;
}

asio::awaitable<beast::error_code> Http1Response::End() {
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
  if (body_ == Body::kChunked) {
    const std::array<asio::const_buffer, 1> last{asio::buffer(kLastChunk)};
    if (auto ec = co_await Write(last)) co_return ec;
  }
  ended_ = true;
  co_return beast::error_code{};
}

asio::awaitable<beast::error_code> Http1Response::Write(
    std::span<const asio::const_buffer> buffers) {
  for (size_t i = 0; i < buffers.size(); i += kBuffersPerWrite) {
    const auto slice = buffers.subspan(i, std::min(kBuffersPerWrite, buffers.size() - i));
    stream_.tcp().expires_after(kWriteTimeout);
    auto [ec, n] = co_await asio::async_write(stream_, slice, use_nothrow);
    if (ec) {
      failed_ = true;
      co_return ec;
    }
  }
  co_return beast::error_code{};
}

// What the client sends meanwhile (a pipelined next request) is kept in the session's buffer
// up to one request head's worth, for the session to read next; past that it is read and
// dropped and the connection is not reused, so a client streaming bytes at a watch cannot grow
// memory. While nothing comes (an idle watch), neither buffer holds more than the small read
// buffer.
void Http1Response::StartReadingClient() {
  if (buffer_.size() == 0) buffer_.shrink_to_fit();
}

void Http1Response::KeepClientBytes(const char* data, size_t n) {
  const size_t room =
      RequestParser::kMaxHeaderBytes - std::min(buffer_.size(), RequestParser::kMaxHeaderBytes);
  const size_t keep = std::min(n, room);
  if (keep > 0) buffer_.commit(asio::buffer_copy(buffer_.prepare(keep), asio::buffer(data, keep)));
  if (keep < n) client_lost_ = true;
}

bool Http1Response::ClientReadEnded(const beast::error_code& ec) {
  if (ec == asio::error::operation_aborted) return false;
  client_lost_ = true;
  return true;
}

asio::awaitable<bool> Http1Response::ClientGone() {
  StartReadingClient();
  ClientReadBuffer in;
  for (;;) {
    stream_.tcp().expires_never();
    auto [ec, n] =
        co_await stream_.async_read_some(asio::buffer(in.data(), in.size()), use_nothrow);
    if (ec) co_return ClientReadEnded(ec);
    KeepClientBytes(in.data(), n);
    in.Consumed(n);
  }
}

void Http1Response::WatchClient(const asio::any_io_executor& /*executor*/,
                                std::function<void(bool)> gone) {
  StartReadingClient();
  watch_ = std::make_unique<ClientWatch>();
  watch_->gone = std::move(gone);
  WaitForClient();
}

// The handlers run from the io_context, never inside the initiating call.
void Http1Response::WaitForClient() {
  stream_.tcp().expires_never();
  stream_.async_wait_readable([this](beast::error_code ec) {
    if (ec) {
      ClientWatchEnded(ec);
      return;
    }
    ReadClient();
  });
}

void Http1Response::ReadClient() {
  if (!watch_->in) watch_->in = std::make_unique<ClientReadBuffer>();
  stream_.async_read_some(asio::buffer(watch_->in->data(), watch_->in->size()),
                          [this](beast::error_code ec, size_t n) {
                            if (ec) {
                              ClientWatchEnded(ec);
                              return;
                            }
                            ClientReadBuffer& in = *watch_->in;
                            KeepClientBytes(in.data(), n);
                            const bool filled = n == in.size();
                            in.Consumed(n);
                            if (filled) {
                              ReadClient();  // More is likely waiting.
                              return;
                            }
                            watch_->in.reset();
                            WaitForClient();
                          });
}

void Http1Response::ClientWatchEnded(const beast::error_code& ec) {
  auto gone = std::move(watch_->gone);
  watch_.reset();
  gone(ClientReadEnded(ec));
}

void Http1Response::StopWatchingClient() {
  if (watch_) stream_.Cancel();
}

asio::awaitable<beast::error_code> Http1Response::Continue() {
  if (request_ == nullptr) co_return asio::error::operation_not_supported;
  if (continued_ || request_->body.done() ||
      request_->headers[http::field::expect] != "100-continue") {
    co_return beast::error_code{};
  }
  continued_ = true;
  static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
  const std::array<asio::const_buffer, 1> b{asio::buffer(kContinue)};
  co_return co_await Write(b);
}

std::optional<Upgraded> Http1Response::TakeUpgraded() {
  if (status_ != 101) return std::nullopt;
  upgraded_ = true;
  Upgraded up{stream_,
              std::string(static_cast<const char*>(buffer_.data().data()), buffer_.size())};
  buffer_.consume(buffer_.size());
  return up;
}

}  // namespace kf
