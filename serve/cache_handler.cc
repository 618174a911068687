#include "serve/cache_handler.h"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/continue_token.h"
#include "cache/selectable_fields.h"
#include "cache/upstream_list.h"
#include "common/strings.h"
#include "common/await_callback.h"
#include "passthrough/coalescer.h"
#include "edge/status_response.h"
#include "upstream/upstream_client.h"

namespace kf {
namespace {

namespace http = beast::http;
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr auto kWriteTimeout = std::chrono::seconds(60);
// How long a read waits for the cache to reach the resourceVersion it must reflect, as the
// apiserver's watch cache waits (waitUntilFreshAndBlock); then the apiserver is asked instead.
constexpr auto kFreshnessWait = std::chrono::milliseconds(3000);

std::string HttpDate() {
  return absl::FormatTime("%a, %d %b %Y %H:%M:%S GMT", absl::Now(), absl::UTCTimeZone());
}

std::string ResponseHead(int code, std::string_view reason, std::optional<size_t> length) {
  std::string head = absl::StrCat("HTTP/1.1 ", code, " ", ToAbsl(reason),
                                  "\r\nCache-Control: no-cache, private\r\nContent-Type: "
                                  "application/json\r\nDate: ",
                                  HttpDate(), "\r\n");
  if (length) {
    absl::StrAppend(&head, "Content-Length: ", *length, "\r\n\r\n");
  } else {
    absl::StrAppend(&head, "Transfer-Encoding: chunked\r\n\r\n");
  }
  return head;
}

// Which requests the cache can answer exactly; everything else passes through.
bool Eligible(const RequestInfo& info, const http::fields& headers) {
  if (info.subresource != "" ||
      (info.verb != "list" && info.verb != "get" && info.verb != "watch")) {
    return false;
  }
  const std::string accept = absl::AsciiStrToLower(ToAbsl(headers[http::field::accept]));
  if (!accept.empty() && accept.find("application/json") == std::string::npos &&
      accept.find("*/*") == std::string::npos) {
    return false;  // Protobuf-only, YAML, ...
  }
  if (accept.find(";as=") != std::string::npos || accept.find("; as=") != std::string::npos) {
    return false;  // Table, PartialObjectMetadata.
  }
  // The apiserver pretty-prints for curl, wget and browsers, and on ?pretty.
  if (PrettyUserAgent(headers[http::field::user_agent]) || info.query.Has("pretty")) return false;
  for (const auto& f : headers) {
    if (absl::StartsWithIgnoreCase(ToAbsl(f.name_string()), "impersonate-")) return false;
  }
  const Query& q = info.query;
  if (q.Has("continue") && info.verb != "list") return false;
  if (q.Has("resourceVersionMatch") && info.verb == "get") return false;
  const auto rvm = q.First("resourceVersionMatch");
  const auto rv = q.First("resourceVersion");
  const bool send_initial = q.Has("sendInitialEvents");
  if (info.verb == "list") {
    if (send_initial || q.Has("watch")) return false;
    if (rvm && *rvm != "NotOlderThan" && *rvm != "Exact") return false;  // The apiserver's 422.
    if (rvm && (!rv || rv->empty())) return false;                       // 422 too.
    if (rvm && *rvm == "Exact" && *rv == "0") return false;              // 422 too.
    if (auto c = q.First("continue")) {
      // With an RV or a match rule: the apiserver's 400/422. A token it would not accept: 400.
      if (rvm || (rv && !rv->empty()) || !DecodeContinue(*c).ok()) return false;
    }
  }
  if (info.verb == "watch") {
    if (send_initial) {
      auto si = ParseGoBool(*q.First("sendInitialEvents"));
      if (!si || !*si || !rvm || *rvm != "NotOlderThan") return false;
      auto bm = q.First("allowWatchBookmarks");
      if (!bm || ParseGoBool(*bm) != true) return false;
    } else if (rvm) {
      return false;
    }
  }
  for (const char* k : {"timeoutSeconds", "limit"}) {
    if (auto v = q.First(k)) {
      int64_t n = 0;
      if (!absl::SimpleAtoi(ToAbsl(*v), &n) || n < 0) return false;
    }
  }
  if (auto v = q.First("allowWatchBookmarks"); v && !ParseGoBool(*v)) return false;
  if (rv && !rv->empty()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(ToAbsl(*rv), &n)) return false;
  }
  return true;
}

std::optional<WatchFilter> MakeFilter(const RequestInfo& info, const ResourceType& type) {
  WatchFilter f;
  if (!type.namespaced && !info.namespace_.empty()) {
    // A namespaced path to a cluster-scoped kind is the apiserver's 404 to give; the one
    // exception is the namespaces resource itself, whose name RequestInfo reads as namespace.
    if (!(type.group.empty() && type.resource == "namespaces" && info.namespace_ == info.name)) {
      return std::nullopt;
    }
  } else {
    f.namespace_ = info.namespace_;
  }
  // What the handler filters by is the query's selectors, however the verb was found: a legacy
  // /watch/ path selects by them too (RequestInfo's copies are authorization's view).
  auto labels = LabelSelector::Parse(info.query.First("labelSelector").value_or(""));
  if (!labels.ok()) return std::nullopt;
  auto parsed = FieldSelector::Parse(info.query.First("fieldSelector").value_or(""));
  if (!parsed.ok()) return std::nullopt;
  if (info.verb == "watch" && !info.name.empty()) {
    // A watch of one object by path (/watch/namespaces/ns/pods/name): the apiserver selects it
    // by metadata.name, and a field selector naming another object is its 400 to give.
    if (type.namespaced && info.namespace_.empty()) return std::nullopt;
    if (parsed->Empty()) {
      parsed = FieldSelector::Parse(absl::StrCat("metadata.name=", EscapeFieldValue(info.name)));
      if (!parsed.ok()) return std::nullopt;
    } else if (parsed->RequiresExactMatch("metadata.name") != info.name) {
      return std::nullopt;
    }
  }
  // The fields this kind accepts, renamed as the apiserver renames them (spec.host → ...).
  auto fields = type.Fields().Convert(*parsed);
  if (!fields.ok()) return std::nullopt;
  f.labels = *std::move(labels);
  f.fields = *std::move(fields);
  f.name = f.fields.RequiresExactMatch("metadata.name");
  return f;
}

}  // namespace

