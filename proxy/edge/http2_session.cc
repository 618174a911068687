#include "proxy/edge/http2_session.h"

#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "proxy/edge/deadlines.h"
#include "proxy/edge/read_buffer.h"

namespace kf {
namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
// Frames gathered into one socket write.
constexpr size_t kWriteBatchBytes = 64 * 1024;
// Reads: a quiet connection's pending read holds the small buffer (a client's WINDOW_UPDATEs,
// PINGs and short requests fit), a burst (request bodies) the large one (proxy/edge/read_buffer.h).
constexpr size_t kIdleReadBytes = 1024;
constexpr size_t kReadPieceBytes = 64 * 1024;
// The largest answer head (HPACK-encoded) nghttp2 is let send: what the relay reads from the
// upstream (1 MiB), with room for HPACK's length prefixes.
constexpr size_t kMaxSendHeaderBlock = 2 << 20;

// ALPN wire format: length-prefixed protocol names, in the server's order of preference.
constexpr unsigned char kAlpnProtocols[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};

int SelectAlpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* outlen,
               const unsigned char* in, unsigned int inlen, void* /*arg*/) {
  unsigned char* selected = nullptr;
  if (SSL_select_next_proto(&selected, outlen, kAlpnProtocols, sizeof(kAlpnProtocols), in, inlen) !=
      OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_NOACK;  // No protocol in common: HTTP/1.1 without ALPN.
  }
  *out = selected;
  return SSL_TLSEXT_ERR_OK;
}

// The connections whose FrameNow left frames for this thread's SendBatchedWrites.
struct BatchedWrites {
  std::vector<std::weak_ptr<Http2Session>> sessions;  // Not kept alive by this list.
  bool posted = false;                                // A handler that sends them is queued.
};
thread_local BatchedWrites batched_writes;

}  // namespace

void SendBatchedWrites() {
  BatchedWrites& b = batched_writes;
  if (b.sessions.empty()) return;
  // The connections' writes go to the kernel together (BatchedSends) where io_uring is in use;
  // each session is told its result as the burst ends.
  const BatchedSends::Burst burst;
  // SendBatched adds nothing to the list (it only writes, or wakes a writer).
  for (const std::weak_ptr<Http2Session>& weak : b.sessions) {
    if (const std::shared_ptr<Http2Session> s = weak.lock()) s->SendBatched();
  }
  b.sessions.clear();
}

void OfferHttp2(asio::ssl::context& tls) {
  SSL_CTX_set_alpn_select_cb(tls.native_handle(), &SelectAlpn, nullptr);
}

bool NegotiatedHttp2(AnyStream& stream) {
  SSL* ssl = stream.ssl();
  if (ssl == nullptr) return false;
  const unsigned char* proto = nullptr;
  unsigned int len = 0;
  SSL_get0_alpn_selected(ssl, &proto, &len);
  return std::string_view(reinterpret_cast<const char*>(proto), proto ? len : 0) == "h2";
}

Http2Session::Http2Session(AnyStream& stream, std::string remote, std::string remote_ip,
                           Pipeline& pipeline, TransportStats& stats, ClientCertificate client_cert,
                           const Http2Limits& limits)
    : stream_(stream),
      remote_(std::move(remote)),
      remote_ip_(std::move(remote_ip)),
      pipeline_(pipeline),
      stats_(stats),
      client_cert_(std::move(client_cert)),
      limits_(limits),
      reset_tokens_(limits_.stream_reset_burst),
      reset_refilled_(limits_.now()),
      executor_(stream.get_executor()),
      write_wake_(executor_, /*keep_timer=*/true),
      idle_timer_(executor_),
      idle_since_(std::chrono::steady_clock::now()) {
  stats_.http2_connections.fetch_add(1, std::memory_order_relaxed);
}

Http2Session::~Http2Session() {
  stats_.http2_connections.fetch_sub(1, std::memory_order_relaxed);
  if (session_ != nullptr) nghttp2_session_del(session_);
}

