#include "proxy/upstream/http2_upstream.h"

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/strings.h"
#include "common/use_nothrow.h"
#include "proxy/edge/deadlines.h"

namespace kf {
namespace {

constexpr size_t kReadBytes = 16 * 1024;
constexpr size_t kWriteBatchBytes = 64 * 1024;
// The connection's receive window: every stream's window at the server's usual stream limit,
// so streams that hold their whole window never close it for the others.
constexpr int32_t kConnectionWindow = kUpstreamHttp2StreamWindow * 100;
// An answer's head as large as the HTTP/1.1 relay reads (1 MiB), in HTTP/2's units.
constexpr uint32_t kMaxHeaderList = (1u << 20) + 10 * 32;

// A field name as Go's HTTP/1.1 server writes it (textproto.CanonicalMIMEHeaderKey): HTTP/2
// carries names in lower case, the relay's HTTP/1.1 clients see the apiserver's own spelling.
std::string CanonicalName(std::string_view name) {
  std::string out(name);
  bool upper = true;
  for (char& c : out) {
    if (c == ' ') return std::string(name);  // Go leaves such a name alone.
    c = upper ? absl::ascii_toupper(c) : absl::ascii_tolower(c);
    upper = c == '-';
  }
  return out;
}

}  // namespace

Http2UpstreamStream::Http2UpstreamStream(std::shared_ptr<Http2Upstream> connection,
                                         const asio::any_io_executor& ex)
    : connection_(std::move(connection)), executor_(ex), wake_(executor_) {}

Http2UpstreamStream::~Http2UpstreamStream() {
  if (id_ < 0) return;
  if (!closed_ && !cancelled_) connection_->Reset(id_);
  connection_->Forget(id_);
}

void Http2UpstreamStream::OnHeader(std::string_view name, std::string_view value) {
  if (name == ":status") {
    int status = 0;
    if (absl::SimpleAtoi(ToAbsl(value), &status)) pending_status_ = status;
    return;
  }
  if (head_done_ || pending_status_ / 100 == 1) return;  // Trailers, or a 1xx head.
  if (name == "content-length") {
    uint64_t length = 0;
    if (absl::SimpleAtoi(ToAbsl(value), &length)) content_length_ = length;
  }
  fields_.insert(CanonicalName(name), value);
}

void Http2UpstreamStream::OnHeadersEnd(bool end_stream) {
  if (!head_done_ && pending_status_ / 100 != 1) {
    status_ = pending_status_;
    head_done_ = true;
  }
  if (end_stream) ended_ = true;
  wake_.Notify();
}

void Http2UpstreamStream::OnData(const uint8_t* data, size_t len) {
  if (taken_ == held_.size()) {
    held_.clear();
    taken_ = 0;
  }
  held_.append(reinterpret_cast<const char*>(data), len);
  wake_.Notify();
}

void Http2UpstreamStream::OnClose(uint32_t error_code) {
  closed_ = true;
  if (!ended_ && !error_) {
    // Refused (RST_STREAM REFUSED_STREAM, or past a GOAWAY's last stream): the server did not
    // process it, so it may be sent again.
    refused_ = error_code == NGHTTP2_REFUSED_STREAM && !head_done_;
    error_ = asio::error::connection_reset;
  }
  wake_.Notify();
}

void Http2UpstreamStream::OnConnectionGone() {
  if (!closed_ && !ended_ && !error_) error_ = asio::error::connection_reset;
  closed_ = true;
  wake_.Notify();
}

void Http2UpstreamStream::Cancel() {
  if (!cancelled_ && !closed_ && id_ >= 0) connection_->Reset(id_);
  cancelled_ = true;
  wake_.Notify();
}

asio::awaitable<beast::error_code> Http2UpstreamStream::ReadHead(
    std::chrono::steady_clock::time_point deadline) {
  beast::error_code ec;
  while (!head_done_) {
    if (cancelled_) {
      ec = asio::error::operation_aborted;
      break;
    }
    if (error_ || closed_) {
      ec = error_ ? error_ : beast::error_code(asio::error::connection_reset);
      break;
    }
    // (Named: GCC 12 miscompiles a co_await inside a condition.)
    const bool woken = co_await wake_.Wait(deadline);
    if (!woken && std::chrono::steady_clock::now() >= deadline) {
      ec = beast::error::timeout;
      break;
    }
  }
  co_return ec;
}

asio::awaitable<std::pair<beast::error_code, size_t>> Http2UpstreamStream::ReadSome(
    std::span<char> into, std::chrono::steady_clock::time_point deadline) {
  beast::error_code ec;
  // Bytes that came before the stream failed are read first; then its end, or why it failed.
  while (!cancelled_ && taken_ == held_.size() && !ended_ && !error_ && !closed_) {
    const bool woken = co_await wake_.Wait(deadline);
    if (!woken && std::chrono::steady_clock::now() >= deadline) {
      ec = beast::error::timeout;
      break;
    }
  }
  size_t n = 0;
  if (cancelled_) {
    ec = asio::error::operation_aborted;
  } else if (taken_ < held_.size()) {
    ec = {};
    n = std::min(into.size(), held_.size() - taken_);
    std::memcpy(into.data(), held_.data() + taken_, n);
    taken_ += n;
    if (taken_ == held_.size()) {
      // A quiet watch holds no buffer between its events.
      std::string().swap(held_);
      taken_ = 0;
    }
    connection_->Consumed(id_, n);
  } else if (!ended_ && !ec) {
    ec = error_ ? error_ : beast::error_code(asio::error::connection_reset);
  }
  co_return std::pair<beast::error_code, size_t>(ec, n);
}

Http2Upstream::Http2Upstream(std::unique_ptr<AnyStream> stream, size_t endpoint,
                             Http2UpstreamStats* stats)
    : stream_(std::move(stream)),
      endpoint_(endpoint),
      stats_(stats),
      executor_(stream_->get_executor()),
      write_wake_(executor_, /*keep_timer=*/true),
      settings_wake_(executor_),
      idle_since_(std::chrono::steady_clock::now()) {
  if (stats_ != nullptr) stats_->connections.fetch_add(1, std::memory_order_relaxed);
}

Http2Upstream::~Http2Upstream() {
  if (stats_ != nullptr) stats_->connections.fetch_sub(1, std::memory_order_relaxed);
  if (session_ != nullptr) nghttp2_session_del(session_);
}

bool Http2Upstream::Init() {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
  nghttp2_session_callbacks_set_on_header_callback(callbacks, &OnHeader);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, &OnFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, &OnDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, &OnStreamClose);
  nghttp2_option* option = nullptr;
  if (nghttp2_option_new(&option) != 0) {
    nghttp2_session_callbacks_del(callbacks);
    return false;
  }
  // A stream's window reopens as the relay takes its bytes, not as they arrive.
  nghttp2_option_set_no_auto_window_update(option, 1);
  nghttp2_option_set_max_send_header_block_length(option, 2 << 20);
  const int rv = nghttp2_session_client_new2(&session_, callbacks, this, option);
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) return false;
  // As Go's transport: no server push; our windows and head limit.
  const std::array<nghttp2_settings_entry, 3> settings{{
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kUpstreamHttp2StreamWindow},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderList},
  }};
  if (nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size()) != 0)
    return false;
  return nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kConnectionWindow) ==
         0;
}

