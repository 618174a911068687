#include "proxy/server/server.h"

#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <csignal>
#include <fstream>
#include <limits>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/api/json.h"
#include "common/strings.h"
#include "common/use_nothrow.h"
#include "proxy/edge/batched_sends.h"
#include "proxy/edge/client_cert.h"
#include "proxy/edge/http2_session.h"
#include "proxy/server/metrics.h"
#include "proxy/upstream/upstream_client.h"
#include "rapidjson/document.h"

namespace kf {

Server::Server(ProxyOptions options, UpstreamConfig upstream, const Logger& log)
    : options_(std::move(options)), upstream_(std::move(upstream)), log_(log) {}

Server::~Server() {
  for (auto& w : workers_) w->StopNow();
  for (auto& w : workers_) w->Join();
}

absl::Status Server::Listen(const std::string& address, asio::ip::tcp::acceptor& acceptor,
                            uint16_t* port) {
  auto hp = HostPort::Parse(address);
  if (!hp.ok()) return hp.status();
  beast::error_code ec;
  const auto ip = asio::ip::make_address(hp->host, ec);
  if (ec)
    return absl::InvalidArgumentError(
        absl::StrCat("listen address \"", hp->host, "\": ", ec.message()));
  const asio::ip::tcp::endpoint ep(ip, hp->port);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("listen on ", address, ": ", ec.message()));
  *port = acceptor.local_endpoint().port();
  return absl::OkStatus();
}

absl::Status Server::Start() {
  h2_limits_ = MakeHttp2Limits(options_);
  // Everything that can fail is checked before anything is served.
  for (auto step : {&Server::MakeUpstreamTls, &Server::MakeEventsUpstream, &Server::MakeCache,
                    &Server::MakeAdmission, &Server::MakeServerTls, &Server::ListenAll}) {
    if (absl::Status s = (this->*step)(); !s.ok()) return s;
  }
  if (options_.coalesce_reads) coalescer_ = std::make_unique<Coalescer>();
  if (options_.event_spam_filter) {
    event_filter_ =
        std::make_unique<ratelimit::EventSpamFilter>(ratelimit::EventSpamFilter::Options{});
  }
  BuildSharedStages();
  UseIoUring();
  if (absl::Status s = StartWorkers(); !s.ok()) return s;
  LogServing();
  WarnInsecureUpstream();
  return absl::OkStatus();
}

absl::Status Server::MakeServerTls() {
  if (!options_.secure_listen.empty()) {
    server_tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    server_tls_->set_options(asio::ssl::context::default_workarounds |
                             asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3);
    if (auto s = ConfigureServerTls(server_tls_->native_handle(), options_.tls_cipher_suites,
                                    options_.tls_min_version);
        !s.ok()) {
      return s;
    }
    serving_cert_ =
        std::make_unique<ServingCertificate>(options_.tls_cert_file, options_.tls_private_key_file);
    if (auto s = serving_cert_->Load(); !s.ok()) return s;
    serving_cert_->Install(server_tls_->native_handle());
    if (!options_.client_ca_file.empty() || !options_.requestheader_client_ca_file.empty()) {
      ClientCertConfig certs{options_.client_ca_file, options_.requestheader_client_ca_file,
                             options_.requestheader_allowed_names};
      if (auto s = RequestClientCertificates(server_tls_->native_handle(), certs); !s.ok()) {
        return s;
      }
    }
    if (auto s = EnableSessionResumption(
            server_tls_->native_handle(),
            {options_.client_ca_file, options_.requestheader_client_ca_file},
            options_.requestheader_allowed_names);
        !s.ok()) {
      return s;
    }
    OfferHttp2(*server_tls_);  // ALPN: h2, then http/1.1.
  }
  return absl::OkStatus();
}

absl::Status Server::ListenAll() {
  // Headroom kept below the descriptor limit for the connections already open (their upstream
  // connections, files): 5% of the limit, at least 64, at most 4096.
  if (rlimit nofile{}; getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    const auto limit = static_cast<int64_t>(nofile.rlim_cur);
    fd_refuse_at_ = static_cast<int>(
        std::max<int64_t>(limit - std::clamp<int64_t>(limit / 20, 64, 4096), limit / 2));
  }
  if (!options_.listen.empty()) {
    if (auto s = Listen(options_.listen, plain_acceptor_, &listen_port_); !s.ok()) return s;
  }
  if (!options_.secure_listen.empty()) {
    if (auto s = Listen(options_.secure_listen, tls_acceptor_, &secure_listen_port_); !s.ok())
      return s;
  }
  if (!options_.metrics_listen.empty()) {
    if (auto s = Listen(options_.metrics_listen, metrics_acceptor_, &metrics_listen_port_); !s.ok())
      return s;
  }

  return absl::OkStatus();
}