std::chrono::steady_clock::time_point WatchDeadline(std::chrono::steady_clock::time_point now,
                                                   int64_t timeout_seconds) {
  // The apiserver computes time.Duration(timeoutSeconds) * time.Second, which wraps in int64
  // nanoseconds; zero (given or wrapped) means its default, a random duration in
  // [MinRequestTimeout, 2*MinRequestTimeout); a wrapped negative one has already passed.
  const auto ns = static_cast<int64_t>(static_cast<uint64_t>(timeout_seconds) * 1000000000ull);
  if (ns == 0) {
    std::mt19937 rng(std::random_device{}());
    return now + std::chrono::seconds(std::uniform_int_distribution<int64_t>(1800, 3599)(rng));
  }
  if (ns < 0) return now;
  // Past a century nobody can tell the difference; nearer the limit the clock would overflow.
  constexpr int64_t kCentury = int64_t{100} * 365 * 24 * 3600 * 1000000000;
  return now + std::chrono::nanoseconds(std::min(ns, kCentury));
}

namespace {

// Waits (bounded) until the cache's RV reaches `rv`.
asio::awaitable<bool> CatchUp(Cacher& cacher, uint64_t rv, std::chrono::milliseconds timeout) {
  if (cacher.resource_version() >= rv) co_return true;
  auto exec = co_await asio::this_coro::executor;
  auto timer = std::make_shared<asio::steady_timer>(exec);
  auto done = std::make_shared<bool>(false);
  timer->expires_after(timeout);
  cacher.WaitForVersion(rv, [exec, weak = std::weak_ptr<asio::steady_timer>(timer), done] {
    asio::post(exec, [weak, done] {
      *done = true;
      if (auto t = weak.lock()) t->cancel();
    });
  });
  if (!*done) co_await timer->async_wait(use_nothrow);
  co_return cacher.resource_version() >= rv;
}

// The RV a read must reflect: the upstream's current one for "" (a consistent read: probed
// after the request arrived, the probe shared with concurrent readers), N for N, nothing for
// "0". The cache must reach it first; on a quiet resource the reflector is asked to prove
// progress. nullopt: the cache cannot promise it in time; pass through.
asio::awaitable<std::optional<uint64_t>> RequiredVersion(CacheRequest& r,
                                                         std::optional<std::string_view> rv) {
  if (rv && *rv == "0") co_return 0;
  uint64_t need = 0;
  if (rv && !rv->empty()) {
    (void)absl::SimpleAtoi(ToAbsl(*rv), &need);
  } else {
    Reflector& reflector = r.reflector;
    auto probed = co_await AwaitCallback<std::optional<uint64_t>>(
        [&reflector](std::function<void(std::optional<uint64_t>)> done) {
          reflector.ProbeUpstreamVersion(std::move(done));
        },
        std::chrono::milliseconds(10000));
    if (!probed || !*probed) co_return std::nullopt;
    need = **probed;
  }
  if (r.cacher.resource_version() < need) r.reflector.RequestProgress(need, kFreshnessWait);
  if (!co_await CatchUp(r.cacher, need, kFreshnessWait)) co_return std::nullopt;
  co_return need;
}

asio::awaitable<beast::error_code> WriteAll(AnyStream& s,
                                            const std::vector<asio::const_buffer>& b) {
  s.tcp().expires_after(kWriteTimeout);
  auto [ec, n] = co_await asio::async_write(s, b, use_nothrow);
  co_return ec;
}

std::string ChunkHeader(size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), kHex[n & 15]);
    n >>= 4;
  } while (n > 0);
  s += "\r\n";
  return s;
}

