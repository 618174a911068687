#include "proxy/server/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cache/queue_budget.h"
#include "common/batched_sends.h"
#include "common/strings.h"
#include "proxy/passthrough/coalescer.h"
#include "proxy/serve/serve_stats.h"
#include "proxy/server/metrics_writer.h"
#include "proxy/server/serve_metrics.h"
#include "proxy/sync/cached_resources.h"
#include "ratelimit/event_filter.h"
#include "ratelimit/watch_slots.h"

namespace kf {
namespace {

using metrics::Label;
using metrics::Writer;

// Connections by protocol and HTTP/2 streams (proxy/edge/http2_session.h has the limits).
void RenderTransport(Writer& w, const TransportStats& t, int64_t open_connections) {
  // A family of one sample.
  const auto single = [&w](std::string_view name, std::string_view type, std::string_view help,
                           double value) {
    w.Family(name, type, help);
    w.Sample(name, "", value);
  };
  const auto h2 = t.http2_connections.load();
  w.Family("kube_fanout_connections", "gauge", "Client connections open, by protocol.");
  w.Sample("kube_fanout_connections", Label("protocol", "http/1.1"),
           static_cast<double>(std::max<int64_t>(0, open_connections - h2)));
  w.Sample("kube_fanout_connections", Label("protocol", "h2"), static_cast<double>(h2));
  single("kube_fanout_http2_streams", "gauge",
         "HTTP/2 streams open (at most 100 per connection, as the apiserver).",
         static_cast<double>(t.http2_streams.load()));
  single("kube_fanout_http2_streams_total", "counter", "HTTP/2 streams opened by clients.",
         static_cast<double>(t.http2_streams_total.load()));
  single("kube_fanout_http2_streams_reset_total", "counter",
         "HTTP/2 streams that ended before their answer did (reset by the client, cut for "
         "slowness, or with their connection).",
         static_cast<double>(t.http2_streams_reset.load()));
  single("kube_fanout_http2_header_too_large_total", "counter",
         "HTTP/2 requests refused 431 for a header list past 1 MiB (+320).",
         static_cast<double>(t.http2_header_too_large.load()));
  w.Family("kube_fanout_http2_connections_closed_total", "counter",
           "HTTP/2 connections ended with GOAWAY for what their client did: a header block not "
           "ended in time, too many CONTINUATION frames, resets past the rate limit, or a "
           "callback that failed.");
  static constexpr std::string_view kClosed[] = {"header_block_timeout", "continuations",
                                                 "reset_rate", "callback_failure"};
  for (size_t i = 0; i < std::size(kClosed); ++i) {
    w.Sample("kube_fanout_http2_connections_closed_total", Label("reason", kClosed[i]),
             static_cast<double>(t.http2_closed[i].load()));
  }
  single("kube_fanout_http2_callback_failures_total", "counter",
         "nghttp2 callbacks and HTTP/2 handlers that failed with an exception (stopped at the "
         "boundary).",
         static_cast<double>(t.http2_callback_failures.load()));
  single("kube_fanout_http2_handlers_cancelled_total", "counter",
         "HTTP/2 requests whose client reset the stream before or while they were served: not "
         "started, or their upstream call ended.",
         static_cast<double>(t.http2_handlers_cancelled.load()));
  single("kube_fanout_http2_request_body_dropped_bytes_total", "counter",
         "Body bytes sent with HTTP/2 GET and HEAD requests, consumed and dropped.",
         static_cast<double>(t.http2_body_bytes_dropped.load()));
  w.Family("kube_fanout_request_body_timeouts_total", "counter",
           "Request bodies not sent whole within 60 s of their head (the apiserver's "
           "--request-timeout), by protocol: the read was ended, an Event creation answered 504 "
           "Timeout, a passed-through request ended (HTTP/2: its stream reset).");
  w.Sample("kube_fanout_request_body_timeouts_total", Label("protocol", "http/1.1"),
           static_cast<double>(t.body_timeouts_http1.load()));
  w.Sample("kube_fanout_request_body_timeouts_total", Label("protocol", "h2"),
           static_cast<double>(t.body_timeouts_h2.load()));
  w.Family("kube_fanout_http2_requests_total", "counter",
           "Requests served over HTTP/2, by how they were answered.");
  for (size_t i = 0; i < static_cast<size_t>(Answer::kCount); ++i) {
    const auto answer = static_cast<Answer>(i);
    const std::string_view route = answer == Answer::kRejected ? "rejected" : AnswerName(answer);
    w.Sample("kube_fanout_http2_requests_total", Label("route", route),
             static_cast<double>(t.http2_answered[i].load()));
  }
}

// One row per cached resource: its cache's and reflector's counters.
struct ResourceRow {
  std::string labels;
  Cacher::Stats stats;
  const ReflectorStats* reflector;
  std::chrono::steady_clock::time_point now;
};

struct ResourceFamily {
  const char* name;
  const char* type;
  const char* help;
  double (*value)(const ResourceRow&);
};

// The per-resource families, each declared once: name, type, help, value.
constexpr ResourceFamily kResourceFamilies[] = {
    {"kube_fanout_cache_synced", "gauge", "1 once the resource's cache has listed.",
     [](const ResourceRow& r) { return r.stats.synced ? 1.0 : 0.0; }},
    {"kube_fanout_cache_objects", "gauge", "Objects in the cache.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.objects); }},
    {"kube_fanout_cache_resource_version", "gauge", "The cache's resourceVersion.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.resource_version); }},
    {"kube_fanout_cache_update_age_seconds", "gauge",
     "Seconds since the upstream last moved the cache (event, bookmark or list).",
     [](const ResourceRow& r) {
       return std::chrono::duration<double>(r.now - r.stats.last_update).count();
     }},
    {"kube_fanout_watchers", "gauge", "Open watches served from the cache.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.watchers); }},
    {"kube_fanout_watch_queue_bytes", "gauge", "Event bytes queued to watchers, unsent.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.queued_bytes); }},
    {"kube_fanout_event_window_events", "gauge", "Events kept to resume watches from.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.window_events); }},
    {"kube_fanout_event_window_bytes", "gauge", "Bytes of the events kept.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.window_bytes); }},
    {"kube_fanout_events_dispatched_total", "counter", "Events queued to watchers.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.dispatched); }},
    {"kube_fanout_upstream_events_total", "counter", "Events received from the upstream.",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->events.load()); }},
    {"kube_fanout_upstream_watches_total", "counter",
     "Upstream watch requests (the first, and each resume after a drop or timeout).",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->watches.load()); }},
    {"kube_fanout_upstream_relists_total", "counter",
     "Upstream relists after a 410 or an inconsistent self-check.",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->relists.load()); }},
    {"kube_fanout_upstream_errors_total", "counter", "Failed upstream lists and watches.",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->errors.load()); }},
    {"kube_fanout_upstream_watch_idle_timeouts_total", "counter",
     "Upstream watches dropped after --upstream-watch-idle-timeout without a byte, and resumed.",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->idle_timeouts.load()); }},
    {"kube_fanout_upstream_retry_after_waits_total", "counter",
     "Retries of an upstream LIST or WATCH that waited for the upstream's Retry-After.",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->retry_afters.load()); }},
    {"kube_fanout_upstream_rv_probes_total", "counter",
     "Freshness proofs for consistent reads: consistent LISTs of the resource, each shared by "
     "every read waiting when it started.",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->rv_probes.load()); }},
    {"kube_fanout_cache_content_proofs_total", "counter",
     "Freshness proofs whose list held exactly the cached objects, which proved the cache "
     "current at the list's resourceVersion at once.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.content_proofs); }},
    {"kube_fanout_cache_events_after_proof_total", "counter",
     "Upstream events older than the cache after a content proof advanced it (objects created "
     "and deleted before the proof's list whose events came after it), dropped.",
     [](const ResourceRow& r) { return static_cast<double>(r.stats.events_after_proof); }},
    {"kube_fanout_upstream_progress_watches_total", "counter",
     "Short upstream watches opened to prove a quiet cache current for consistent reads.",
     [](const ResourceRow& r) {
       return static_cast<double>(r.reflector->progress_watches.load());
     }},
    {"kube_fanout_cache_consistency_checks_total", "counter",
     "Self-checks (--cache-check-interval) that compared the cache with the upstream's list at "
     "its resourceVersion, equal or not.",
     [](const ResourceRow& r) {
       return static_cast<double>(r.reflector->checks_consistent +
                                  r.reflector->checks_inconsistent);
     }},
    {"kube_fanout_cache_inconsistencies_total", "counter",
     "Self-checks that found the cache different from the upstream's list at its "
     "resourceVersion (each logged and relisted).",
     [](const ResourceRow& r) { return static_cast<double>(r.reflector->checks_inconsistent); }},
    {"kube_fanout_cache_consistency_checks_skipped_total", "counter",
     "Self-checks that could not compare: the upstream no longer listed the cache's "
     "resourceVersion (410), or another failure.",
     [](const ResourceRow& r) {
       return static_cast<double>(r.reflector->checks_expired + r.reflector->checks_failed);
     }},
    {"kube_fanout_consistent_read_passthroughs_total", "counter",
     "Consistent reads sent to the apiserver at once, within "
     "--consistent-read-passthrough-interval, instead of proving the cache current.",
     [](const ResourceRow& r) {
       return static_cast<double>(r.reflector->consistent_passthroughs.load());
     }},
};

