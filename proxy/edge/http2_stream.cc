#include "proxy/edge/http2_stream.h"

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/kept_room.h"
#include "common/strings.h"
#include "proxy/edge/deadlines.h"

namespace kf {
namespace {

namespace http = beast::http;

// Go's HTTP/2 server buffers a handler's output up to this size (handlerChunkWriteSize); an
// answer that fits goes out with a content-length, a longer one without.
constexpr size_t kGoH2BufferedBytes = 4096;
// Go counts each header field as its name, value and 32 bytes (RFC 9113 §6.5.2).
constexpr size_t kFieldOverhead = 32;
// Pieces of an answer's write whose room a stream keeps between writes (Http2Stream::ClearOut).
constexpr size_t kKeptPieces = 4;

// Fields HTTP/2 forbids (RFC 9113 §8.2.2); "te" is allowed only as "trailers".
bool ConnectionSpecific(std::string_view lower_name, std::string_view value) {
  static constexpr std::string_view kForbidden[] = {"connection", "keep-alive", "proxy-connection",
                                                    "transfer-encoding", "upgrade"};
  if (lower_name == "te") return value != "trailers";
  return std::find(std::begin(kForbidden), std::end(kForbidden), lower_name) !=
         std::end(kForbidden);
}

// Fields whose value is new in every answer: the apiserver's Audit-Id (a UUID per request) and
// the Date. In the connection's HPACK table (nghttp2 indexes every field it may, up to the
// client's 4,096 bytes) they could never be referred to again, yet each would push out a field
// that could and cost the connection its heap for as long as it lives: 30 relayed answers (five
// minutes of a kubelet's lease renewals) fill the table, about 9.8 KB of nghttp2's entries per
// connection, against 0.8 KB when these two are sent as literals never indexed (3 bytes more
// per answer). Lower-case, as Http2Fields makes names.
bool NeverIndexed(std::string_view name) { return name == "audit-id" || name == "date"; }

nghttp2_nv Nv(const std::string& name, const std::string& value) {
  // nghttp2 copies names and values (no NO_COPY flags).
  return nghttp2_nv{
      reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
      NeverIndexed(name) ? uint8_t{NGHTTP2_NV_FLAG_NO_INDEX} : uint8_t{NGHTTP2_NV_FLAG_NONE}};
}

// The answer's header block as HTTP/2 carries it: ":status", lower-case names, no
// connection-specific fields, a date, and a content-length where Go's server sends one (a
// relayed length; a handler's whole answer that fits its buffer).
std::vector<std::pair<std::string, std::string>> Http2Fields(const ResponseHead& head) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back(":status", std::to_string(head.status));
  bool has_date = false, has_length = false;
  for (const auto& f : head.fields) {
    std::string name = absl::AsciiStrToLower(ToAbsl(f.name_string()));
    std::string value(f.value());
    if (ConnectionSpecific(name, value)) continue;
    has_date = has_date || name == "date";
    has_length = has_length || name == "content-length";
    out.emplace_back(std::move(name), std::move(value));
  }
  if (!has_date) {
    out.emplace_back(
        "date", absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", absl::Now(), absl::UTCTimeZone()));
  }
  using Framing = ResponseHead::Framing;
  const bool whole_fits = head.framing == Framing::kWhole && head.length <= kGoH2BufferedBytes;
  if (!has_length && StatusHasBody(head.status) &&
      (head.framing == Framing::kLength || whole_fits)) {
    out.emplace_back("content-length", std::to_string(head.length));
  }
  return out;
}

}  // namespace

Http2Stream::Http2Stream(nghttp2_session* session, int32_t id,
                         const asio::any_io_executor& executor)
    : session_(session),
      id_(id),
      executor_(executor),
      body_wake_(executor_),
      write_wake_(executor_),
      gone_wake_(executor_) {}

bool Http2Stream::AddHeader(std::string_view name, std::string_view value, size_t max_bytes) {
  head_bytes_ += name.size() + value.size() + kFieldOverhead;
  if (!head_too_large_ &&
      (head_bytes_ > max_bytes || name.size() > kMaxFieldBytes || value.size() > kMaxFieldBytes)) {
    head_too_large_ = true;
    if (head_) head_->fields.clear();  // Answered 431 whatever follows: what was kept goes now.
  }
  if (head_too_large_ || !head_) return false;
  if (name == ":method") {
    head_->method = value;
  } else if (name == ":path") {
    head_->path = value;
  } else if (name == ":authority") {
    head_->authority = value;
  } else if (name == ":scheme") {
    head_->scheme = value;
  } else if (!name.starts_with(':')) {
    head_->fields.insert(name, value);
  }
  return true;
}

Request Http2Stream::MakeRequest(std::chrono::milliseconds request_timeout,
                                 std::string_view remote_ip, RequestInfo info,
                                 const ClientCertificate* client_cert) {
  bodiless_ = drop_body_ || (body_end_ && body_in_.empty());
  body_deadline_ = std::chrono::steady_clock::now() + request_timeout;
  return Request{http::string_to_verb(head_->method),
                 head_->method,
                 head_->path,
                 20,
                 true,
                 head_->fields,
                 std::move(info),
                 std::string(remote_ip),
                 body_,
                 std::nullopt,
                 client_cert};
}

const beast::http::fields& Http2Stream::headers() const {
  static const beast::http::fields kNone;
  return head_ ? head_->fields : kNone;
}

void Http2Stream::ForgetRequest() {
  head_.reset();
  if (body_offset_ == body_in_.size()) {
    std::string().swap(body_in_);
    body_offset_ = 0;
  }
}

void Http2Stream::OnData(const uint8_t* data, size_t n) {
  if (closed_ || reset_ || drop_body_) {
    if (session_ != nullptr) nghttp2_session_consume(session_, id_, n);
    return;
  }
  if (body_offset_ == body_in_.size()) {
    body_in_.clear();
    body_offset_ = 0;
  }
  body_in_.append(reinterpret_cast<const char*>(data), n);
  body_wake_.Notify();
}

void Http2Stream::OnBodyEnd() {
  body_end_ = true;
  body_wake_.Notify();
}

void Http2Stream::OnClose(bool abnormal) {
  // An answer nobody will read: what its handler still asks upstream is called off.
  if (abnormal && !closed_) stop_.Cancel();
  closed_ = true;
  if (abnormal && !reset_) gone_ = true;
  reset_ = reset_ || abnormal;
  body_wake_.Notify();
  write_wake_.Notify();
  gone_wake_.Notify();
  TellClientWatch(false);
}

void Http2Stream::OnConnectionGone() {
  if (!closed_) OnClose(true);
  session_ = nullptr;
}

bool Http2Stream::answered() const { return submitted_ && (!has_body_ || eof_sent_); }

void Http2Stream::Reset(uint32_t code) {
  if (!usable()) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id_, code);
  reset_ = true;
  ClearOut();
  body_wake_.Notify();
  write_wake_.Notify();
  gone_wake_.Notify();
  TellClientWatch(false);
  if (writer != nullptr) writer->Flush();
}