// Writes a whole response. Framed as Go's net/http frames a handler's output: Content-Length
// when the body fits its 2 KiB buffer, else chunked (here: one chunk, then the last chunk).
asio::awaitable<beast::error_code> WriteResponse(AnyStream& client, int code,
                                                 std::string_view reason,
                                                 std::vector<asio::const_buffer> body,
                                                 size_t length) {
  constexpr size_t kGoChunkingThreshold = 2048;
  static constexpr std::string_view kTail = "\r\n0\r\n\r\n";
  const bool chunked = length > kGoChunkingThreshold;
  const std::string head =
      ResponseHead(code, reason, chunked ? std::nullopt : std::optional<size_t>(length));
  const std::string chunk = chunked ? ChunkHeader(length) : std::string();
  body.insert(body.begin(), {asio::buffer(head), asio::buffer(chunk)});
  if (chunked) body.push_back(asio::buffer(kTail));
  // Large lists go out in slices of buffers; the caller keeps the items alive meanwhile.
  for (size_t i = 0; i < body.size(); i += 512) {
    std::vector<asio::const_buffer> slice(
        body.begin() + static_cast<std::ptrdiff_t>(i),
        body.begin() + static_cast<std::ptrdiff_t>(std::min(body.size(), i + 512)));
    if (auto ec = co_await WriteAll(client, slice)) co_return ec;
  }
  co_return beast::error_code{};
}

// How a LIST is answered, as the apiserver's watch cache decides (waitUntilFreshAndList).
struct ListPlan {
  std::optional<std::string> rv;  // The RV the list must reflect (RequiredVersion's input).
  bool exact = false;             // The state at exactly that RV, else the latest.
  Cacher::PageRequest page;
};