// Warm restart (--cache-snapshot-dir).
void RenderSnapshots(Writer& w, const SnapshotStats& s) {
  w.Family("kube_fanout_cache_snapshot_loads_total", "counter",
           "Snapshots read at start, by result (loaded, or why one was ignored).");
  for (int i = 0; i < SnapshotStats::kCount; ++i) {
    w.Sample("kube_fanout_cache_snapshot_loads_total",
             Label("result", SnapshotStats::ResultName(i)), static_cast<double>(s.loads[i].load()));
  }
  const std::tuple<const char*, const char*, const std::atomic<uint64_t>*> counters[] = {
      {"kube_fanout_cache_snapshot_writes_total", "Snapshot files written.", &s.writes},
      {"kube_fanout_cache_snapshot_write_failures_total",
       "Snapshots not written (too large for --cache-snapshot-max-bytes, or I/O errors).",
       &s.write_failures},
      {"kube_fanout_cache_snapshot_bytes_written_total", "Bytes of snapshot files written.",
       &s.bytes_written},
  };
  for (const auto& [name, help, value] : counters) {
    w.Family(name, "counter", help);
    w.Sample(name, "", static_cast<double>(value->load()));
  }
  w.Family("kube_fanout_cache_snapshot_disabled", "gauge",
           "1 when --cache-snapshot-dir was refused (its mode, or not a directory).");
  w.Sample("kube_fanout_cache_snapshot_disabled", "", s.disabled.load() ? 1 : 0);
}

}  // namespace