bool Http2Session::Init() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  absl::Cleanup free_callbacks = [callbacks] { nghttp2_session_callbacks_del(callbacks); };
  nghttp2_session_callbacks_set_on_begin_frame_callback(callbacks, &OnBeginFrame);
  nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, &OnInvalidFrame);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, &OnBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &OnFrameRecv);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, &OnFrameSend);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &OnStreamClose);
  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) return false;
  absl::Cleanup free_option = [option] { nghttp2_option_del(option); };
  // Windows reopen as the pipeline consumes a body, not as bytes arrive: a stream's unread
  // body is bounded by its window.
  nghttp2_option_set_no_auto_window_update(option, 1);
  nghttp2_option_set_max_deflate_dynamic_table_size(option, limits_.header_table_size);
  // Answer heads as large as the relay reads (1 MiB, relay.cc), past nghttp2's default 64 KiB.
  nghttp2_option_set_max_send_header_block_length(option, kMaxSendHeaderBlock);
  if (nghttp2_session_server_new3(&session_, callbacks, this, option, Http2Memory::Get()) != 0)
    return false;
  const std::array<nghttp2_settings_entry, 5> settings{{
      {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, limits_.max_frame_size},
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list_size},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, limits_.header_table_size},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits_.initial_window_size},
  }};
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size()) != 0)
    return false;
  // The connection's window: as Go's server, a WINDOW_UPDATE up to the per-stream window times
  // the stream limit.
  return nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0,
                                               static_cast<int32_t>(limits_.connection_window())) ==
         0;
}

asio::awaitable<void> Http2Session::Run(std::string received) {
  using namespace asio::experimental::awaitable_operators;
  if (!Init()) co_return;
  if (Receive(received.data(), received.size())) {
    co_await (ReadLoop() && WriteLoop() && IdleLoop());
  }
  done_ = true;
  // Whatever still runs on a stream sees the connection gone.
  for (auto& [id, s] : streams_) {
    s->OnConnectionGone();
    stats_.http2_streams.fetch_sub(1, std::memory_order_relaxed);
  }
  streams_.clear();
  opening_.reset();
}

void Http2Session::Stop() {
  stopping_ = true;
  std::vector<std::shared_ptr<Http2Stream>> open;
  for (auto& [id, s] : streams_) open.push_back(s);
  for (auto& s : open) s->stop().Stop();
  GoAway();
}

void Http2Session::GoAway() {
  if (goaway_ || session_ == nullptr || done_) return;
  goaway_ = true;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  Flush();
}

void Http2Session::EndConnection(Http2Closed why, uint32_t error_code) {
  if (ended_ || session_ == nullptr) return;
  ended_ = true;
  stats_.http2_closed[static_cast<size_t>(why)].fetch_add(1, std::memory_order_relaxed);
  // GOAWAY, then the connection closes once it is sent (nghttp2 neither reads nor writes after).
  nghttp2_session_terminate_session(session_, error_code);
  Flush();
}

bool Http2Session::TakeResetToken() {
  // A token bucket, as nghttp2's stream reset limit: `burst` at once, `rate` per second after.
  const TimePoint now = limits_.now();
  if (now > reset_refilled_) {
    const double seconds = std::chrono::duration<double>(now - reset_refilled_).count();
    reset_tokens_ = std::min<double>(limits_.stream_reset_burst,
                                     reset_tokens_ + seconds * limits_.stream_reset_rate);
    reset_refilled_ = now;
  }
  if (reset_tokens_ < 1) return false;
  reset_tokens_ -= 1;
  return true;
}

void Http2Session::HeaderBlockBegan() {
  header_block_deadline_ = std::chrono::steady_clock::now() + limits_.header_block_timeout;
  header_block_armed_ = false;
  continuations_ = 0;
}

void Http2Session::ReleaseHead(Http2Stream& s) {
  held_header_bytes_ -= std::min(held_header_bytes_, s.head_bytes());
  s.ForgetRequest();
}

