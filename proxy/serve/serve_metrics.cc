#include "proxy/serve/serve_metrics.h"

#include "proxy/edge/batched_sends.h"

namespace kf {

void RenderServeMetrics(metrics::Writer& w, const CacheServeStats& serve) {
  w.Family("kube_fanout_cache_requests_total", "counter",
           "Reads answered from the cache, by verb.");
  w.Sample("kube_fanout_cache_requests_total", "verb=\"list\"",
           static_cast<double>(serve.lists.load()));
  w.Sample("kube_fanout_cache_requests_total", "verb=\"get\"",
           static_cast<double>(serve.gets.load()));
  w.Sample("kube_fanout_cache_requests_total", "verb=\"watch\"",
           static_cast<double>(serve.watches.load()));
  w.Single("kube_fanout_cache_protobuf_requests_total", "counter",
           "Cached reads (lists, gets, watches) answered in protobuf.",
           static_cast<double>(serve.protobuf.load()));
  w.Single("kube_fanout_cache_cbor_requests_total", "counter",
           "Cached reads (lists, gets, watches) answered in CBOR.",
           static_cast<double>(serve.cbor.load()));
  w.Single("kube_fanout_cache_watches_vouched_total", "counter",
           "Watches from an RV before their cache's window, started at the window's start "
           "because the resource's other encoding's cache showed nothing they would see between "
           "(instead of a 410).",
           static_cast<double>(serve.watches_vouched.load()));
  w.Single("kube_fanout_cache_initializing_refused_total", "counter",
           "Reads of cached resources refused with the apiserver's 429 \"storage is "
           "(re)initializing\" because their cache had not synced yet (watches; LISTs with a "
           "selector or without a limit), instead of passing them through.",
           static_cast<double>(serve.initializing.load()));
  w.ByLabel("kube_fanout_cache_unfresh_refused_total", "counter",
            "Reads of cached resources refused because their cache did not become fresh enough "
            "within 3 s, instead of passing them through: reason=\"too_large\" (an RV it did "
            "not reach: the apiserver's 504 \"Too large resource version\"), "
            "reason=\"unproven\" (a consistent read it could not prove current: 429 with "
            "Retry-After).",
            "reason",
            {{"too_large", static_cast<double>(serve.unfresh_too_large.load())},
             {"unproven", static_cast<double>(serve.unfresh_unproven.load())}});
  w.Single("kube_fanout_cache_declined_total", "counter",
           "Reads of cached resources passed through (not answerable exactly, or not allowed).",
           static_cast<double>(serve.declined.load()));
  w.Family("kube_fanout_cache_passed_through_total", "counter",
           "Reads of cached resources passed through, by why (the reasons of "
           "proxy/serve/README.md's decision table).");
  for (size_t i = 1; i < kPassReasons; ++i) {  // (0: none.)
    w.Sample("kube_fanout_cache_passed_through_total",
             metrics::Label("reason", PassReasonName(static_cast<PassReason>(i))),
             static_cast<double>(serve.passed[i].load()));
  }
  w.Single(
      "kube_fanout_cache_watches_sent_back_total", "counter",
      "Watches of cached resources passed through because their SubjectAccessReview said no "
      "(the apiserver's authorizer may say yes before the denial expires) and sent upstream with "
      "timeoutSeconds at most twice --authorization-webhook-cache-unauthorized-ttl (at least 5 s), "
      "so that the client resumes them from the cache once it can answer them.",
      static_cast<double>(serve.watches_sent_back.load()));
}

void RenderWatchWriteMetrics(metrics::Writer& w, const CacheServeStats& serve) {
  w.ByLabel("kube_fanout_watch_writes_total", "counter",
            "Writes of watch events (one per wake-up, all that the watcher had queued), by path: "
            "direct (from the wake-up, when the connection took them at once: HTTP/1.1, or "
            "HTTP/2 within the client's windows) or loop (the watch's own loop: a client behind, "
            "the initial state).",
            "path",
            {{"direct", static_cast<double>(serve.watch_writes_direct.load())},
             {"loop", static_cast<double>(serve.watch_writes_loop.load())}});
  serve.watch_delay.Write(
      w, "kube_fanout_watch_delay_seconds",
      "Watch writes of events from the cache, by the time from the arrival of the oldest event "
      "written from the upstream to the write (a write straight from a wake-up: to the end of its "
      "I/O thread's round of wake-ups, when the round's sends have gone out): kube-fanout's own "
      "part of an event's way to a watcher, which the upstream's part precedes.");
  w.Single("kube_fanout_watch_batched_sends_total", "counter",
           "Watch writes made from wake-ups as sends in io_uring submissions (--io-uring): one per "
           "HTTP/1.1 watcher's write, one per HTTP/2 connection's batch of frames (plain, or "
           "TLS records); each submission up to 256 sockets' sends.",
           static_cast<double>(BatchedSends::sends()));
  w.Single("kube_fanout_watch_batched_submits_total", "counter",
           "io_uring submissions (system calls) that carried those sends.",
           static_cast<double>(BatchedSends::submits()));
  w.Single("kube_fanout_cache_bytes_written_total", "counter", "Bytes written from the cache.",
           static_cast<double>(serve.bytes_written.load()));
}

void RenderWatchLimitMetrics(metrics::Writer& w, const QueueBudget& queues, const WatchSlots& slots,
                             const WatchSlots& passthrough) {
  w.Single("kube_fanout_watch_queue_process_bytes", "gauge",
           "Memory the queues of all watchers of the process hold, unsent (what "
           "--watchers-max-total-queue-bytes bounds): each event's object once while any queue "
           "holds it, plus 104 bytes per event queued to each watcher. "
           "kube_fanout_watch_queue_bytes counts each watcher's events whole instead.",
           static_cast<double>(queues.queued()));
  w.Single("kube_fanout_watch_queue_process_limit_bytes", "gauge",
           "--watchers-max-total-queue-bytes (0: unlimited).", static_cast<double>(queues.limit()));
  w.Single("kube_fanout_cached_watches_open", "gauge",
           "Watches served from the cache open now, exempt clients aside (what --max-watchers "
           "bounds).",
           static_cast<double>(slots.open()));
  w.Single("kube_fanout_passthrough_watches_open", "gauge",
           "Watches passed through to the upstream and tunnels open now, exempt clients aside "
           "(what --max-passthrough-watches bounds); each holds an upstream connection.",
           static_cast<double>(passthrough.open()));
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
}

void RenderListGzipMetrics(metrics::Writer& w, const GzipCache::Stats& gzip) {
  w.ByLabel("kube_fanout_list_gzip_answers_total", "counter",
            "Compressed answers to cached LISTs, by whether their bytes were compressed for them "
            "(compressed) or shared with an earlier answer to the same list at the same "
            "resourceVersion (shared).",
            "result",
            {{"compressed", static_cast<double>(gzip.compressed)},
             {"shared", static_cast<double>(gzip.shared)}});
  w.Single("kube_fanout_list_gzip_cache_bytes", "gauge",
           "Compressed LIST answers kept to be shared, keys included (what "
           "--list-gzip-cache-bytes bounds).",
           static_cast<double>(gzip.bytes));
  w.Single("kube_fanout_list_gzip_cache_evictions_total", "counter",
           "Compressed LIST answers dropped to make room for newer ones.",
           static_cast<double>(gzip.evicted));
}

}  // namespace kf