std::string RenderMetrics(const CachedResources* cache, const CacheServeStats& serve,
                          const RouteStats& routes, int64_t open_connections) {
  Writer w;
  w.Family("kube_fanout_requests_total", "counter", "Requests by how they were answered.");
  for (size_t i = 0; i < static_cast<size_t>(Answer::kCount); ++i) {
    const auto answer = static_cast<Answer>(i);
    // The log says "reject"; the metric's label has always said "rejected".
    const std::string_view route = answer == Answer::kRejected ? "rejected" : AnswerName(answer);
    w.Sample("kube_fanout_requests_total", Label("route", route),
             static_cast<double>(routes.count(answer)));
  }
  w.Family("kube_fanout_requests_refused_total", "counter",
           "Requests refused before they could be routed or served, by reason "
           "(header_too_large: 431; bad_request: 400, a head that does not parse; "
           "header_timeout: a head begun and not finished within 30 s; tls_handshake: a TLS "
           "handshake that failed or took over 10 s, TCP-only probes included; "
           "handshake_queue: a TLS connection closed unhandshaken because its I/O thread "
           "reached it more than 5 s after it was accepted; token_review_unavailable, "
           "access_review_unavailable: a cached read answered 429 because the TokenReview or "
           "SubjectAccessReview it needed got no answer in time; token_review_throttled: a cached "
           "read answered 429 because its token was new and the budget for new TokenReviews, "
           "--authentication-token-review-qps, was spent). The 431s, 400s and 429s also "
           "count in kube_fanout_requests_total{route=\"rejected\"}.");
  for (size_t i = 0; i < static_cast<size_t>(Refusal::kCount); ++i) {
    w.Sample("kube_fanout_requests_refused_total",
             Label("reason", RefusalName(static_cast<Refusal>(i))),
             static_cast<double>(routes.refused[i].load(std::memory_order_relaxed)));
  }
  w.Family("kube_fanout_upstream_unavailable_total", "counter",
           "Requests answered 503 because no upstream endpoint answered.");
  w.Sample("kube_fanout_upstream_unavailable_total", "",
           static_cast<double>(routes.upstream_unavailable.load()));
  w.Family("kube_fanout_open_connections", "gauge", "Client connections open.");
  w.Sample("kube_fanout_open_connections", "", static_cast<double>(open_connections));
  RenderTransport(w, routes.transport, open_connections);

  RenderServeMetrics(w, serve);
  w.ByLabel("kube_fanout_watch_writes_total", "counter",
            "Writes of watch events (one per wake-up, all that the watcher had queued), by path: "
            "direct (from the wake-up, when the connection took them at once: HTTP/1.1, or "
            "HTTP/2 within the client's windows) or loop (the watch's own loop: a client behind, "
            "the initial state).",
            "path",
            {{"direct", static_cast<double>(serve.watch_writes_direct.load())},
             {"loop", static_cast<double>(serve.watch_writes_loop.load())}});
  w.Family("kube_fanout_watch_batched_sends_total", "counter",
           "Watch writes made from wake-ups as sends in io_uring submissions (--io-uring): one per "
           "HTTP/1.1 watcher's write, one per HTTP/2 connection's batch of frames (plain, or "
           "TLS records); each submission up to 256 sockets' sends.");
  w.Sample("kube_fanout_watch_batched_sends_total", "", static_cast<double>(BatchedSends::sends()));
  w.Family("kube_fanout_watch_batched_submits_total", "counter",
           "io_uring submissions (system calls) that carried those sends.");
  w.Sample("kube_fanout_watch_batched_submits_total", "",
           static_cast<double>(BatchedSends::submits()));
  w.Family("kube_fanout_cache_bytes_written_total", "counter", "Bytes written from the cache.");
  w.Sample("kube_fanout_cache_bytes_written_total", "",
           static_cast<double>(serve.bytes_written.load()));

  if (cache != nullptr && cache->snapshots() != nullptr)
    RenderSnapshots(w, cache->snapshots()->stats());
  if (cache == nullptr || !cache->started()) return w.Take();
  const auto now = std::chrono::steady_clock::now();
  std::vector<ResourceRow> rows;
  for (const auto& e : cache->entries()) {
    rows.push_back({Label("resource", e->cacher->type().GroupResource()), e->cacher->GetStats(),
                    &e->reflector->stats(), now});
    // The protobuf cache of a resource, once a client asked for it: its own rows.
    if (e->proto_cacher && e->proto_started.load()) {
      rows.push_back({absl::StrCat(Label("resource", e->cacher->type().GroupResource()), ",",
                                   Label("encoding", "protobuf")),
                      e->proto_cacher->GetStats(), &e->proto_reflector->stats(), now});
    }
  }
  for (const ResourceFamily& f : kResourceFamilies) {
    w.Family(f.name, f.type, f.help);
    for (const ResourceRow& r : rows) w.Sample(f.name, r.labels, f.value(r));
  }
  w.Family("kube_fanout_upstream_bookmarks", "gauge",
           "1 for what the upstream's watches of the resource showed (state): sent (bookmarks, "
           "which prove the cache current for consistent reads), none (no watch cache upstream: "
           "reads the cache cannot prove current go to the upstream), unknown (not yet told).");
  for (const ResourceRow& r : rows) {
    const UpstreamBookmarks now_shown = r.reflector->upstream_bookmarks.load();
    for (const UpstreamBookmarks b :
         {UpstreamBookmarks::kSent, UpstreamBookmarks::kNone, UpstreamBookmarks::kUnknown}) {
      w.Sample("kube_fanout_upstream_bookmarks",
               absl::StrCat(r.labels, ",", Label("state", UpstreamBookmarksName(b))),
               b == now_shown ? 1 : 0);
    }
  }
  w.Family("kube_fanout_watchers_cut_total", "counter",
           "Watches closed because their client fell behind, by reason (queue_bytes: past "
           "--watcher-max-queue-bytes; total_queue_bytes: among the furthest behind when all "
           "watchers together passed --watchers-max-total-queue-bytes).");
  for (const ResourceRow& r : rows) {
    w.Sample("kube_fanout_watchers_cut_total", absl::StrCat(r.labels, ",reason=\"queue_bytes\""),
             static_cast<double>(r.stats.watchers_cut));
    w.Sample("kube_fanout_watchers_cut_total",
             absl::StrCat(r.labels, ",reason=\"total_queue_bytes\""),
             static_cast<double>(r.stats.watchers_cut_total_budget));
  }
  return w.Take();
}