bool Http2Session::Receive(const char* data, size_t n) {
  in_nghttp2_ = true;
  const ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), n);
  in_nghttp2_ = false;
  // The streams whose heads ended in this read are served only now, outside nghttp2's
  // callbacks: one the client reset in the same read starts no handler (Serve).
  for (std::shared_ptr<Http2Stream>& s : starting_) Start(std::move(s));
  starting_.clear();
  // A header block still unfinished after what came: its deadline is the idle timer's next
  // wake-up (armed only now, so a block read whole costs no timer operation).
  if (header_block_deadline_ != TimePoint::max() && !header_block_armed_) {
    header_block_armed_ = true;
    if (idle_timer_.expiry() > header_block_deadline_) {
      idle_timer_.expires_at(header_block_deadline_);  // Wakes IdleLoop to wait for it.
    }
  }
  Flush();
  if (rv < 0) {
    // A protocol error: nghttp2 has queued GOAWAY where it could; the writer sends it and ends.
    if (!nghttp2_session_want_write(session_)) done_ = true;
    return false;
  }
  return true;
}

asio::awaitable<void> Http2Session::ReadLoop() {
  ReadBuffer<kIdleReadBytes, kReadPieceBytes> in;
  while (!done_) {
    // No read deadline: watches may be quiet for long. An idle connection is ended by
    // IdleLoop, a dead one by the writes' deadlines.
    stream_.tcp().expires_never();
    auto [ec, n] =
        co_await stream_.async_read_some(asio::buffer(in.data(), in.size()), use_nothrow);
    if (ec) break;
    if (!Receive(in.data(), n)) break;
    in.Consumed(n);
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) break;
  }
  // The client is gone (or broke the protocol): nothing more will be read.
  for (auto& [id, s] : streams_) s->OnConnectionGone();
  done_ = true;
  Flush();
  idle_timer_.cancel();
}

template <typename Enough>
bool Http2Session::Gather(std::string& out, Enough enough) {
  in_nghttp2_ = true;
  absl::Cleanup out_of_nghttp2 = [this] { in_nghttp2_ = false; };
  while (out.size() < kWriteBatchBytes && !enough()) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n < 0) return false;
    if (n == 0) break;
    // A batch after a quiet spell starts with the last one's room: one allocation instead of a
    // doubling every few frames (the largest caller of malloc in a profile of 10,000 HTTP/2
    // watches), while a quiet connection still holds none.
    if (out.empty()) out.reserve(std::max(last_batch_, static_cast<size_t>(n)));
    out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  return true;
}

bool Http2Session::can_frame_now() const {
  return !done_ && !send_failed_ && !in_nghttp2_ && session_ != nullptr && !queued_self_ &&
         pending_.size() < kWriteBatchBytes;
}

bool Http2Session::FrameNow(const Http2Stream& stream) {
  if (!can_frame_now()) return false;
  const bool was_empty = pending_.empty();
  if (!Gather(pending_, [&stream] { return stream.out_drained(); })) send_failed_ = true;
  // Sent once per batch, however many streams add to it: by SendBatchedWrites at the end of
  // the caller's burst (straight to the socket when the writer is idle), or by the writer.
  if (send_failed_ || (was_empty && !pending_.empty() && !ListForBatchedSend())) Flush();
  return stream.out_drained();
}

bool Http2Session::ListForBatchedSend() {
  // TLS: only a client's (TlsServerStream, which can write without waiting), and not while
  // ciphertext from the last batch waits for the writer.
  if (!writer_idle_ || tls_held_ || (stream_.is_tls() && stream_.tls_server() == nullptr)) {
    return false;
  }
  if (batched_) return true;
  batched_ = true;
  BatchedWrites& b = batched_writes;
  b.sessions.push_back(weak_from_this());
  if (!b.posted) {
    b.posted = true;
    asio::post(executor_, [] {
      batched_writes.posted = false;
      SendBatchedWrites();
    });
  }
  return true;
}