ListPlan PlanList(const RequestInfo& info, const WatchFilter& filter, const ResourceType& type) {
  const Query& q = info.query;
  ListPlan plan;
  if (auto v = q.First("resourceVersion")) plan.rv = std::string(*v);
  const auto rvm = q.First("resourceVersionMatch");
  int64_t limit = 0;
  if (auto v = q.First("limit")) (void)absl::SimpleAtoi(ToAbsl(*v), &limit);
  if (plan.rv && *plan.rv == "0") limit = 0;  // As the apiserver: RV=0 lists ignore the limit.
  plan.page.limit = limit;
  const std::string prefix = type.namespaced && !filter.namespace_.empty()
                                 ? absl::StrCat(filter.namespace_, "/")
                                 : std::string();
  if (auto c = q.First("continue")) {
    const ContinueToken token = *DecodeContinue(*c);  // Checked by Eligible.
    plan.page.start_key = absl::StrCat(prefix, token.start);
    if (token.resource_version > 0) {
      plan.rv = absl::StrCat(token.resource_version);
      plan.exact = true;
    } else {
      plan.rv.reset();  // "Continue at the latest": a consistent read from the start key.
    }
    return plan;
  }
  const bool rv_n = plan.rv && !plan.rv->empty() && *plan.rv != "0";
  if ((rvm && *rvm == "Exact") || (!rvm && limit > 0 && rv_n)) {
    plan.exact = true;  // Exact, or the legacy meaning of RV=N with a limit.
    return plan;
  }
  if (type.group.empty() && type.resource == "pods") {
    plan.page.node_name_index = filter.fields.RequiresExactMatch("spec.nodeName");
  }
  return plan;
}

asio::awaitable<CacheOutcome> ServeList(CacheRequest& r, const WatchFilter& filter,
                                        const ListPlan& plan, uint64_t at_rv) {
  const ResourceType& t = r.cacher.type();
  Cacher::PageRequest req = plan.page;
  req.at_rv = plan.exact ? at_rv : 0;
  auto page = r.cacher.ListPage(filter, req);
  if (!page.ok()) co_return CacheOutcome{0, 0, false, "declined"};
  Cacher::Page& list = *page;
  std::string meta = absl::StrCat("{\"resourceVersion\":\"", list.resource_version, "\"");
  if (list.has_more && !list.items.empty()) {
    // The key after the last item, relative to the listed prefix (continue.go).
    const CachedObject& last = *list.items.back();
    const bool in_namespace = t.namespaced && !filter.namespace_.empty();
    const std::string start =
        absl::StrCat(in_namespace ? last.name() : last.key(), std::string(1, '\0'));
    absl::StrAppend(&meta, ",\"continue\":\"",
                    EncodeContinue(start, static_cast<int64_t>(list.resource_version)), "\"");
    if (filter.labels.Empty() && filter.fields.Empty()) {
      absl::StrAppend(&meta, ",\"remainingItemCount\":", list.candidates - plan.page.limit);
    }
  }
  meta += "}";
  const std::string open = absl::StrCat("{\"kind\":\"", t.kind, "List\",\"apiVersion\":\"",
                                        t.ApiVersion(), "\",\"metadata\":", meta, ",\"items\":[");
  static constexpr std::string_view kComma = ",";
  static constexpr std::string_view kClose = "]}\n";
  std::vector<asio::const_buffer> body;
  body.reserve(list.items.size() * 3 + 2);
  body.emplace_back(open.data(), open.size());
  size_t length = open.size() + kClose.size();
  for (size_t i = 0; i < list.items.size(); ++i) {
    if (i > 0) body.emplace_back(kComma.data(), kComma.size());
    auto [prefix, rest] = list.items[i]->list_item();
    if (!prefix.empty()) body.emplace_back(prefix.data(), prefix.size());
    body.emplace_back(rest.data(), rest.size());
    length += (i > 0 ? 1 : 0) + prefix.size() + rest.size();
  }
  body.emplace_back(kClose.data(), kClose.size());
  ++r.stats.lists;
  CacheOutcome out{200, length, true, ""};
  if (auto ec = co_await WriteResponse(r.client, 200, "OK", std::move(body), length)) {
    out.error = ec.message();
    out.keep_alive = false;
  }
  r.stats.bytes_written += length;
  co_return out;
}