std::string RenderAdmissionMetrics(const ratelimit::Admission& admission,
                                   int64_t passthrough_in_flight, uint64_t passthrough_rejected) {
  Writer w;
  const auto schemas = admission.SchemaStatsSnapshot();
  const auto levels = admission.LevelStatsSnapshot();
  auto labels = [](const std::string& schema, const std::string& level) {
    return absl::StrCat(Label("flow_schema", schema), ",", Label("priority_level", level));
  };
  w.Family("kube_fanout_admission_dispatched_requests_total", "counter",
           "Requests admitted, by flow schema and priority level.");
  for (const auto& [name, st] : schemas) {
    w.Sample("kube_fanout_admission_dispatched_requests_total", labels(name, st.level),
             static_cast<double>(st.admitted));
  }
  w.Family("kube_fanout_admission_rejected_requests_total", "counter",
           "Requests answered 429, by flow schema, priority level and reason (rate-limited: "
           "the flow's token bucket; queue-full; time-out: waited past the level's limit).");
  for (const auto& [name, st] : schemas) {
    for (const auto& [reason, n] : st.rejected) {
      w.Sample("kube_fanout_admission_rejected_requests_total",
               absl::StrCat(labels(name, st.level), ",reason=\"", reason, "\""),
               static_cast<double>(n));
    }
  }
  auto level_family = [&](const char* name, const char* type, const char* help, auto value) {
    w.Family(name, type, help);
    for (const auto& [level, st] : levels) {
      w.Sample(name, Label("priority_level", level), value(st));
    }
  };
  using LS = ratelimit::Admission::LevelStats;
  level_family("kube_fanout_admission_seats", "gauge",
               "Seats (requests served at once) of each limited priority level.",
               [](const LS& s) { return static_cast<double>(s.seats); });
  level_family("kube_fanout_admission_current_executing_requests", "gauge",
               "Requests holding a seat.",
               [](const LS& s) { return static_cast<double>(s.executing); });
  level_family("kube_fanout_admission_current_inqueue_requests", "gauge",
               "Requests waiting in the level's queues.",
               [](const LS& s) { return static_cast<double>(s.queued); });
  level_family("kube_fanout_admission_queued_requests_total", "counter",
               "Requests admitted after waiting in a queue.",
               [](const LS& s) { return static_cast<double>(s.queued_total); });
  level_family("kube_fanout_admission_wait_seconds_total", "counter",
               "Seconds spent waiting in queues by the requests admitted after waiting.",
               [](const LS& s) { return s.wait_seconds_sum; });
  w.Family("kube_fanout_passthrough_in_flight", "gauge",
           "Passthrough requests (not watches) in flight to the upstream.");
  w.Sample("kube_fanout_passthrough_in_flight", "", static_cast<double>(passthrough_in_flight));
  w.Family("kube_fanout_passthrough_rejected_total", "counter",
           "Passthrough requests answered 429 because --max-passthrough-in-flight were in flight.");
  w.Sample("kube_fanout_passthrough_rejected_total", "", static_cast<double>(passthrough_rejected));
  return w.Take();
}