void Http2Session::SendBatched() {
  batched_ = false;
  if (pending_.empty() || queued_self_) return;
  if (done_ || !writer_idle_ || tls_held_) {
    Flush();  // The writer sends it after what it is writing (or sees the end).
    return;
  }
  // The frames are in nghttp2's order, and nothing else is being written.
  const int fd = stream_.tcp().socket().native_handle();
  beast::error_code ec;
  if (TlsServerStream* tls = stream_.tls_server()) {
    // Encrypted at once (one record per 16 KiB); what the socket does not take now waits as
    // ciphertext, which the writer sends before anything else.
    const std::array<asio::const_buffer, 1> batch{asio::buffer(pending_)};
    const bool encrypted = tls->EncryptAll(batch, ec);
    last_batch_ = pending_.size();
    std::string().swap(pending_);  // Encrypted (or failed): the plaintext is done with.
    if (!encrypted) {
      send_failed_ = true;
      Flush();
      return;
    }
    const std::array<asio::const_buffer, 1> records{asio::buffer(tls->ciphertext())};
    if (records[0].size() == 0) return;
    if (BatchedSends::Queue(fd, records, this)) {
      queued_self_ = shared_from_this();
      return;
    }
    const size_t written = stream_.WriteWithoutWaiting(records, ec);
    if (ec) send_failed_ = true;
    BatchWritten(ec ? 0 : written);
    return;
  }
  const std::array<asio::const_buffer, 1> batch{asio::buffer(pending_)};
  if (BatchedSends::Queue(fd, batch, this)) {
    queued_self_ = shared_from_this();
    return;
  }
  const size_t written = stream_.WriteWithoutWaiting(batch, ec);
  BatchWritten(ec ? 0 : written);  // An error is the writer's (its write fails too).
}

void Http2Session::Sent(int64_t result, std::span<const iovec> /*sent*/) {
  const std::shared_ptr<Http2Session> self = std::move(queued_self_);
  const bool failed = result < 0 && result != -EAGAIN && result != -EWOULDBLOCK;
  if (failed && stream_.tls_server() != nullptr) send_failed_ = true;
  BatchWritten(result > 0 ? static_cast<size_t>(result) : 0);
}

void Http2Session::BatchWritten(size_t written) {
  if (TlsServerStream* tls = stream_.tls_server()) {
    if (send_failed_) {
      Flush();
      return;
    }
    if (tls->Wrote(written) == TlsServerStream::TryWriteResult::kWritten) return;
    tls_held_ = true;
    Flush();
    return;
  }
  if (written == pending_.size()) {
    last_batch_ = written;
    std::string().swap(pending_);  // A quiet connection holds no batch.
    return;
  }
  pending_.erase(0, written);
  Flush();  // The rest, or the error, is the writer's.
}

asio::awaitable<void> Http2Session::WriteLoop() {
  std::string out;
  for (;;) {
    if (tls_held_) {  // SendBatched's ciphertext the socket did not take: first, and whole.
      tls_held_ = false;
      stream_.tcp().expires_after(kWriteTimeout);
      if (co_await stream_.tls_server()->Flush()) break;
    }
    // What was framed since the last write goes first (nghttp2's order), then more frames.
    out.clear();
    if (!pending_.empty()) {
      out = std::move(pending_);
      pending_.clear();
    }
    if (!send_failed_ && !Gather(out, [] { return false; })) send_failed_ = true;
    const bool failed = send_failed_;
    if (!out.empty()) {
      last_batch_ = out.size();
      stream_.tcp().expires_after(kWriteTimeout);
      auto [ec, written] = co_await asio::async_write(stream_, asio::buffer(out), use_nothrow);
      if (ec) break;
      continue;
    }
    if (failed || done_ ||
        (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_))) {
      break;
    }
    // Nothing to send for now: the batch's buffer goes with it, so a quiet connection holds
    // none (the next wake-up allocates what it gathers).
    std::string().swap(out);
    std::string().swap(pending_);
    writer_idle_ = true;
    const bool woken = co_await write_wake_.Wait();
    writer_idle_ = false;
    if (!woken) break;
  }
  done_ = true;
  idle_timer_.cancel();
  stream_.Cancel();  // Ends the reader.
}

asio::awaitable<void> Http2Session::IdleLoop() {
  while (!done_) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= header_block_deadline_) {
      // A header block begun and not ended in time: no stream exists for it, and nothing else
      // may come on the connection until it ends (RFC 9113 §6.10).
      EndConnection(Http2Closed::kHeaderBlockTimeout, NGHTTP2_NO_ERROR);
      co_return;
    }
    const bool idle = streams_.empty() && header_block_deadline_ == TimePoint::max();
    const auto deadline = idle_since_ + limits_.idle_timeout;
    if (idle && now >= deadline) GoAway();  // Closes once sent: nothing is open.
    const auto next = idle && !goaway_ ? deadline : now + limits_.idle_timeout;
    idle_timer_.expires_at(std::min(next, header_block_deadline_));
    co_await idle_timer_.async_wait(use_nothrow);
  }
}