asio::awaitable<absl::Status> Http2Upstream::Start(std::chrono::steady_clock::time_point deadline) {
  if (!Init()) co_return absl::InternalError("nghttp2 client session");
  auto self = shared_from_this();
  asio::co_spawn(
      executor_,
      [self]() -> asio::awaitable<void> {
        using namespace asio::experimental::awaitable_operators;
        co_await (self->ReadLoop() && self->WriteLoop());
        self->Ended();
      },
      asio::detached);
  write_wake_.Notify();
  while (!settings_received_ && !done_) {
    const bool woken = co_await settings_wake_.Wait(deadline);
    if (!woken && std::chrono::steady_clock::now() >= deadline) break;
  }
  if (!settings_received_) {
    Close();
    co_return absl::UnavailableError("the upstream sent no HTTP/2 SETTINGS");
  }
  co_return absl::OkStatus();
}

uint32_t Http2Upstream::max_streams() const {
  if (session_ == nullptr) return 0;
  return nghttp2_session_get_remote_settings(session_, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}

bool Http2Upstream::usable() const {
  return !done_ && !goaway_ && settings_received_ && streams_.size() < max_streams() &&
         nghttp2_session_check_request_allowed(session_) != 0;
}

std::unique_ptr<Http2UpstreamStream> Http2Upstream::Submit(const Http2HeaderList& head) {
  if (!usable()) return nullptr;
  std::vector<nghttp2_nv> nva;
  nva.reserve(head.size());
  for (const auto& [name, value] : head) {
    nva.push_back(nghttp2_nv{const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(name.data())),
                             const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(value.data())),
                             name.size(), value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  auto stream = std::make_unique<Http2UpstreamStream>(shared_from_this(), executor_);
  const int32_t id =
      nghttp2_submit_request(session_, nullptr, nva.data(), nva.size(), nullptr, nullptr);
  if (id < 0) return nullptr;
  stream->id_ = id;
  streams_.emplace(id, stream.get());
  if (stats_ != nullptr) stats_->streams.fetch_add(1, std::memory_order_relaxed);
  write_wake_.Notify();
  return stream;
}

void Http2Upstream::Consumed(int32_t id, size_t n) {
  if (done_ || session_ == nullptr) return;
  nghttp2_session_consume_stream(session_, id, n);
  write_wake_.Notify();
}

void Http2Upstream::Reset(int32_t id) {
  if (done_ || session_ == nullptr) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  write_wake_.Notify();
}

void Http2Upstream::Forget(int32_t id) {
  if (streams_.erase(id) == 0) return;
  if (stats_ != nullptr) stats_->streams.fetch_sub(1, std::memory_order_relaxed);
  if (streams_.empty()) idle_since_ = std::chrono::steady_clock::now();
}

void Http2Upstream::Close() {
  if (done_) return;
  done_ = true;
  stream_->Cancel();
  write_wake_.Notify();
}

Http2UpstreamStream* Http2Upstream::StreamOf(int32_t id) {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

int Http2Upstream::OnHeader(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                            const uint8_t* name, size_t namelen, const uint8_t* value,
                            size_t valuelen, uint8_t /*flags*/, void* self) {
  if (frame->hd.type != NGHTTP2_HEADERS) return 0;
  Http2UpstreamStream* s = static_cast<Http2Upstream*>(self)->StreamOf(frame->hd.stream_id);
  if (s == nullptr) return 0;
  s->OnHeader(std::string_view(reinterpret_cast<const char*>(name), namelen),
              std::string_view(reinterpret_cast<const char*>(value), valuelen));
  return 0;
}

int Http2Upstream::OnFrameRecv(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                               void* self) {
  auto* c = static_cast<Http2Upstream*>(self);
  const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (frame->hd.type) {
    case NGHTTP2_SETTINGS:
      if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
        c->settings_received_ = true;
        c->settings_wake_.Notify();
      }
      break;
    case NGHTTP2_GOAWAY:
      c->goaway_ = true;  // No new streams; those it took go on.
      break;
    case NGHTTP2_HEADERS:
      if (Http2UpstreamStream* s = c->StreamOf(frame->hd.stream_id)) s->OnHeadersEnd(end_stream);
      break;
    case NGHTTP2_DATA:
      if (end_stream) {
        if (Http2UpstreamStream* s = c->StreamOf(frame->hd.stream_id)) s->OnHeadersEnd(true);
      }
      break;
    default:
      break;
  }
  return 0;
}

int Http2Upstream::OnDataChunk(nghttp2_session* session, uint8_t /*flags*/, int32_t stream_id,
                               const uint8_t* data, size_t len, void* self) {
  auto* c = static_cast<Http2Upstream*>(self);
  // The connection's window reopens at once (each stream's bounds what all hold); the
  // stream's when the relay takes the bytes.
  nghttp2_session_consume_connection(session, len);
  Http2UpstreamStream* s = c->StreamOf(stream_id);
  if (s == nullptr || s->cancelled_) return 0;
  s->OnData(data, len);
  return 0;
}

int Http2Upstream::OnStreamClose(nghttp2_session* /*session*/, int32_t stream_id,
                                 uint32_t error_code, void* self) {
  if (Http2UpstreamStream* s = static_cast<Http2Upstream*>(self)->StreamOf(stream_id)) {
    s->OnClose(error_code);
  }
  return 0;
}

asio::awaitable<void> Http2Upstream::ReadLoop() {
  std::array<char, kReadBytes> in;
  while (!done_) {
    // No read deadline: watches may be quiet for long; each stream's reads have their own,
    // and TCP keep-alive notices a dead peer.
    stream_->tcp().expires_never();
    auto [ec, n] = co_await stream_->async_read_some(asio::buffer(in), use_nothrow);
    if (ec) break;
    const ssize_t rv =
        nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(in.data()), n);
    write_wake_.Notify();
    if (rv < 0) break;
    if (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)) break;
  }
  done_ = true;
  write_wake_.Notify();
}

asio::awaitable<void> Http2Upstream::WriteLoop() {
  std::string out;
  for (;;) {
    out.clear();
    while (!done_ && out.size() < kWriteBatchBytes) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n < 0) {
        done_ = true;
        break;
      }
      if (n == 0) break;
      out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
    if (!out.empty()) {
      stream_->tcp().expires_after(kWriteTimeout);
      auto [ec, written] = co_await asio::async_write(*stream_, asio::buffer(out), use_nothrow);
      if (ec) break;
      continue;
    }
    if (done_ || (!nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_)))
      break;
    std::string().swap(out);
    const bool woken = co_await write_wake_.Wait();
    if (!woken) break;
  }
  done_ = true;
  stream_->Cancel();  // Ends the reader.
}

void Http2Upstream::Ended() {
  done_ = true;
  settings_wake_.Notify();
  if (!streams_.empty() && stats_ != nullptr) {
    stats_->lost_with_streams.fetch_add(1, std::memory_order_relaxed);
  }
  // Each stream's reader sees the end; the streams themselves are their owners'.
  for (auto& [id, s] : streams_) s->OnConnectionGone();
  beast::error_code ignored;
  stream_->tcp().socket().close(ignored);
}

}  // namespace kf