std::string RenderFilterMetrics(const Coalescer* coalescer,
                                const ratelimit::EventSpamFilter* event_filter) {
  Writer w;
  if (coalescer != nullptr) {
    w.Family("kube_fanout_passthrough_coalesced_total", "counter",
             "Passthrough reads answered with an identical concurrent request's upstream "
             "response.");
    w.Sample("kube_fanout_passthrough_coalesced_total", "",
             static_cast<double>(coalescer->coalesced()));
  }
  if (event_filter != nullptr) {
    w.Family("kube_fanout_event_spam_rejected_total", "counter",
             "Event creations refused (429) by the per-source, per-object spam filter.");
    w.Sample("kube_fanout_event_spam_rejected_total", "",
             static_cast<double>(event_filter->rejected()));
    w.Family("kube_fanout_event_spam_allowed_total", "counter",
             "Event creations the spam filter let through.");
    w.Sample("kube_fanout_event_spam_allowed_total", "",
             static_cast<double>(event_filter->allowed()));
  }
  return w.Take();
}

std::string RenderReviewMetrics(const ReviewStats& authentication,
                                const ReviewStats& authorization) {
  Writer w;
  const auto load = [](const std::atomic<uint64_t>& c) {
    return static_cast<double>(c.load(std::memory_order_relaxed));
  };
  w.Family("kube_fanout_token_reviews_total", "counter",
           "TokenReviews kube-fanout sent to the upstream, by answer (authenticated, "
           "unauthenticated, error: no answer or refused).");
  w.Sample("kube_fanout_token_reviews_total", "result=\"authenticated\"",
           load(authentication.allowed));
  w.Sample("kube_fanout_token_reviews_total", "result=\"unauthenticated\"",
           load(authentication.denied));
  w.Sample("kube_fanout_token_reviews_total", "result=\"error\"", load(authentication.errors));
  w.Family("kube_fanout_token_reviews_throttled_total", "counter",
           "Bearer tokens left unreviewed because the budget for new TokenReviews "
           "(--authentication-token-review-qps) was spent: treated as unknown.");
  w.Sample("kube_fanout_token_reviews_throttled_total", "", load(authentication.throttled));
  w.Family("kube_fanout_token_review_cache_hits_total", "counter",
           "Bearer tokens authenticated from the cache of TokenReview answers.");
  w.Sample("kube_fanout_token_review_cache_hits_total", "", load(authentication.cache_hits));
  w.Family("kube_fanout_access_reviews_total", "counter",
           "SubjectAccessReviews kube-fanout sent to the upstream for cached reads, by answer "
           "(allowed, denied, error: no answer or refused).");
  w.Sample("kube_fanout_access_reviews_total", "result=\"allowed\"", load(authorization.allowed));
  w.Sample("kube_fanout_access_reviews_total", "result=\"denied\"", load(authorization.denied));
  w.Sample("kube_fanout_access_reviews_total", "result=\"error\"", load(authorization.errors));
  w.Family("kube_fanout_access_review_cache_hits_total", "counter",
           "Cached-read authorizations answered from the cache of SubjectAccessReview answers.");
  w.Sample("kube_fanout_access_review_cache_hits_total", "", load(authorization.cache_hits));
  return w.Take();
}