Http2Stream* Http2Session::StreamOf(int32_t id) {
  return static_cast<Http2Stream*>(nghttp2_session_get_stream_user_data(session_, id));
}

template <typename Body>
int Http2Session::Guarded(void* self, Body body) noexcept {
  auto* h = static_cast<Http2Session*>(self);
  try {
    return body(*h);
  } catch (...) {
    // nghttp2 is C: nothing may unwind through it. The connection's state may be half
    // updated, so it ends.
    h->CallbackFailed();
    h->EndConnection(Http2Closed::kCallbackFailure, NGHTTP2_INTERNAL_ERROR);
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
}

void Http2Session::CallbackFailed() {
  stats_.http2_callback_failures.fetch_add(1, std::memory_order_relaxed);
}

int Http2Session::OnBeginFrame(nghttp2_session* /*session*/, const nghttp2_frame_hd* hd,
                               void* self) {
  return Guarded(self, [hd](Http2Session& h) -> int {
    if (h.ended_) return NGHTTP2_ERR_CALLBACK_FAILURE;  // The rest of the input is not read.
    switch (hd->type) {
      case NGHTTP2_HEADERS:
        h.HeaderBlockBegan();
        break;
      case NGHTTP2_CONTINUATION:
        // Counted as each frame begins, before nghttp2 reads it (CVE-2024-27316's flood of
        // CONTINUATIONs holds a connection's reader for nothing). The last one allowed must
        // end the block: a block that needs more is refused at once (and before an nghttp2
        // built with its own limit of 8 would drop the connection without a GOAWAY).
        ++h.continuations_;
        if (h.continuations_ > h.limits_.max_continuations ||
            (h.continuations_ == h.limits_.max_continuations &&
             !(hd->flags & NGHTTP2_FLAG_END_HEADERS))) {
          h.EndConnection(Http2Closed::kContinuations, NGHTTP2_ENHANCE_YOUR_CALM);
          return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
      case NGHTTP2_RST_STREAM:
        h.HeaderBlockEnded();
        // Counted before nghttp2 closes the stream (CVE-2023-44487: each reset frees a stream
        // slot for the next request at once).
        if (!h.TakeResetToken()) {
          h.EndConnection(Http2Closed::kResetRate, NGHTTP2_ENHANCE_YOUR_CALM);
          return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        break;
      default:
        h.HeaderBlockEnded();  // Only CONTINUATION may follow an unfinished block.
        break;
    }
    return 0;
  });
}

int Http2Session::OnInvalidFrame(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                                 int /*error*/, void* self) {
  return Guarded(self, [frame](Http2Session& h) -> int {
    // A stream nghttp2 resets for the client's protocol error costs what a reset does.
    if (frame->hd.stream_id != 0 && !h.TakeResetToken()) {
      h.EndConnection(Http2Closed::kResetRate, NGHTTP2_ENHANCE_YOUR_CALM);
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  });
}

int Http2Session::OnBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* self) {
  return Guarded(self, [session, frame](Http2Session& h) -> int {
    if (h.ended_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
    // Only the head's fields until END_HEADERS: the stream is listed, counted and served then.
    h.opening_ = std::make_shared<Http2Stream>(session, frame->hd.stream_id, h.executor_);
    return 0;
  });
}

int Http2Session::OnHeader(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                           const uint8_t* name, size_t namelen, const uint8_t* value,
                           size_t valuelen, uint8_t /*flags*/, void* self) {
  return Guarded(self, [&](Http2Session& h) -> int {
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;  // Trailers: not forwarded (the apiserver reads none).
    }
    Http2Stream* s = h.opening_.get();
    if (s == nullptr || s->id() != frame->hd.stream_id) return 0;
    // The list's own limit, or what is left of the connection's for heads held at once.
    const size_t left = h.limits_.max_header_bytes_per_connection -
                        std::min(h.limits_.max_header_bytes_per_connection, h.held_header_bytes_);
    s->AddHeader(std::string_view(reinterpret_cast<const char*>(name), namelen),
                 std::string_view(reinterpret_cast<const char*>(value), valuelen),
                 std::min<size_t>(h.limits_.max_header_list_size, left));
    return 0;
  });
}

int Http2Session::OnFrameRecv(nghttp2_session* session, const nghttp2_frame* frame, void* self) {
  return Guarded(self, [session, frame](Http2Session& h) -> int {
    if (h.ended_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    if (frame->hd.type == NGHTTP2_HEADERS) h.HeaderBlockEnded();
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST) {
      h.Opened(session, frame);
      return 0;
    }
    Http2Stream* s = h.StreamOf(frame->hd.stream_id);
    if (s != nullptr && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) s->OnBodyEnd();
    return 0;
  });
}

void Http2Session::Opened(nghttp2_session* session, const nghttp2_frame* frame) {
  std::shared_ptr<Http2Stream> stream = std::move(opening_);
  if (stream == nullptr || stream->id() != frame->hd.stream_id) return;
  stream->writer = this;
  if (stopping_) stream->stop().requested = true;
  // GET and HEAD carry nothing the apiserver reads: a body sent with them is not kept.
  if (stream->method() == "GET" || stream->method() == "HEAD") stream->DropBody();
  if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) stream->OnBodyEnd();
  held_header_bytes_ += stream->head_bytes();
  nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, stream.get());
  stats_.http2_streams.fetch_add(1, std::memory_order_relaxed);
  stats_.http2_streams_total.fetch_add(1, std::memory_order_relaxed);
  starting_.push_back(stream);
  streams_.emplace(frame->hd.stream_id, std::move(stream));
}

int Http2Session::OnFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* self) {
  return Guarded(self, [session, frame](Http2Session& h) -> int {
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
      return 0;
    }
    // A complete answer to a request whose body is still coming: as Go's server (RFC 9113
    // §8.1), RST_STREAM NO_ERROR so the client stops sending and the stream's window is free.
    Http2Stream* s = h.StreamOf(frame->hd.stream_id);
    if (s != nullptr && !s->body_ended()) {
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
  });
}