absl::Status Server::StartWorkers() {
  const unsigned threads = options_.threads > 0 ? static_cast<unsigned>(options_.threads)
                                                : std::max(1u, std::thread::hardware_concurrency());
  const WorkerUpstream up = WorkerUpstreamFor(threads);
  for (unsigned i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>(up));
  session_workers_ = workers_.size();
  const SharedStages shared = Stages();
  for (auto& w : workers_) w->BuildPipeline(shared, log_, route_stats_);
  if (cache_) workers_.push_back(std::make_unique<Worker>(up));
  for (auto& w : workers_) w->Start();
  if (cache_) {
    // Reflectors live on their own thread, with its pool of kube-fanout's own connections.
    cache_->Start(workers_.back()->ioc(), workers_.back()->own_pool(),
                  workers_.back()->events_own_pool(),
                  [creds = own_credentials_.get()] { return creds->Header(); });
  }
  // Only the cache and admission ask the apiserver about clients.
  if (cache_ || admission_) {
    asio::co_spawn(workers_.back()->ioc(), CheckDelegation(workers_.back()->own_pool()),
                   asio::detached);
  } else {
    delegation_checked_ = true;
  }
  if (admission_) asio::co_spawn(main_ioc_, AdmissionLoop(), asio::detached);
  if (serving_cert_) asio::co_spawn(main_ioc_, ServingCertificateLoop(), asio::detached);
  asio::co_spawn(main_ioc_, StormLogLoop(), asio::detached);
  if (options_.heap_trim_interval > absl::ZeroDuration()) {
    asio::co_spawn(main_ioc_, HeapTrimLoop(), asio::detached);
  }
  if (plain_acceptor_.is_open()) {
    asio::co_spawn(main_ioc_, AcceptLoop(plain_acceptor_, false), asio::detached);
  }
  if (tls_acceptor_.is_open()) {
    asio::co_spawn(main_ioc_, AcceptLoop(tls_acceptor_, true), asio::detached);
  }
  if (metrics_acceptor_.is_open()) {
    PipelineStages stages;
    stages.routes.is_local = &LocalHandler::Serves;
    stages.local = local_.get();
    stages.relay = &not_found_;
    metrics_pipeline_ = std::make_unique<Pipeline>(std::move(stages), log_, route_stats_);
    asio::co_spawn(main_ioc_, AcceptLoop(metrics_acceptor_, false, metrics_pipeline_.get()),
                   asio::detached);
  }
  return absl::OkStatus();
}

void Server::UseIoUring() {
  if (!options_.io_uring) return;
  if (const absl::Status s = BatchedSends::Probe(); !s.ok()) {
    // Expected under containerd's and Docker's default seccomp profiles: not a warning.
    log_.Info("io_uring unavailable: watch events go out one write per socket",
              {{"error", std::string(s.message())}});
    return;
  }
  BatchedSends::Enable(true);
  io_uring_ = true;
}

void Server::LogServing() const {
  std::string upstreams;
  for (const auto& ep : upstream_.endpoints)
    absl::StrAppend(&upstreams, upstreams.empty() ? "" : ",", ep.Url());
  log_.Info(
      "serving",
      {{"listen",
        options_.listen.empty() ? "" : absl::StrCat(options_.listen, " (port ", listen_port_, ")")},
       {"secure_listen",
        options_.secure_listen.empty()
            ? ""
            : absl::StrCat(options_.secure_listen, " (port ", secure_listen_port_, ")")},
       {"metrics_listen",
        options_.metrics_listen.empty()
            ? ""
            : absl::StrCat(options_.metrics_listen, " (port ", metrics_listen_port_, ")")},
       {"upstream", upstreams},
       {"upstream_source", upstream_.source},
       {"threads", static_cast<int64_t>(session_workers_)},
       {"io_uring", io_uring_}});
}