asio::awaitable<CacheOutcome> ServeGet(CacheRequest& r) {
  const ResourceType& t = r.cacher.type();
  const ObjectPtr obj =
      r.cacher.Get(CachedObject::Key(t.namespaced ? r.info.namespace_ : "", r.info.name)).first;
  std::string body;
  int code = 200;
  std::vector<asio::const_buffer> out;
  static constexpr std::string_view kNewline = "\n";
  size_t length = 0;
  if (obj) {
    length = obj->json().size() + 1;
  } else {
    code = 404;
    body = EncodeStatusBody(NotFoundStatus(t.group, t.resource, r.info.name));
    length = body.size();
  }
  if (obj) {
    out.emplace_back(obj->json().data(), obj->json().size());
    out.emplace_back(kNewline.data(), kNewline.size());
  } else {
    out.emplace_back(body.data(), body.size());
  }
  ++r.stats.gets;
  CacheOutcome result{code, length, true, ""};
  if (auto ec = co_await WriteResponse(r.client, code, code == 200 ? "OK" : "Not Found",
                                       std::move(out), length)) {
    result.error = ec.message();
    result.keep_alive = false;
  }
  r.stats.bytes_written += length;
  co_return result;
}

// Wakes a waiting watch loop from any thread (posted to its executor), without lost wakeups.
struct Wakeup {
  Wakeup(asio::any_io_executor e, AnyStream& c) : exec(e), timer(e), client(c) {}
  asio::any_io_executor exec;
  asio::steady_timer timer;
  AnyStream& client;
  std::shared_ptr<CacheWatcher> watcher;  // Set once registered.
  bool woken = false;

  // On the session's thread: wake the loop; a watcher cut for slowness also aborts a write
  // stuck on its client, so the connection is dropped at once.
  void Wake() {
    woken = true;
    timer.cancel();
    if (watcher && watcher->closed()) client.Cancel();
  }
};

struct WatchParams {
  Cacher::Start start = Cacher::Start::kInitialState;
  uint64_t rv = 0;
  bool bookmarks = false;
  bool initial_events_end = false;
  std::chrono::steady_clock::time_point deadline;
};