int Http2Session::OnDataChunk(nghttp2_session* session, uint8_t /*flags*/, int32_t stream_id,
                              const uint8_t* data, size_t len, void* self) {
  return Guarded(self, [=](Http2Session& h) -> int {
    if (h.ended_) return NGHTTP2_ERR_CALLBACK_FAILURE;
    Http2Stream* s = h.StreamOf(stream_id);
    if (s == nullptr) {
      nghttp2_session_consume(session, stream_id, len);
      return 0;
    }
    if (s->drops_body()) {
      h.stats_.http2_body_bytes_dropped.fetch_add(len, std::memory_order_relaxed);
    }
    s->OnData(data, len);
    return 0;
  });
}

int Http2Session::OnStreamClose(nghttp2_session* session, int32_t stream_id, uint32_t error_code,
                                void* self) {
  return Guarded(self, [=](Http2Session& h) -> int {
    if (h.opening_ != nullptr && h.opening_->id() == stream_id) h.opening_.reset();
    auto it = h.streams_.find(stream_id);
    if (it == h.streams_.end()) return 0;
    // Kept until the end of this call: OnClose may end what the stream's handler waits on.
    const std::shared_ptr<Http2Stream> stream = it->second;
    Http2Stream& s = *stream;
    // What the pipeline never read goes back to the connection's window.
    if (s.unconsumed() > 0) nghttp2_session_consume_connection(session, s.unconsumed());
    const bool abnormal = error_code != NGHTTP2_NO_ERROR || !s.answered();
    if (abnormal && !s.answered()) {
      h.stats_.http2_streams_reset.fetch_add(1, std::memory_order_relaxed);
    }
    h.streams_.erase(it);
    h.stats_.http2_streams.fetch_sub(1, std::memory_order_relaxed);
    if (h.streams_.empty()) h.idle_since_ = std::chrono::steady_clock::now();
    s.OnClose(abnormal);
    return 0;
  });
}