std::string RenderWatchLimitMetrics(const QueueBudget& queues, const WatchSlots& slots,
                                    const WatchSlots& passthrough) {
  Writer w;
  w.Family("kube_fanout_watch_queue_process_bytes", "gauge",
           "Memory the queues of all watchers of the process hold, unsent (what "
           "--watchers-max-total-queue-bytes bounds): each event's object once while any queue "
           "holds it, plus 104 bytes per event queued to each watcher. "
           "kube_fanout_watch_queue_bytes counts each watcher's events whole instead.");
  w.Sample("kube_fanout_watch_queue_process_bytes", "", static_cast<double>(queues.queued()));
  w.Family("kube_fanout_watch_queue_process_limit_bytes", "gauge",
           "--watchers-max-total-queue-bytes (0: unlimited).");
  w.Sample("kube_fanout_watch_queue_process_limit_bytes", "", static_cast<double>(queues.limit()));
  w.Family("kube_fanout_cached_watches_open", "gauge",
           "Watches served from the cache open now, exempt clients aside (what --max-watchers "
           "bounds).");
  w.Sample("kube_fanout_cached_watches_open", "", static_cast<double>(slots.open()));
  w.Family("kube_fanout_passthrough_watches_open", "gauge",
           "Watches passed through to the upstream and tunnels open now, exempt clients aside "
           "(what --max-passthrough-watches bounds); each holds an upstream connection.");
  w.Sample("kube_fanout_passthrough_watches_open", "", static_cast<double>(passthrough.open()));
  const auto refused = [](const WatchSlots& s, WatchSlots::Refused why) {
    return static_cast<double>(s.refused(why));
  };
  w.ByLabel(
      "kube_fanout_watches_refused_total", "counter",
      "Watches answered 429 before they started, by the bound they would pass "
      "(max_watchers, max_watchers_per_user: cached; max_passthrough_watches, "
      "max_passthrough_watches_per_user: passed through, tunnels included).",
      "reason",
      {{"max_watchers", refused(slots, WatchSlots::Refused::kTotal)},
       {"max_watchers_per_user", refused(slots, WatchSlots::Refused::kPerUser)},
       {"max_passthrough_watches", refused(passthrough, WatchSlots::Refused::kTotal)},
       {"max_passthrough_watches_per_user", refused(passthrough, WatchSlots::Refused::kPerUser)}});
  return w.Take();
}

