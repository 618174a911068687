#include "proxy/server/metrics.h"

namespace kf {

std::string RenderMetrics(const std::vector<MetricsRenderer>& renderers) {
  metrics::Writer w;
  for (const MetricsRenderer& render : renderers) render(w);
  return w.Take();
}

void RenderConnectionsRefusedMetrics(metrics::Writer& w, uint64_t fd_headroom,
                                     uint64_t accept_errors, uint64_t accept_pauses) {
  w.ByLabel("kube_fanout_connections_refused_total", "counter",
            "New client connections closed at once, by reason (fd_headroom: the process is near "
            "its descriptor limit, existing connections keep being served; accept_error: the "
            "accept itself failed, e.g. EMFILE).",
            "reason",
            {{"fd_headroom", static_cast<double>(fd_headroom)},
             {"accept_error", static_cast<double>(accept_errors)}});
  w.Single("kube_fanout_tls_accept_pauses_total", "counter",
           "Times the TLS listener stopped accepting for 20 ms because every I/O thread already "
           "had 512 accepted connections whose session had not started (new clients wait in the "
           "kernel's listen queue meanwhile).",
           static_cast<double>(accept_pauses));
}

void RenderServingCertificateMetrics(metrics::Writer& w, uint64_t reloads, uint64_t failures,
                                     int64_t not_after) {
  w.Family("kube_fanout_serving_certificate_reloads_total", "counter",
           "Times the --tls-cert-file/--tls-private-key-file pair changed on disk, by result "
           "(success: new connections get it; failure: it did not load, the previous pair "
           "stays).");
  w.Sample("kube_fanout_serving_certificate_reloads_total", "result=\"success\"",
           static_cast<double>(reloads));
  w.Sample("kube_fanout_serving_certificate_reloads_total", "result=\"failure\"",
           static_cast<double>(failures));
  w.Single("kube_fanout_serving_certificate_expiration_timestamp_seconds", "gauge",
           "The served certificate's notAfter, Unix seconds.", static_cast<double>(not_after));
}

}  // namespace kf