void Server::BuildSharedStages() {
  local_ =
      std::make_unique<LocalHandler>(health_, [this] { return RenderMetrics(MetricsRenderers()); });
  if (admission_) {
    admission_filter_ = std::make_unique<AdmissionFilter>(*admission_);
    passthrough_charge_ = std::make_unique<PassthroughCharge>(*admission_);
  }
  if (coalescer_)
    coalescing_filter_ = std::make_unique<CoalescingFilter>(*coalescer_, request_header_);
  if (options_.max_passthrough_in_flight > 0) {
    in_flight_cap_ = std::make_unique<InFlightCap>(options_.max_passthrough_in_flight);
  }
  if (event_filter_) event_spam_gate_ = std::make_unique<EventSpamGate>(*event_filter_);
  long_running_cap_ = std::make_unique<LongRunningCap>(passthrough_slots_);
  if (options_.list_threads > 0) {
    list_pool_ = std::make_unique<ListPool>(static_cast<size_t>(options_.list_threads));
  }
}

SharedStages Server::Stages() {
  SharedStages s;
  s.local = local_.get();
  s.admission = admission_filter_.get();
  s.passthrough_charge = passthrough_charge_.get();
  s.expect_continue = &continue_filter_;
  s.coalescing = coalescing_filter_.get();
  s.in_flight = in_flight_cap_.get();
  s.long_running = long_running_cap_.get();
  s.event_spam = event_spam_gate_.get();
  s.cache = cache_.get();
  s.cache_stats = &cache_stats_;
  s.watch.max_queue_bytes = static_cast<size_t>(options_.watcher_max_queue_bytes);
  s.watch.total_queue = &watch_queue_budget_;
  s.watch.slots = &watch_slots_;
  s.watch.bookmark_interval =
      std::chrono::milliseconds(absl::ToInt64Milliseconds(options_.watch_bookmark_interval));
  s.watch.consistent_passthrough_interval = std::chrono::milliseconds(
      absl::ToInt64Milliseconds(options_.consistent_read_passthrough_interval));
  s.watch.consistent_get_passthrough_qps = options_.consistent_get_passthrough_qps;
  s.watch.list_pool = list_pool_.get();
  s.watch.list_gzip = &list_gzip_;
  s.watch.watchlist_gzip =
      ParseWatchListGzip(options_.watchlist_gzip).value_or(WatchListGzip::kAuto);
  return s;
}

asio::awaitable<void> Server::CheckDelegation(UpstreamPool& own_pool) {
  // (group, resource): the reviews that identify clients and authorize their cached reads.
  static constexpr std::pair<std::string_view, std::string_view> kReviews[] = {
      {"authentication.k8s.io", "tokenreviews"}, {"authorization.k8s.io", "subjectaccessreviews"}};
  for (const auto& [group, resource] : kReviews) {
    std::string body =
        absl::StrCat(R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",)",
                     R"("spec":{"resourceAttributes":{"verb":"create","group":")", ToAbsl(group),
                     R"(","resource":")", ToAbsl(resource), R"("}}})");
    auto res = co_await UpstreamCall(
        own_pool, http::verb::post, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        own_credentials_->Header(), std::move(body), std::chrono::seconds(5));
    rapidjson::Document doc;
    const bool answered = res.ok() && res->status == 201 && ParseJson(res->body, doc).ok() &&
                          doc.IsObject() && doc.HasMember("status") && doc["status"].IsObject();
    if (!answered) {
      log_.Warning("could not check kube-fanout's own permissions",
                   {{"resource", resource},
                    {"error", res.ok() ? absl::StrCat("HTTP ", res->status)
                                       : std::string(res.status().message())}});
      continue;
    }
    const auto& st = doc["status"];
    if (!st.HasMember("allowed") || !st["allowed"].IsBool() || !st["allowed"].GetBool()) {
      log_.Warning(
          "kube-fanout's own identity may not create this review: clients cannot be identified, "
          "and every cached read passes through to the apiserver; bind the "
          "system:auth-delegator ClusterRole to it (docs/identity.md)",
          {{"resource", absl::StrCat(ToAbsl(resource), ".", ToAbsl(group))}});
    }
  }
  delegation_checked_ = true;
}

int Server::Run() {
  asio::signal_set signals(main_ioc_, SIGTERM, SIGINT);
  signals.async_wait([this](beast::error_code ec, int signal) {
    if (!ec) asio::co_spawn(main_ioc_, ShutdownAfterDelay(signal), asio::detached);
  });
  main_ioc_.run();
  for (auto& w : workers_) w->Join();
  log_.Info("stopped");
  return 0;
}