void Http2Stream::TellClientWatch(bool stopped) {
  if (!client_gone_ || !(gone_ || reset_ || stopped)) return;
  // Posted: this may run inside nghttp2's callbacks, where the watch must not act.
  std::function<void(bool)> gone = std::exchange(client_gone_, nullptr);
  const std::unique_ptr<asio::any_io_executor> elsewhere = std::move(client_elsewhere_);
  asio::post(elsewhere ? *elsewhere : executor_,
             [gone = std::move(gone), client_left = gone_] { gone(client_left); });
}

void Http2Stream::ClearOut() {
  // A long list (a watch's initial state: a piece per event) is given back, so a quiet stream
  // does not keep it; the usual few pieces' room is kept for the next write.
  ClearKeepingRoom(out_, kKeptPieces);
  out_index_ = 0;
}

void Http2Stream::Finish() {
  // An answer cut short (or never given) must not look complete to the client.
  if (usable() && !answered()) Reset(NGHTTP2_INTERNAL_ERROR);
}

ssize_t Http2Stream::ReadAnswer(nghttp2_session* /*session*/, int32_t /*stream_id*/,
                                uint8_t* /*buf*/, size_t length, uint32_t* flags,
                                nghttp2_data_source* source, void* /*user_data*/) {
  auto* s = static_cast<Http2Stream*>(source->ptr);
  // nghttp2's C frames are never unwound: a failure resets this stream only.
  try {
    return s->ReserveAnswer(length, flags);
  } catch (...) {
    if (s->writer != nullptr) s->writer->CallbackFailed();
    return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  }
}

ssize_t Http2Stream::ReserveAnswer(size_t length, uint32_t* flags) {
  SkipEmptyPieces();
  // What is queued, counted until it is more than the frame takes.
  size_t ready = 0;
  size_t i = out_index_;
  for (; i < out_.size() && ready <= length; ++i) ready += out_[i].size();
  const size_t n = std::min(ready, length);
  const bool all = ready <= length && i == out_.size();  // The frame takes every queued byte.
  if (all && ending_) {
    *flags |= NGHTTP2_DATA_FLAG_EOF;
    eof_sent_ = true;
    write_wake_.Notify();
  }
  if (n > 0) {
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    return static_cast<ssize_t>(n);
  }
  return (*flags & NGHTTP2_DATA_FLAG_EOF) != 0 ? 0 : NGHTTP2_ERR_DEFERRED;
}