std::string RenderListGzipMetrics(const GzipCache::Stats& gzip) {
  Writer w;
  w.ByLabel("kube_fanout_list_gzip_answers_total", "counter",
            "Compressed answers to cached LISTs, by whether their bytes were compressed for them "
            "(compressed) or shared with an earlier answer to the same list at the same "
            "resourceVersion (shared).",
            "result",
            {{"compressed", static_cast<double>(gzip.compressed)},
             {"shared", static_cast<double>(gzip.shared)}});
  w.Family("kube_fanout_list_gzip_cache_bytes", "gauge",
           "Compressed LIST answers kept to be shared, keys included (what "
           "--list-gzip-cache-bytes bounds).");
  w.Sample("kube_fanout_list_gzip_cache_bytes", "", static_cast<double>(gzip.bytes));
  w.Family("kube_fanout_list_gzip_cache_evictions_total", "counter",
           "Compressed LIST answers dropped to make room for newer ones.");
  w.Sample("kube_fanout_list_gzip_cache_evictions_total", "", static_cast<double>(gzip.evicted));
  return w.Take();
}

std::string RenderUpstreamPoolMetrics(const UpstreamPoolStats& pools) {
  Writer w;
  w.ByLabel("kube_fanout_upstream_pool_stale_total", "counter",
            "Idle keep-alive connections to the upstream that it had closed, by when that was "
            "found (idle: when taken from the pool, before any request was written to it, and "
            "a new connection was used instead; in_use: a reused connection failed under its "
            "request, which was sent again on a new connection if it had no body; a passed-through "
            "request with a body was answered 503).",
            "found",
            {{"idle", static_cast<double>(pools.stale_idle.load(std::memory_order_relaxed))},
             {"in_use", static_cast<double>(pools.stale_in_use.load(std::memory_order_relaxed))}});
  const Http2UpstreamStats& h2 = pools.http2;
  w.Family(
      "kube_fanout_upstream_http2_connections", "gauge",
      "Open HTTP/2 connections to the upstream carrying passthrough requests (--upstream-http2), "
      "each shared by up to the upstream's stream limit.");
  w.Sample("kube_fanout_upstream_http2_connections", "",
           static_cast<double>(h2.connections.load(std::memory_order_relaxed)));
  w.Family("kube_fanout_upstream_http2_streams", "gauge",
           "Passthrough requests open on the upstream's HTTP/2 connections.");
  w.Sample("kube_fanout_upstream_http2_streams", "",
           static_cast<double>(h2.streams.load(std::memory_order_relaxed)));
  w.Family("kube_fanout_upstream_http2_dials_total", "counter",
           "HTTP/2 connections dialed to the upstream.");
  w.Sample("kube_fanout_upstream_http2_dials_total", "",
           static_cast<double>(h2.dialed.load(std::memory_order_relaxed)));
  w.Family("kube_fanout_upstream_http2_lost_total", "counter",
           "HTTP/2 connections to the upstream that ended with streams open (each of their clients "
           "saw its answer cut, as when an HTTP/1.1 upstream connection drops).");
  w.Sample("kube_fanout_upstream_http2_lost_total", "",
           static_cast<double>(h2.lost_with_streams.load(std::memory_order_relaxed)));
  return w.Take();
}

