#include "proxy/sync/sync_metrics.h"

#include <chrono>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kf {
namespace {

using metrics::Label;
using metrics::Writer;

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
     "--consistent-read-passthrough-interval or (GETs) --consistent-get-passthrough-qps, instead "
     "of proving the cache current.",
     [](const ResourceRow& r) {
       return static_cast<double>(r.reflector->consistent_passthroughs.load());
     }},
};

// Warm restart (--cache-snapshot-dir).
void RenderSnapshotMetrics(metrics::Writer& w, const SnapshotStats& s) {
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
  w.Single("kube_fanout_cache_snapshot_disabled", "gauge",
           "1 when --cache-snapshot-dir was refused (its mode, or not a directory).",
           s.disabled.load() ? 1 : 0);
}

std::vector<ResourceRow> Rows(const CachedResources& cache) {
  const auto now = std::chrono::steady_clock::now();
  std::vector<ResourceRow> rows;
  for (const auto& e : cache.entries()) {
    rows.push_back({Label("resource", e->cacher->type().GroupResource()), e->cacher->GetStats(),
                    &e->reflector->stats(), now});
    // The protobuf cache of a resource, once a client asked for it: its own rows.
    if (e->proto_cacher && e->proto_started.load()) {
      rows.push_back({absl::StrCat(Label("resource", e->cacher->type().GroupResource()), ",",
                                   Label("encoding", "protobuf")),
                      e->proto_cacher->GetStats(), &e->proto_reflector->stats(), now});
    }
  }
  return rows;
}

// Per resource: the declared families, then the upstream's bookmarks and the watchers cut.
void RenderResourceMetrics(Writer& w, const std::vector<ResourceRow>& rows) {
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
  w.Family("kube_fanout_cache_backfills_total", "counter",
           "Watch history filled in from the upstream for watches resumed from before a window "
           "that began at a LIST, by result (filled; too_old: the upstream answered 410; failed: "
           "no answer in time, or it did not fit the window).");
  for (const ResourceRow& r : rows) {
    const std::pair<const char*, const std::atomic<uint64_t>*> results[] = {
        {"filled", &r.reflector->backfills_filled},
        {"too_old", &r.reflector->backfills_too_old},
        {"failed", &r.reflector->backfills_failed}};
    for (const auto& [result, count] : results) {
      w.Sample("kube_fanout_cache_backfills_total",
               absl::StrCat(r.labels, ",", Label("result", result)),
               static_cast<double>(count->load()));
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
}

}  // namespace

void RenderCacheMetrics(metrics::Writer& w, const CachedResources& cache) {
  if (cache.snapshots() != nullptr) RenderSnapshotMetrics(w, cache.snapshots()->stats());
  if (cache.started()) RenderResourceMetrics(w, Rows(cache));
}

}  // namespace kf