void Http2Stream::TakeAnswer(size_t length, std::string& out) {
  size_t taken = 0;
  while (taken < length && out_index_ < out_.size()) {
    asio::const_buffer& b = out_[out_index_];
    const size_t take = std::min(length - taken, b.size());
    out.append(static_cast<const char*>(b.data()), take);
    taken += take;
    b += take;
    if (b.size() == 0) ++out_index_;
  }
  SkipEmptyPieces();
  if (taken > 0 && out_drained()) write_wake_.Notify();
}

void Http2Stream::SkipEmptyPieces() {
  while (out_index_ < out_.size() && out_[out_index_].size() == 0) ++out_index_;
}

asio::awaitable<beast::error_code> Http2Response::WriteHead(ResponseHead head) {
  Http2Stream& s = stream_;
  if (!s.usable() || s.submitted_) co_return beast::error_code(asio::error::connection_reset);
  // No switching protocols on HTTP/2 (upgrades come over HTTP/1.1), and interim answers other
  // than 100 Continue (Continue()) are not relayed.
  if (head.status < 200) co_return beast::error_code(asio::error::operation_not_supported);
  status_ = head.status;
  const bool has_body = StatusHasBody(head.status) && s.method() != "HEAD";
  const std::vector<std::pair<std::string, std::string>> fields = Http2Fields(head);
  std::vector<nghttp2_nv> nva;
  nva.reserve(fields.size());
  for (const auto& [name, value] : fields) nva.push_back(Nv(name, value));
  nghttp2_data_provider provider{};
  provider.source.ptr = &s;
  provider.read_callback = &Http2Stream::ReadAnswer;
  const int rv = nghttp2_submit_response(s.session_, s.id_, nva.data(), nva.size(),
                                         has_body ? &provider : nullptr);
  if (rv != 0) co_return beast::error_code(asio::error::connection_reset);
  s.submitted_ = true;
  s.has_body_ = has_body;
  if (s.writer != nullptr) s.writer->Flush();
  co_return beast::error_code{};
}

asio::awaitable<beast::error_code> Http2Response::WriteBody(
    std::span<const asio::const_buffer> pieces) {
  Http2Stream& s = stream_;
  if (!s.usable()) co_return beast::error_code(asio::error::connection_reset);
  const size_t n = asio::buffer_size(pieces);
  if (!s.has_body_ || n == 0) co_return beast::error_code{};
  body_bytes_ += n;
  // The pieces stay the caller's until this returns: they are copied into the connection's
  // next write behind DATA frame headers as the client's window allows (TakeAnswer), and this
  // waits until all were taken.
  s.writing_ = true;
  absl::Cleanup not_writing = [&s] { s.writing_ = false; };
  s.out_.assign(pieces.begin(), pieces.end());
  s.out_index_ = 0;
  nghttp2_session_resume_data(s.session_, s.id_);
  if (s.writer != nullptr) s.writer->Flush();
  const auto deadline = asio::steady_timer::clock_type::now() + kWriteTimeout;
  while (s.out_index_ < s.out_.size() && s.usable()) {
    const bool woken = co_await s.write_wake_.Wait(deadline);
    if (!woken) break;
  }
  const bool complete = s.out_index_ >= s.out_.size();
  s.ClearOut();
  if (complete) co_return beast::error_code{};
  // Abandoned part way (the stream ended, or the writer was cancelled): the answer is cut.
  s.Reset(NGHTTP2_INTERNAL_ERROR);
  co_return beast::error_code(asio::error::connection_reset);
}

bool Http2Response::can_write_now() const {
  const Http2Stream& s = stream_;
  return s.usable() && s.submitted_ && s.has_body_ && !s.ending_ && !s.writing_ && !held_ &&
         s.out_drained() && s.writer != nullptr && s.writer->can_frame_now();
}