asio::awaitable<void> Server::AdmissionLoop() {
  asio::steady_timer timer(main_ioc_);
  auto last_check = std::chrono::steady_clock::now();
  while (!shutting_down_) {
    timer.expires_after(std::chrono::milliseconds(100));
    co_await timer.async_wait(use_nothrow);
    admission_->ExpireQueued();
    if (options_.admission_config.empty() ||
        std::chrono::steady_clock::now() - last_check < std::chrono::seconds(2)) {
      continue;
    }
    last_check = std::chrono::steady_clock::now();
    // Re-read on change (a ConfigMap volume updates by swapping a symlink, so compare content).
    std::ifstream in(options_.admission_config);
    std::stringstream text;
    text << in.rdbuf();
    if (!in || text.str() == admission_config_text_) continue;
    admission_config_text_ = text.str();
    auto parsed = ratelimit::ParseConfig(admission_config_text_);
    if (!parsed.ok()) {
      log_.Error(
          "admission config rejected; keeping the previous one",
          {{"file", options_.admission_config}, {"error", std::string(parsed.status().message())}});
      continue;
    }
    admission_->Reconfigure(*std::move(parsed));
    log_.Info("admission config reloaded", {{"file", options_.admission_config}});
  }
}

asio::awaitable<void> Server::ServingCertificateLoop() {
  asio::steady_timer timer(main_ioc_);
  while (!shutting_down_) {
    timer.expires_after(std::chrono::seconds(1));
    co_await timer.async_wait(use_nothrow);
    std::string error;
    switch (serving_cert_->ReloadIfChanged(&error)) {
      case ServingCertificate::Change::kNone:
        break;
      case ServingCertificate::Change::kReloaded:
        log_.Info(
            "serving certificate reloaded; new connections get it",
            {{"cert_file", options_.tls_cert_file}, {"not_after", serving_cert_->not_after()}});
        break;
      case ServingCertificate::Change::kRejected:
        log_.Error("serving certificate rejected; keeping the previous one",
                   {{"cert_file", options_.tls_cert_file},
                    {"key_file", options_.tls_private_key_file},
                    {"error", error}});
        break;
    }
  }
}

asio::awaitable<void> Server::HeapTrimLoop() {
  // Ticks of at most a second, as the other loops', so a stop is not held up by a long wait.
  const auto interval = absl::ToChronoMilliseconds(options_.heap_trim_interval);
  const auto tick = std::min<std::chrono::milliseconds>(interval, std::chrono::seconds(1));
  asio::steady_timer timer(main_ioc_);
  auto next = std::chrono::steady_clock::now() + interval;
  while (!shutting_down_) {
    timer.expires_after(tick);
    co_await timer.async_wait(use_nothrow);
    const auto now = std::chrono::steady_clock::now();
    if (shutting_down_ || now < next) continue;
    next = now + interval;
    const HeapTrimmer::Result r = heap_trimmer_.Check();
    if (!r.trimmed) continue;
    log_.Info("heap trimmed: free pages given back to the kernel",
              {{"released_bytes", r.before.resident - r.after.resident},
               {"resident_bytes", r.after.resident},
               {"heap_in_use_bytes", r.after.in_use},
               {"took_ms", std::chrono::duration<double, std::milli>(r.took).count()}});
  }
}

void Server::WarnInsecureUpstream() const {
  for (const UpstreamConfig* config :
       {&upstream_, events_upstream_ ? &*events_upstream_ : nullptr}) {
    if (config == nullptr) continue;
    for (const auto& ep : config->endpoints) {
      if (!ep.tls) {
        log_.Warning(
            "INSECURE UPSTREAM: plain HTTP; clients' bearer tokens and every object cross the "
            "network unencrypted and the apiserver is not authenticated",
            {{"upstream", ep.Url()}});
      } else if (config->insecure_skip_tls_verify) {
        log_.Warning(
            "INSECURE UPSTREAM: its certificate is not verified (insecure-skip-tls-verify); "
            "anyone on the path can impersonate the apiserver and read clients' bearer tokens",
            {{"upstream", ep.Url()}});
      }
    }
  }
}

}  // namespace kf
