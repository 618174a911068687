#include "ratelimit/ratelimit_metrics.h"

#include "absl/strings/str_cat.h"

namespace kf::ratelimit {

void RenderAdmissionMetrics(metrics::Writer& w, const Admission& admission) {
  const auto schemas = admission.SchemaStatsSnapshot();
  const auto levels = admission.LevelStatsSnapshot();
  auto labels = [](const std::string& schema, const std::string& level) {
    return absl::StrCat(metrics::Label("flow_schema", schema), ",",
                        metrics::Label("priority_level", level));
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
      w.Sample(name, metrics::Label("priority_level", level), value(st));
    }
  };
  using LS = Admission::LevelStats;
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
}

void RenderEventSpamMetrics(metrics::Writer& w, const EventSpamFilter& filter) {
  w.Single("kube_fanout_event_spam_rejected_total", "counter",
           "Event creations refused (429) by the per-source, per-object spam filter.",
           static_cast<double>(filter.rejected()));
  w.Single("kube_fanout_event_spam_allowed_total", "counter",
           "Event creations the spam filter let through.", static_cast<double>(filter.allowed()));
}

}  // namespace kf::ratelimit
