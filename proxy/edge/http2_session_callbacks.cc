// Http2Session's nghttp2 callbacks (http2_session.h): what each frame read does to the
// connection's streams (opened at END_HEADERS, bodies, closes) and to its bounds on an
// unauthenticated client (header blocks' deadline and CONTINUATION limit, heads held, the reset
// rate). None lets an exception unwind through nghttp2 (Guarded).
#include <algorithm>
#include <chrono>

#include "proxy/edge/http2_session.h"

namespace kf {

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
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR &&
        !h.ended_) {
      // nghttp2's own GOAWAY for the client's malformed frames (EndConnection counts ours).
      h.ended_ = true;
      h.stats_.http2_closed[static_cast<size_t>(Http2Closed::kProtocolError)].fetch_add(
          1, std::memory_order_relaxed);
      return 0;
    }
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

namespace {
constexpr size_t kFrameHeaderBytes = 9;  // RFC 9113 §4.1.
}  // namespace

int Http2Session::OnSendData(nghttp2_session* /*session*/, nghttp2_frame* frame,
                             const uint8_t* framehd, size_t length, nghttp2_data_source* source,
                             void* self) {
  return Guarded(self, [=](Http2Session& h) -> int {
    // Only from nghttp2_session_mem_send inside Gather; no frame is padded (no padding callback).
    if (h.gathering_ == nullptr || frame->data.padlen > 0) return NGHTTP2_ERR_CALLBACK_FAILURE;
    std::string& out = *h.gathering_;
    if (out.empty()) out.reserve(std::max(h.last_batch_, length + kFrameHeaderBytes));
    out.append(reinterpret_cast<const char*>(framehd), kFrameHeaderBytes);
    static_cast<Http2Stream*>(source->ptr)->TakeAnswer(length, out);
    h.Framed();  // The frame's header was packed in the frame buffer.
    // nghttp2 goes on to the next frame within the same mem_send, past Gather's own check: a
    // client with a large window would otherwise have a whole long answer copied into one batch.
    return out.size() >= kWriteBatchBytes ? NGHTTP2_ERR_PAUSE : 0;
  });
}

}  // namespace kf