asio::awaitable<CacheOutcome> WatchLoop(CacheRequest& r, WatchFilter filter, WatchParams p,
                                        std::shared_ptr<Wakeup> wake, bool* stop_requested) {
  CacheOutcome out{200, 0, false, ""};
  static constexpr std::string_view kCrlf = "\r\n";
  static constexpr std::string_view kLastChunk = "0\r\n\r\n";
  // Called on the cache's thread; the wake-up runs on this session's, batched per thread.
  auto notify = [weak = std::weak_ptr<Wakeup>(wake), wakeups = &r.wakeups] {
    wakeups->Add([weak] {
      if (auto w = weak.lock()) w->Wake();
    });
  };
  auto watcher = r.cacher.Watch(
      Cacher::WatchRequest{std::move(filter), p.start, p.rv, r.watcher_max_queue_bytes, notify});
  const std::string head = ResponseHead(200, "OK", std::nullopt);
  if (!watcher.ok()) {
    // Like the apiserver: HTTP 200, one ERROR event carrying the 410 Status, then the end.
    const std::string event = absl::StrCat(
        "{\"type\":\"ERROR\",\"object\":",
        EncodeStatusJson(KubeStatus{410, "Expired", std::string(watcher.status().message()),
                                    std::nullopt}),
        "}\n");
    const std::string size = ChunkHeader(event.size());
    const std::vector<asio::const_buffer> bufs{asio::buffer(head), asio::buffer(size),
                                               asio::buffer(event), asio::buffer(kCrlf),
                                               asio::buffer(kLastChunk)};
    co_await WriteAll(r.client, bufs);
    co_return out;
  }
  std::shared_ptr<CacheWatcher> w = *std::move(watcher);
  wake->watcher = w;
  struct Unregister {
    Cacher& c;
    CacheWatcher* w;
    ~Unregister() { c.RemoveWatcher(w); }
  } unregister{r.cacher, w.get()};
  ++r.stats.open_watches;
  struct OpenWatch {
    std::atomic<int64_t>& n;
    ~OpenWatch() { --n; }
  } open_watch{r.stats.open_watches};
  const std::vector<asio::const_buffer> head_buf{asio::buffer(head)};
  if (auto ec = co_await WriteAll(r.client, head_buf)) co_return out;

  uint64_t last_rv = std::max(w->start_rv, p.rv);
  bool first = true;
  // As the apiserver's cacher schedules them (cache_watcher.go, nextBookmarkTime): every
  // interval, and 2 s before the watch's deadline so the client can resume from a fresh RV.
  const auto bookmark_interval = std::chrono::milliseconds(r.bookmark_interval_ms);
  auto next_bookmark_after = [&p, bookmark_interval](std::chrono::steady_clock::time_point now) {
    auto next = now + bookmark_interval;
    const auto before_deadline = p.deadline - std::chrono::seconds(2);
    if (before_deadline > now && before_deadline < next) next = before_deadline;
    return next;
  };
  auto next_bookmark = next_bookmark_after(std::chrono::steady_clock::now());
  for (;;) {
    const uint64_t cache_rv = r.cacher.resource_version();
    CacheWatcher::Batch batch = w->Take();
    std::vector<asio::const_buffer> bufs;
    std::string size;
    std::shared_ptr<const std::string> bookmark;
    size_t n = 0;
    for (const Piece& piece : batch.pieces) n += piece.bytes.size();
    if (batch.last_rv > 0) last_rv = batch.last_rv;
    const auto now = std::chrono::steady_clock::now();
    if (first && p.initial_events_end) {
      bookmark = r.cacher.BookmarkFrame(w->start_rv, /*initial_events_end=*/true);
      last_rv = std::max(last_rv, w->start_rv);
    } else if (p.bookmarks && now >= next_bookmark) {
      last_rv = std::max(last_rv, cache_rv);
      bookmark = r.cacher.BookmarkFrame(last_rv);
      next_bookmark = next_bookmark_after(now);
    }
    first = false;
    if (bookmark) n += bookmark->size();
    if (n > 0) {
      size = ChunkHeader(n);
      bufs.push_back(asio::buffer(size));
      for (const Piece& piece : batch.pieces)
        bufs.emplace_back(piece.bytes.data(), piece.bytes.size());
      if (bookmark) bufs.push_back(asio::buffer(*bookmark));
      bufs.push_back(asio::buffer(kCrlf));
      if (auto ec = co_await WriteAll(r.client, bufs)) {
        out.error = ec.message();
        co_return out;
      }
      out.bytes += n;
      r.stats.bytes_written += n;
    }
    if (batch.closed) {
      if (batch.close_reason == "too slow") {
        // The client is not reading: no polite end can reach it. Drop the connection; the
        // client re-watches from the last RV it received.
        out.error = "watcher too slow";
        co_return out;
      }
      break;
    }
    if (*stop_requested || r.stopping || now >= p.deadline) break;
    if (!wake->woken) {
      auto until = p.deadline;
      if (p.bookmarks) until = std::min(until, next_bookmark);
      wake->timer.expires_at(until);
      co_await wake->timer.async_wait(use_nothrow);
    }
    wake->woken = false;
  }
  const std::vector<asio::const_buffer> last{asio::buffer(kLastChunk)};
  co_await WriteAll(r.client, last);
  co_return out;
}

// Completes when the client closes its end (or sends something unexpected).
asio::awaitable<void> ClientGone(AnyStream& client, beast::flat_buffer& buffer) {
  for (;;) {
    client.tcp().expires_never();
    auto [ec, n] = co_await client.async_read_some(buffer.prepare(4096), use_nothrow);
    if (ec) co_return;
    buffer.commit(n);
  }
}