void Http2Session::Start(std::shared_ptr<Http2Stream> stream) {
  asio::co_spawn(
      stream_.get_executor(),
      [self = shared_from_this(), stream = std::move(stream)] { return self->Serve(stream); },
      asio::detached);
}

asio::awaitable<void> Http2Session::Serve(std::shared_ptr<Http2Stream> stream) {
  Http2Stream& s = *stream;
  if (s.stop().cancelled) {
    // Reset by its client before its turn came (HEADERS and RST_STREAM in one read): nothing
    // is asked for an answer nobody reads.
    stats_.http2_handlers_cancelled.fetch_add(1, std::memory_order_relaxed);
    ReleaseHead(s);
    co_return;
  }
  if (s.head_too_large()) {
    stats_.http2_header_too_large.fetch_add(1, std::memory_order_relaxed);
    ReleaseHead(s);
    co_await WriteHeaderListTooLong(s);
    s.Finish();
    co_return;
  }
  Handled handled;
  try {
    handled = co_await Handle(s);
  } catch (...) {
    // No exception leaves the edge: the stream is reset (Finish), the connection goes on.
    CallbackFailed();
  }
  if (s.stop().cancelled && !handled.watch) {
    stats_.http2_handlers_cancelled.fetch_add(1, std::memory_order_relaxed);
  }
  ReleaseHead(s);
  if (handled.watch) {
    // A watch, the stream's request head forgotten: it goes on with no coroutine of this
    // stream's (an idle one keeps no frame; its events go out from its wake-ups, framed at once:
    // Http2Response::TryWriteBody). Its handlers keep it, the stream and this session; its end
    // runs from WatchEnded.
    auto watch =
        std::make_shared<StreamWatch>(shared_from_this(), std::move(stream), std::move(handled));
    StreamWatch& w = *watch;
    w.handled.watch->Start(std::move(watch), [&w] {
      // From the watch's last handler, which must not outlive it: the end runs later.
      asio::post(w.session->executor_,
                 [keep = w.shared_from_this()] { keep->session->WatchEnded(*keep); });
    });
    co_return;
  }
  s.Finish();
}

void Http2Session::WatchEnded(StreamWatch& w) {
  pipeline_.LogDetached(std::move(w.handled.watch), w.handled.record, w.stream->response(),
                        remote_);
  stats_.http2_answered[static_cast<size_t>(w.handled.record.fields().answer)].fetch_add(
      1, std::memory_order_relaxed);
  w.stream->Finish();
}

asio::awaitable<Http2Session::Handled> Http2Session::Handle(Http2Stream& s) {
  absl::Status parsed;
  Request request =
      s.MakeRequest(remote_ip_, ParseRequestInfo(s.method(), s.path(), &parsed), &client_cert_);
  Exchange x{request, &s.response(), s.stop()};
  if (!parsed.ok()) {
    co_await RejectUnparsed(x, parsed);
  } else {
    co_await pipeline_.Handle(x);
  }
  if (s.body().timed_out()) stats_.body_timeouts_h2.fetch_add(1, std::memory_order_relaxed);
  Handled handled;
  if (x.detached) {
    handled.watch = std::move(x.detached);
    handled.record = Pipeline::Record(x);
    co_return handled;
  }
  pipeline_.Log(x, remote_);
  stats_.http2_answered[static_cast<size_t>(x.answer)].fetch_add(1, std::memory_order_relaxed);
  co_return handled;
}

asio::awaitable<void> Http2Session::WriteHeaderListTooLong(Http2Stream& stream) {
  static constexpr std::string_view kBody =
      "<h1>HTTP Error 431</h1><p>Request Header Field(s) Too Large</p>";
  ResponseHead head;
  head.status = 431;
  head.fields.set(beast::http::field::content_type, "text/html; charset=utf-8");
  head.framing = ResponseHead::Framing::kWhole;
  head.length = kBody.size();
  const std::array<asio::const_buffer, 1> body{asio::buffer(kBody)};
  co_await WriteAnswer(stream.response(), std::move(head), body);
  pipeline_.LogUnparsed(remote_, 431, "HTTP/2 header list too large");
}

}  // namespace kf
