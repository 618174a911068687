#include "tests/bench/watch_client.h"

#include <algorithm>
#include <array>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/tools/event_stream_parser.h"
#include "tests/tools/write_stamp.h"

namespace kf::bench {
namespace {

constexpr size_t kReadBuffer = 256 << 10;
constexpr int kReadsPerWakeup = 8;  // Then yield to the other connections.
constexpr size_t kMaxFailureSamples = 8;

std::string QuotedKey(std::string_view key) {
  return absl::StrCat("\"", std::string(key), "\":\"");
}

}  // namespace

WatchPlan WatchPlan::Make(int watchers, int nodes, bool shuffled, uint32_t seed) {
  WatchPlan p;
  for (int i = 0; i < watchers; ++i) {
    // Alternating: even watchers are the pods ones, the j-th of them on node j % nodes.
    p.node.push_back(i % 2 == 0 ? (i / 2) % std::max(1, nodes) : -1);
  }
  if (shuffled) {
    std::mt19937 rng(seed);
    std::shuffle(p.node.begin(), p.node.end(), rng);
  }
  return p;
}

struct WatchClient::Watch {
  Watch(asio::io_context& ioc, int i, int n) : socket(ioc), index(i), node(n), pods(n >= 0) {}
  asio::ip::tcp::socket socket;
  tools::EventStreamParser parser;
  std::string request;
  int index;
  int node;
  bool pods;
  bool connected = false;  // The 200 and its headers arrived.
  bool open = true;
  uint64_t measured = 0;
};

struct WatchClient::Shard {
  asio::io_context ioc{1};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> guard;
  std::thread thread;
  std::atomic<bool> finished{false};
  // Touched only on this shard's thread (and after Join).
  std::map<int, std::unique_ptr<Watch>> watches;
  tools::LatencyHistogram pod_latencies, slice_latencies;
  std::array<char, kReadBuffer> buffer;
  std::string stamp_key;
  // Written by this shard's thread, read by anyone.
  std::atomic<uint64_t> opened{0}, connected{0}, failed{0}, ended{0}, bytes{0}, initial{0},
      stale_stamps{0}, bookmarks{0}, errors{0}, measured_pods{0}, measured_slices{0}, added{0},
      modified{0}, deleted{0};
};

namespace {
void Bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
  // Single writer: a plain load and store, no locked instruction.
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
}  // namespace

WatchClient::WatchClient(Options options)
    : options_(std::move(options)),
      pod_path_prefix_(
          "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=0"
          "&fieldSelector=spec.nodeName%3Dnode-"),
      slice_path_(
          "/apis/discovery.k8s.io/v1/endpointslices?watch=1&allowWatchBookmarks=true"
          "&resourceVersion=0"),
      measure_from_(std::numeric_limits<int64_t>::max()) {
  for (int i = 0; i < std::max(1, options_.threads); ++i) {
    auto shard = std::make_unique<Shard>();
    shard->stamp_key = QuotedKey(tools::kWrittenAtAnnotation);
    shards_.push_back(std::move(shard));
  }
}

WatchClient::~WatchClient() {
  for (auto& s : shards_) {
    s->guard.reset();
    s->ioc.stop();
    if (s->thread.joinable()) s->thread.join();
  }
}

void WatchClient::Start() {
  for (auto& s : shards_) {
    s->guard.emplace(s->ioc.get_executor());
    Shard* shard = s.get();
    s->thread = std::thread([shard] {
      shard->ioc.run();
      shard->finished = true;
    });
  }
}

void WatchClient::Open(int index) {
  Shard& shard = *shards_[static_cast<size_t>(index) % shards_.size()];
  asio::post(shard.ioc, [this, &shard, index] {
    auto [it, inserted] = shard.watches.emplace(
        index,
        std::make_unique<Watch>(shard.ioc, index, options_.plan.node[static_cast<size_t>(index)]));
    if (!inserted) return;
    it->second->parser.set_protobuf(options_.protobuf);
    Bump(shard.opened);
    Connect(shard, *it->second);
  });
}

void WatchClient::Connect(Shard& shard, Watch& w) {
  const std::string path = w.pods ? absl::StrCat(pod_path_prefix_, w.node) : slice_path_;
  w.request = absl::StrCat(
      "GET ", path, " HTTP/1.1\r\nHost: ", options_.proxy.address().to_string(), ":",
      options_.proxy.port(), "\r\nAccept: ",
      options_.protobuf ? "application/vnd.kubernetes.protobuf,application/json"
                        : "application/json",
      "\r\nUser-Agent: kf-fanout-bench/0.1\r\nAuthorization: Bearer ", options_.token, "\r\n\r\n");
  w.socket.async_connect(options_.proxy, [this, &shard, &w](boost::system::error_code ec) {
    if (ec) {
      if (ec != asio::error::operation_aborted) End(shard, w, "connect: " + ec.message());
      return;
    }
    w.socket.non_blocking(true, ec);
    asio::async_write(w.socket, asio::buffer(w.request),
                      [this, &shard, &w](boost::system::error_code wec, size_t) {
                        if (wec) {
                          if (wec != asio::error::operation_aborted) {
                            End(shard, w, "send request: " + wec.message());
                          }
                          return;
                        }
                        DoWait(shard, w);
                      });
  });
}

void WatchClient::DoWait(Shard& shard, Watch& w) {
  w.socket.async_wait(asio::ip::tcp::socket::wait_read,
                      [this, &shard, &w](boost::system::error_code ec) {
                        if (ec || !w.open) {
                          if (ec != asio::error::operation_aborted && w.open) {
                            End(shard, w, "wait: " + ec.message());
                          }
                          return;
                        }
                        OnReadable(shard, w);
                      });
}

void WatchClient::OnReadable(Shard& shard, Watch& w) {
  for (int i = 0; i < kReadsPerWakeup; ++i) {
    boost::system::error_code ec;
    const size_t n = w.socket.read_some(asio::buffer(shard.buffer), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) break;
    if (ec) {
      End(shard, w, ec == asio::error::eof ? "closed by kube-fanout" : "read: " + ec.message());
      return;
    }
    const int64_t now = tools::UnixNanos();  // One receipt time per read.
    Bump(shard.bytes, n);
    const bool more = w.parser.Feed(std::string_view(shard.buffer.data(), n),
                                    [&](std::string_view line) { OnEvent(shard, w, line, now); });
    if (!w.connected && w.parser.head_done() &&
        w.parser.state() != tools::EventStreamParser::State::kError) {
      w.connected = true;
      Bump(shard.connected);
    }
    if (!more) {
      End(shard, w,
          w.parser.state() == tools::EventStreamParser::State::kDone
              ? "watch ended by kube-fanout"
              : "bad response: " + w.parser.error() + " [" + w.parser.head().substr(0, 200) + "]");
      return;
    }
    if (n < shard.buffer.size()) break;  // Drained, most likely: wait again.
  }
  DoWait(shard, w);
}

void WatchClient::OnEvent(Shard& shard, Watch& w, std::string_view line, int64_t now) {
  const char type = tools::EventFields::TypeLetter(line);
  switch (type) {
    case 'B':
      Bump(shard.bookmarks);
      return;
    case 'E':
      Bump(shard.errors);
      NoteFailure("ERROR event: " + std::string(line.substr(0, 300)));
      return;
    case 'A':
      Bump(shard.added);
      break;
    case 'M':
      Bump(shard.modified);
      break;
    case 'D':
      Bump(shard.deleted);
      break;
    default:
      NoteFailure("not an event: " + std::string(line.substr(0, 120)));
      return;
  }
  const std::optional<int64_t> written = tools::EventFields::Annotation(line, shard.stamp_key);
  if (!written) {
    Bump(shard.initial);
  } else if (*written < measure_from_.load(std::memory_order_relaxed)) {
    Bump(shard.stale_stamps);
  } else {
    (w.pods ? shard.pod_latencies : shard.slice_latencies).RecordNanos(now - *written);
    ++w.measured;
    Bump(w.pods ? shard.measured_pods : shard.measured_slices);
  }
}

void WatchClient::End(Shard& shard, Watch& w, const std::string& reason) {
  if (!w.open) return;
  w.open = false;
  boost::system::error_code ignored;
  w.socket.close(ignored);
  Bump(w.connected ? shard.ended : shard.failed);
  NoteFailure(absl::StrCat("watch ", w.index, w.connected ? " ended: " : " failed: ", reason));
}

void WatchClient::NoteFailure(const std::string& message) {
  std::lock_guard lock(failures_mu_);
  ++failure_count_;
  if (failures_.size() < kMaxFailureSamples) failures_.push_back(message);
}

void WatchClient::CloseAll() {
  for (auto& s : shards_) {
    Shard* shard = s.get();
    asio::post(shard->ioc, [shard] {
      for (auto& [index, w] : shard->watches) {
        if (!w->open) continue;
        w->open = false;
        boost::system::error_code ignored;
        w->socket.set_option(asio::socket_base::linger(true, 0), ignored);
        w->socket.close(ignored);
      }
      shard->guard.reset();
    });
  }
}

void WatchClient::Join(std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (auto& s : shards_) {
    while (!s->finished && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    s->ioc.stop();
    if (s->thread.joinable()) s->thread.join();
  }
}

WatchClient::Totals WatchClient::GetTotals() const {
  Totals t;
  for (const auto& s : shards_) {
    auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
    t.opened += get(s->opened);
    t.connected += get(s->connected);
    t.failed += get(s->failed);
    t.ended += get(s->ended);
    t.bytes += get(s->bytes);
    t.initial += get(s->initial);
    t.stale_stamps += get(s->stale_stamps);
    t.bookmarks += get(s->bookmarks);
    t.errors += get(s->errors);
    t.measured_pods += get(s->measured_pods);
    t.measured_slices += get(s->measured_slices);
    t.added += get(s->added);
    t.modified += get(s->modified);
    t.deleted += get(s->deleted);
  }
  return t;
}

tools::LatencyHistogram WatchClient::Latencies() const {
  tools::LatencyHistogram all = Latencies(true);
  all.Merge(Latencies(false));
  return all;
}

tools::LatencyHistogram WatchClient::Latencies(bool pods) const {
  tools::LatencyHistogram all;
  for (const auto& s : shards_) all.Merge(pods ? s->pod_latencies : s->slice_latencies);
  return all;
}

std::vector<WatchClient::PerWatch> WatchClient::PerWatchResults(int n) const {
  std::vector<PerWatch> out(static_cast<size_t>(std::max(0, n)));
  for (const auto& s : shards_) {
    for (const auto& [index, w] : s->watches) {
      if (index < 0 || index >= n) continue;
      out[static_cast<size_t>(index)] = PerWatch{w->connected, w->open, w->measured};
    }
  }
  return out;
}

std::vector<std::string> WatchClient::FailureSamples() const {
  std::lock_guard lock(failures_mu_);
  std::vector<std::string> out = failures_;
  if (failure_count_ > failures_.size()) {
    out.push_back(absl::StrCat("... ", failure_count_ - failures_.size(), " more"));
  }
  return out;
}

}  // namespace kf::bench
