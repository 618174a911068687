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
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "common/use_nothrow.h"
#include "proxy/edge/read_buffer.h"

namespace kf {
namespace {

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

}  // namespace

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

const SharedHttp2Limits& DefaultHttp2Limits() {
  static const auto* const defaults = new SharedHttp2Limits(std::make_shared<const Http2Limits>());
  return *defaults;
}

Http2Session::Http2Session(AnyStream& stream, std::string remote, std::string remote_ip,
                           Pipeline& pipeline, TransportStats& stats, PeerCertificate client_cert,
                           SharedHttp2Limits limits)
    : stream_(stream),
      remote_(std::move(remote)),
      remote_ip_(std::move(remote_ip)),
      pipeline_(pipeline),
      stats_(stats),
      client_cert_(std::move(client_cert)),
      limits_owner_(limits ? std::move(limits) : DefaultHttp2Limits()),
      limits_(*limits_owner_),
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
  nghttp2_session_callbacks_set_send_data_callback(callbacks, &OnSendData);
  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) return false;
  absl::Cleanup free_option = [option] { nghttp2_option_del(option); };
  // Windows reopen as the pipeline consumes a body, not as bytes arrive: a stream's unread
  // body is bounded by its window.
  nghttp2_option_set_no_auto_window_update(option, 1);
  // Closed streams are not kept. nghttp2 would keep up to SETTINGS_MAX_CONCURRENT_STREAMS of
  // them (about 210 bytes each) for RFC 7540's priorities, which RFC 9113 deprecates and
  // kube-fanout does not use: an agent's long-lived connection would grow with every request it
  // makes (about 24 KiB after 132). A frame for a stream no longer known is taken as for a
  // closed one.
  nghttp2_option_set_no_closed_streams(option, 1);
  nghttp2_option_set_max_deflate_dynamic_table_size(option, limits_.header_table_size);
  // Answer heads as large as the relay reads (1 MiB, relay.cc), past nghttp2's default 64 KiB.
  nghttp2_option_set_max_send_header_block_length(option, kMaxSendHeaderBlock);
  // The frame buffer nghttp2 allocates as the session starts is the one this session tracks.
  nghttp2_mem mem = Http2Memory::For(&frame_buffer_);
  frame_buffer_.claiming = true;
  const int created = nghttp2_session_server_new3(&session_, callbacks, this, option, &mem);
  frame_buffer_.claiming = false;
  if (created != 0) return false;
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
    auto next = idle && !goaway_ ? deadline : now + limits_.idle_timeout;
    if (frames_resident_) next = std::min(next, LookAtFrameBuffer(now));
    idle_timer_.expires_at(std::min(next, header_block_deadline_));
    co_await idle_timer_.async_wait(use_nothrow);
  }
}

void Http2Session::Framed() {
  framed_since_look_ = true;
  if (frames_resident_ || limits_.frame_buffer_quiet <= std::chrono::milliseconds::zero()) return;
  // The first frame since the buffer was given back: IdleLoop looks at it a period from now.
  frames_resident_ = true;
  frames_look_at_ = std::chrono::steady_clock::now() + limits_.frame_buffer_quiet;
  if (!done_ && idle_timer_.expiry() > frames_look_at_) idle_timer_.expires_at(frames_look_at_);
}

Http2Session::TimePoint Http2Session::LookAtFrameBuffer(TimePoint now) {
  if (now < frames_look_at_) return frames_look_at_;
  // nghttp2 holds a frame in the buffer only while it wants to write (an active item).
  if (!framed_since_look_ && !in_nghttp2_ && session_ != nullptr &&
      nghttp2_session_want_write(session_) == 0 && Http2Memory::Release(frame_buffer_)) {
    frames_resident_ = false;
    frames_look_at_ = TimePoint::max();
    stats_.http2_frame_buffers_released.fetch_add(1, std::memory_order_relaxed);
    return frames_look_at_;
  }
  framed_since_look_ = false;
  frames_look_at_ = now + limits_.frame_buffer_quiet;
  return frames_look_at_;
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
      s.MakeRequest(limits_.request_timeout, remote_ip_,
                    ParseRequestInfo(s.method(), s.path(), &parsed), &client_cert_.Get());
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
