#include "proxy/filters/long_running_cap.h"

#include <catch2/catch.hpp>

#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kSecretsWatch = "/api/v1/namespaces/ns/secrets?watch=1";

Identity User(std::string name, std::string pod_uid = "") {
  Identity user{std::move(name), {"system:authenticated"}, "", {}};
  if (!pod_uid.empty()) user.extra = {{"authentication.kubernetes.io/pod-uid", {pod_uid}}};
  return user;
}

// `first` goes through `cap` and, while it runs (a watch streaming), each of `later` does.
void ServeWhileOpen(asio::io_context& ioc, LongRunningCap& cap, FilterCall& first,
                    std::vector<FilterCall*> later) {
  first.probe.then = [&cap, later](Exchange&) { return ServeEach(cap, later); };
  Run(ioc, cap.Serve(first.x, first.next));
}

TEST_CASE("LongRunningCap refuses an identity's watch or tunnel past its bound with 429") {
  asio::io_context ioc;
  WatchSlots slots(/*max_total=*/0, /*max_per_user=*/1);
  LongRunningCap cap(slots);
  FilterCall first(http::verb::get, std::string(kSecretsWatch));
  FilterCall second(http::verb::get, std::string(kSecretsWatch));
  FilterCall tunnel(http::verb::post, "/api/v1/namespaces/ns/pods/p/exec?command=true");
  tunnel.x.route = Route::kTunnel;
  FilterCall read(http::verb::get, "/api/v1/namespaces/ns/secrets/s");  // Not long-running.
  FilterCall exempt(http::verb::get, std::string(kSecretsWatch));
  exempt.x.priority_level = "exempt";
  FilterCall other(http::verb::get, std::string(kSecretsWatch));
  for (FilterCall* c : {&first, &second, &tunnel, &read, &exempt}) c->x.user = User("alice");
  other.x.user = User("bob");
  ServeWhileOpen(ioc, cap, first, {&second, &tunnel, &read, &exempt, &other});

  CHECK(first.probe.calls == 1);
  CHECK_FALSE(first.resp.head.has_value());  // Nothing written for what it lets in.
  CheckRefused(second, 429, "1", "refused: --max-passthrough-watches-per-user");
  CheckRefused(tunnel, 429, "1", "refused: --max-passthrough-watches-per-user");
  for (const FilterCall* passed : {&read, &exempt, &other}) CHECK(passed->probe.calls == 1);
  CHECK(slots.refused(WatchSlots::Refused::kPerUser) == 2);
  CHECK(slots.open() == 0);  // Each slot given back when its watch ended.
}

TEST_CASE("LongRunningCap refuses past the total, and lets the next in once one has ended") {
  asio::io_context ioc;
  WatchSlots slots(/*max_total=*/1, /*max_per_user=*/0);
  LongRunningCap cap(slots);
  FilterCall first(http::verb::get, std::string(kSecretsWatch));
  FilterCall second(http::verb::get, std::string(kSecretsWatch));
  first.x.user = User("alice");
  second.x.user = User("bob");
  ServeWhileOpen(ioc, cap, first, {&second});
  CheckRefused(second, 429, "1", "refused: --max-passthrough-watches");
  FilterCall after(http::verb::get, std::string(kSecretsWatch));
  after.x.user = User("bob");
  Run(ioc, cap.Serve(after.x, after.next));
  CHECK(after.probe.calls == 1);
  CHECK(slots.refused(WatchSlots::Refused::kTotal) == 1);
}

TEST_CASE("LongRunningCap counts each pod of a bound ServiceAccount token on its own") {
  FilterCall call(http::verb::get, std::string(kSecretsWatch));
  const std::string sa = "system:serviceaccount:kube-system:kube-proxy";
  call.x.user = User(sa, "uid-a");
  const std::string pod_a = LongRunningCap::IdentityKey(call.x);
  call.x.user = User(sa, "uid-b");
  const std::string pod_b = LongRunningCap::IdentityKey(call.x);
  call.x.user = User(sa);
  const std::string unbound = LongRunningCap::IdentityKey(call.x);
  CHECK(pod_a != pod_b);
  CHECK(unbound == sa);
  CHECK(pod_a.rfind(sa, 0) == 0);
  // Anonymous callers share one budget; unknown ones are counted by their address, under a key
  // no user name can spell.
  call.x.user.reset();
  call.x.unauthenticated = true;
  CHECK(LongRunningCap::IdentityKey(call.x) == "system:anonymous");
  call.x.unauthenticated = false;
  call.r.request.remote_ip = "10.0.0.7";
  CHECK(LongRunningCap::IdentityKey(call.x) ==
        "\x1e"
        "10.0.0.7");
}

}  // namespace
}  // namespace kf::test

TEST_CASE("WatchCapKey: the user, and the pod a bound ServiceAccount token names") {
  using kf::Identity;
  using kf::WatchCapKey;
  Identity a{.username = "system:serviceaccount:kube-system:kube-proxy"};
  Identity b = a;
  CHECK(WatchCapKey(a) == WatchCapKey(b));  // A legacy token shared by a fleet: one key.
  a.extra = {{"authentication.kubernetes.io/pod-uid", {"uid-a"}}};
  b.extra = {{"authentication.kubernetes.io/pod-uid", {"uid-b"}}};
  CHECK(WatchCapKey(a) != WatchCapKey(b));  // Two pods of a DaemonSet: two keys.
  // Other extras do not split a user.
  Identity c{.username = "alice", .extra = {{"scopes", {"x"}}}};
  CHECK(WatchCapKey(c) == "alice");
}