std::string RenderConnectionsRefusedMetrics(uint64_t fd_headroom, uint64_t accept_errors,
                                            uint64_t accept_pauses) {
  Writer w;
  w.ByLabel("kube_fanout_connections_refused_total", "counter",
            "New client connections closed at once, by reason (fd_headroom: the process is near "
            "its descriptor limit, existing connections keep being served; accept_error: the "
            "accept itself failed, e.g. EMFILE).",
            "reason",
            {{"fd_headroom", static_cast<double>(fd_headroom)},
             {"accept_error", static_cast<double>(accept_errors)}});
  w.Family("kube_fanout_tls_accept_pauses_total", "counter",
           "Times the TLS listener stopped accepting for 20 ms because every I/O thread already "
           "had 512 accepted connections whose session had not started (new clients wait in the "
           "kernel's listen queue meanwhile).");
  w.Sample("kube_fanout_tls_accept_pauses_total", "", static_cast<double>(accept_pauses));
  return w.Take();
}

std::string RenderServingCertificateMetrics(uint64_t reloads, uint64_t failures,
                                            int64_t not_after) {
  Writer w;
  w.Family("kube_fanout_serving_certificate_reloads_total", "counter",
           "Times the --tls-cert-file/--tls-private-key-file pair changed on disk, by result "
           "(success: new connections get it; failure: it did not load, the previous pair "
           "stays).");
  w.Sample("kube_fanout_serving_certificate_reloads_total", "result=\"success\"",
           static_cast<double>(reloads));
  w.Sample("kube_fanout_serving_certificate_reloads_total", "result=\"failure\"",
           static_cast<double>(failures));
  w.Family("kube_fanout_serving_certificate_expiration_timestamp_seconds", "gauge",
           "The served certificate's notAfter, Unix seconds.");
  w.Sample("kube_fanout_serving_certificate_expiration_timestamp_seconds", "",
           static_cast<double>(not_after));
  return w.Take();
}

std::string RenderProcessMetrics() {
  // /proc/self/stat: the fields after the command's closing parenthesis, numbered from 3
  // (proc(5)): 14 utime, 15 stime, 22 starttime (clock ticks), 24 rss (pages).
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return "";
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(paren + 2), ' ');
  auto field = [&fields](size_t n) {
    double v = 0;
    return n - 3 < fields.size() && absl::SimpleAtod(fields[n - 3], &v) ? v : 0.0;
  };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  double boot_time = 0;  // /proc/stat's btime: the boot's Unix time.
  std::ifstream proc_stat("/proc/stat");
  for (std::string line; std::getline(proc_stat, line);) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "btime ")) absl::SimpleAtod(rest, &boot_time);
  }
  std::error_code ec;
  double open_fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++open_fds;
  }
  rlimit nofile{};
  getrlimit(RLIMIT_NOFILE, &nofile);

  Writer w;
  w.Family("process_cpu_seconds_total", "counter", "Total user and system CPU time in seconds.");
  w.Sample("process_cpu_seconds_total", "", (field(14) + field(15)) / ticks);
  w.Family("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  w.Sample("process_resident_memory_bytes", "", field(24) * page);
  w.Family("process_open_fds", "gauge", "Number of open file descriptors.");
  w.Sample("process_open_fds", "", open_fds);
  w.Family("process_max_fds", "gauge", "Maximum number of open file descriptors.");
  w.Sample("process_max_fds", "", static_cast<double>(nofile.rlim_cur));
  w.Family("process_start_time_seconds", "gauge",
           "Start time of the process since unix epoch in seconds.");
  w.Sample("process_start_time_seconds", "", boot_time + field(22) / ticks);
  return w.Take();
}

}  // namespace kf