asio::awaitable<CacheOutcome> ServeWatch(CacheRequest& r, WatchFilter filter,
                                         std::function<void()>& stop_hook) {
  using namespace asio::experimental::awaitable_operators;
  const Query& q = r.info.query;
  WatchParams p;
  p.bookmarks = q.First("allowWatchBookmarks").has_value() &&
                ParseGoBool(*q.First("allowWatchBookmarks")) == true;
  const bool send_initial = q.Has("sendInitialEvents");
  const auto rv = q.First("resourceVersion");
  int64_t timeout_seconds = 0;
  if (auto t = q.First("timeoutSeconds")) (void)absl::SimpleAtoi(ToAbsl(*t), &timeout_seconds);
  p.deadline = WatchDeadline(std::chrono::steady_clock::now(), timeout_seconds);
  if (send_initial) {
    // WatchList: the state at (at least) the requested RV, its end marked by a bookmark.
    auto need = co_await RequiredVersion(r, rv);
    if (!need) co_return CacheOutcome{0, 0, false, "declined"};
    p.start = Cacher::Start::kInitialState;
    p.initial_events_end = true;
  } else if (!rv || rv->empty()) {
    // "Get state and start at most recent": the state must be at least the upstream's now.
    if (!co_await RequiredVersion(r, rv)) co_return CacheOutcome{0, 0, false, "declined"};
    p.start = Cacher::Start::kInitialState;
  } else if (*rv == "0") {
    p.start = Cacher::Start::kInitialState;
  } else {
    (void)absl::SimpleAtoi(ToAbsl(*rv), &p.rv);
    p.start = Cacher::Start::kAfterVersion;
  }
  ++r.stats.watches;
  auto wake = std::make_shared<Wakeup>(co_await asio::this_coro::executor, r.client);
  bool stop_requested = false;
  stop_hook = [&stop_requested, weak = std::weak_ptr<Wakeup>(wake)] {
    stop_requested = true;
    if (auto w = weak.lock()) {
      w->woken = true;
      w->timer.cancel();
    }
  };
  struct ClearHook {
    std::function<void()>& h;
    ~ClearHook() { h = nullptr; }
  } clear{stop_hook};
  auto result = co_await (WatchLoop(r, std::move(filter), p, wake, &stop_requested) ||
                          ClientGone(r.client, r.client_buffer));
  if (result.index() == 0) co_return std::get<0>(result);
  co_return CacheOutcome{200, 0, false, "client closed"};
}

}  // namespace

asio::awaitable<std::optional<CacheOutcome>> ServeFromCache(CacheRequest& r,
                                                            std::function<void()>& stop_hook) {
  if (!r.cacher.synced() || !Eligible(r.info, r.headers)) {
    ++r.stats.declined;
    co_return std::nullopt;
  }
  auto filter = MakeFilter(r.info, r.cacher.type());
  if (!filter) {
    ++r.stats.declined;
    co_return std::nullopt;  // The apiserver words selector errors itself.
  }
  const std::string authorization(r.headers[http::field::authorization]);
  if (!co_await r.access.Allowed(r.passthrough_pool, authorization, r.info)) {
    ++r.stats.declined;
    co_return std::nullopt;
  }
  if (r.info.verb == "watch") {
    CacheOutcome out = co_await ServeWatch(r, *std::move(filter), stop_hook);
    if (out.status == 0) {
      ++r.stats.declined;
      co_return std::nullopt;
    }
    co_return out;
  }
  if (r.info.verb == "get") {
    if (!co_await RequiredVersion(r, r.info.query.First("resourceVersion"))) {
      ++r.stats.declined;
      co_return std::nullopt;
    }
    co_return co_await ServeGet(r);
  }
  const ListPlan plan = PlanList(r.info, *filter, r.cacher.type());
  auto need = co_await RequiredVersion(
      r, plan.rv ? std::optional<std::string_view>(*plan.rv) : std::nullopt);
  if (!need) {
    ++r.stats.declined;
    co_return std::nullopt;
  }
  CacheOutcome out = co_await ServeList(r, *filter, plan, *need);
  if (out.status == 0) {
    ++r.stats.declined;  // The state at that RV has left the window: the apiserver has it.
    co_return std::nullopt;
  }
  co_return out;
}

}  // namespace kf