Response::TryWrite Http2Response::TryWriteBody(std::span<const asio::const_buffer> pieces) {
  if (!can_write_now()) return TryWrite::kUnsupported;
  Http2Stream& s = stream_;
  const size_t n = asio::buffer_size(pieces);
  if (n == 0) return TryWrite::kWritten;
  // Only what the client's windows take now: then nghttp2 frames all of it at once. A client
  // behind is written to by the watch's loop (WriteBody), which waits for its window.
  const int32_t stream_window = nghttp2_session_get_stream_remote_window_size(s.session_, s.id_);
  const int32_t connection_window = nghttp2_session_get_remote_window_size(s.session_);
  if (stream_window < 0 || connection_window < 0 || static_cast<size_t>(stream_window) < n ||
      static_cast<size_t>(connection_window) < n) {
    return TryWrite::kUnsupported;
  }
  body_bytes_ += n;
  s.out_.assign(pieces.begin(), pieces.end());
  s.out_index_ = 0;
  nghttp2_session_resume_data(s.session_, s.id_);
  if (s.writer->FrameNow(s)) {
    s.ClearOut();
    return TryWrite::kWritten;
  }
  if (!s.usable()) {
    s.ClearOut();
    return TryWrite::kFailed;
  }
  held_ = true;  // Framed by the writer as it goes on; `pieces` stay the caller's until then.
  return TryWrite::kHeld;
}

asio::awaitable<beast::error_code> Http2Response::FinishWrite() {
  Http2Stream& s = stream_;
  if (!held_) co_return beast::error_code{};
  held_ = false;
  s.writing_ = true;
  absl::Cleanup not_writing = [&s] { s.writing_ = false; };
  const auto deadline = asio::steady_timer::clock_type::now() + kWriteTimeout;
  while (!s.out_drained() && s.usable()) {
    const bool woken = co_await s.write_wake_.Wait(deadline);
    if (!woken) break;
  }
  if (s.out_drained() && s.usable()) {
    s.ClearOut();
    co_return beast::error_code{};
  }
  s.Reset(NGHTTP2_INTERNAL_ERROR);
  co_return beast::error_code(asio::error::connection_reset);
}

asio::awaitable<beast::error_code> Http2Response::End() {
  Http2Stream& s = stream_;
  if (s.submitted_ && !s.has_body_) co_return beast::error_code{};
  if (!s.usable()) co_return beast::error_code(asio::error::connection_reset);
  s.ending_ = true;
  s.writing_ = true;
  absl::Cleanup not_writing = [&s] { s.writing_ = false; };
  nghttp2_session_resume_data(s.session_, s.id_);
  if (s.writer != nullptr) s.writer->Flush();
  const auto deadline = asio::steady_timer::clock_type::now() + kWriteTimeout;
  while (!s.eof_sent_) {
    if (s.reset_ || s.session_ == nullptr) {
      co_return beast::error_code(asio::error::connection_reset);
    }
    const bool woken = co_await s.write_wake_.Wait(deadline);
    if (!woken) {
      s.Reset(NGHTTP2_INTERNAL_ERROR);
      co_return beast::error_code(asio::error::operation_aborted);
    }
  }
  co_return beast::error_code{};
}

asio::awaitable<bool> Http2Response::ClientGone() {
  Http2Stream& s = stream_;
  for (;;) {
    if (s.gone_) co_return true;
    if (s.reset_) co_return false;  // Reset here (Cancel): as a cancelled read on HTTP/1.1.
    const bool woken = co_await s.gone_wake_.Wait();
    if (!woken) co_return false;
  }
}

void Http2Response::WatchClient(const asio::any_io_executor& executor,
                                std::function<void(bool)> gone) {
  stream_.client_gone_ = std::move(gone);
  stream_.client_elsewhere_ =
      executor == stream_.executor_ ? nullptr : std::make_unique<asio::any_io_executor>(executor);
  stream_.TellClientWatch(false);  // Already over.
}

void Http2Response::StopWatchingClient() { stream_.TellClientWatch(true); }

asio::awaitable<beast::error_code> Http2Response::Continue() {
  Http2Stream& s = stream_;
  if (continued_ || s.body_.done() || s.headers()[http::field::expect] != "100-continue") {
    co_return beast::error_code{};
  }
  if (!s.usable()) co_return beast::error_code(asio::error::connection_reset);
  continued_ = true;
  const std::string name = ":status", value = "100";
  const std::array<nghttp2_nv, 1> nv{Nv(name, value)};
  if (nghttp2_submit_headers(s.session_, NGHTTP2_FLAG_NONE, s.id_, nullptr, nv.data(), nv.size(),
                             nullptr) != 0) {
    co_return beast::error_code(asio::error::connection_reset);
  }
  if (s.writer != nullptr) s.writer->Flush();
  co_return beast::error_code{};
}

void Http2Response::Cancel() {
  // As a cancelled socket operation on HTTP/1.1: only a write under way (or held) is aborted
  // (the stream is reset); otherwise the answer may still end cleanly.
  if (stream_.writing_ || held_) stream_.Reset(NGHTTP2_INTERNAL_ERROR);
}

}  // namespace kf
