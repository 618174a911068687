#include "proxy/server/serve_metrics.h"

#include <string>

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
  w.Family("kube_fanout_cache_protobuf_requests_total", "counter",
           "Cached reads (lists, gets, watches) answered in protobuf.");
  w.Sample("kube_fanout_cache_protobuf_requests_total", "",
           static_cast<double>(serve.protobuf.load()));
  w.Family("kube_fanout_cache_watches_vouched_total", "counter",
           "Watches from an RV before their cache's window, started at the window's start "
           "because the resource's other encoding's cache showed nothing they would see between "
           "(instead of a 410).");
  w.Sample("kube_fanout_cache_watches_vouched_total", "",
           static_cast<double>(serve.watches_vouched.load()));
  w.Family("kube_fanout_cache_initializing_refused_total", "counter",
           "Reads of cached resources refused with the apiserver's 429 \"storage is "
           "(re)initializing\" because their cache had not synced yet (watches; LISTs with a "
           "selector or without a limit), instead of passing them through.");
  w.Sample("kube_fanout_cache_initializing_refused_total", "",
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
  w.Family("kube_fanout_cache_declined_total", "counter",
           "Reads of cached resources passed through (not answerable exactly, or not allowed).");
  w.Sample("kube_fanout_cache_declined_total", "", static_cast<double>(serve.declined.load()));
  w.Family("kube_fanout_cache_passed_through_total", "counter",
           "Reads of cached resources passed through, by why (the reasons of "
           "proxy/serve/README.md's decision table).");
  for (size_t i = 1; i < kPassReasons; ++i) {  // (0: none.)
    const std::string label =
        "reason=\"" + std::string(PassReasonName(static_cast<PassReason>(i))) + "\"";
    w.Sample("kube_fanout_cache_passed_through_total", label,
             static_cast<double>(serve.passed[i].load()));
  }
  w.Family(
      "kube_fanout_cache_watches_sent_back_total", "counter",
      "Watches of cached resources passed through for a reason that passes (their "
      "SubjectAccessReview said no, or their cache had not synced) and sent upstream with "
      "timeoutSeconds at most twice --authorization-webhook-cache-unauthorized-ttl (at least 5 s), "
      "so that the client resumes them from the cache once it can answer them.");
  w.Sample("kube_fanout_cache_watches_sent_back_total", "",
           static_cast<double>(serve.watches_sent_back.load()));
}

}  // namespace kf
