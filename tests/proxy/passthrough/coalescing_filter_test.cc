#include "proxy/passthrough/coalescing_filter.h"

#include <array>
#include <catch2/catch.hpp>
#include <random>
#include <tuple>

#include "absl/strings/ascii.h"
#include "common/strings.h"
#include "proxy/upstream/vouched.h"
#include "tests/proxy/edge/test_support.h"

namespace kf::test {
namespace {

constexpr std::string_view kCoalescedTarget = "/api/v1/namespaces/ns/configmaps";

// One reader of kCoalescedTarget going through the filter; its upstream call (`next`) answers
// `body` with a Content-Length, or nothing at all when `body` is empty (a failed call).
struct Reader : FilterCall {
  explicit Reader(std::string answer) : FilterCall(http::verb::get, std::string(kCoalescedTarget)) {
    r.fields.set(http::field::authorization, "Bearer t");
    body = std::move(answer);
    probe.then = [this](Exchange& e) { return Respond(e, body); };
  }
  static asio::awaitable<void> Respond(Exchange& e, const std::string& body) {
    if (body.empty()) co_return;
    ResponseHead head;
    head.status = 200;
    head.fields.set(http::field::content_type, "application/json");
    head.fields.set("Audit-Id", "a1");
    head.fields.set(http::field::content_length, std::to_string(body.size()));
    head.framing = ResponseHead::Framing::kLength;
    head.length = body.size();
    const std::array<asio::const_buffer, 1> piece{asio::buffer(body)};
    co_await e.response->WriteHead(std::move(head));
    co_await e.response->WriteBody(piece);
    co_await e.response->End();
  }
  std::string body;
};

// A call of the same key already on its way upstream, so that the readers under test join the
// next one; Land() ends it without an answer to share.
struct CallUnderWay {
  CallUnderWay(Coalescer& c, const TestRequest& r)
      : coalescer(c),
        key(*CoalescingFilter::Key(r.request, RequestHeaderNames())),
        ticket(c.Join(key)) {}
  void Land() { coalescer.Complete(key, ticket.flight, nullptr); }
  Coalescer& coalescer;
  std::string key;
  Coalescer::Ticket ticket;
};

// While a call of their key is under way, `leader` arrives, then `follower`; then that call
// lands and both are served to the end.
void LeadAndFollow(asio::io_context& ioc, CoalescingFilter& filter, Coalescer& coalescer,
                   Reader& leader, Reader& follower) {
  CallUnderWay earlier(coalescer, leader.r);
  REQUIRE(earlier.ticket.leader);
  const auto led = Spawn(ioc, filter.Serve(leader.x, leader.next));
  ioc.poll();
  const auto followed = Spawn(ioc, filter.Serve(follower.x, follower.next));
  ioc.poll();
  CHECK(leader.probe.calls == 0);  // Waits for the call under way: never joins it.
  earlier.Land();
  REQUIRE(RunUntil(ioc, [&] { return led.finished() && followed.finished(); }));
  led.Rethrow();
  followed.Rethrow();
}

TEST_CASE("CoalescingFilter gives a follower the leader's captured answer") {
  asio::io_context ioc;
  Coalescer coalescer;
  const RequestHeaderNames names;
  CoalescingFilter filter(coalescer, names);
  Reader leader("{\"items\":[1]}");
  Reader follower("{\"items\":[\"follower went upstream\"]}");
  LeadAndFollow(ioc, filter, coalescer, leader, follower);

  CHECK(leader.probe.calls == 1);
  CHECK(leader.x.answer == Answer::kPassthrough);
  CHECK(leader.resp.body == "{\"items\":[1]}");
  CHECK(leader.x.response == &leader.resp);  // The capturing wrapper is gone again.

  CHECK(follower.probe.calls == 0);
  CHECK(follower.x.answer == Answer::kCoalesced);
  REQUIRE(follower.resp.head.has_value());
  CHECK(follower.resp.head->status == 200);
  CHECK(follower.resp.head->fields["Audit-Id"] == "a1");
  CHECK(follower.resp.head->fields[http::field::content_type] == "application/json");
  CHECK(follower.resp.head->framing == ResponseHead::Framing::kLength);
  CHECK(follower.resp.head->length == leader.resp.body.size());
  CHECK(follower.resp.body == leader.resp.body);
  CHECK(follower.resp.ended);
  CHECK(coalescer.coalesced() == 1);
}

TEST_CASE("CoalescingFilter sends a follower upstream alone when its leader's call failed") {
  asio::io_context ioc;
  Coalescer coalescer;
  const RequestHeaderNames names;
  CoalescingFilter filter(coalescer, names);
  Reader leader("");  // No answer: the capture is incomplete.
  Reader follower("{\"items\":[2]}");
  LeadAndFollow(ioc, filter, coalescer, leader, follower);

  CHECK(leader.probe.calls == 1);
  CHECK(follower.probe.calls == 1);
  CHECK(follower.x.answer == Answer::kPassthrough);
  CHECK(follower.resp.body == "{\"items\":[2]}");
  CHECK(coalescer.coalesced() == 0);
}

TEST_CASE("CoalescingFilter lets writes, watches and cache routes by without joining") {
  asio::io_context ioc;
  Coalescer coalescer;
  const RequestHeaderNames names;
  CoalescingFilter filter(coalescer, names);
  FilterCall post(http::verb::post, std::string(kCoalescedTarget));
  FilterCall watch(http::verb::get, std::string(kCoalescedTarget) + "?watch=1");
  FilterCall cached(http::verb::get, std::string(kCoalescedTarget));
  cached.x.route = Route::kCache;
  FilterCall bodied(http::verb::get, std::string(kCoalescedTarget));
  bodied.r.body.Set("{}");
  for (FilterCall* c : {&post, &watch, &cached, &bodied}) {
    CHECK_FALSE(CoalescingFilter::Applies(c->x));
    Run(ioc, filter.Serve(c->x, c->next));
    CHECK(c->probe.calls == 1);
    CHECK(c->x.response == &c->resp);
  }
  FilterCall list(http::verb::get, std::string(kCoalescedTarget));
  CHECK(CoalescingFilter::Applies(list.x));
}

TEST_CASE("CoalescingFilter never lets an unverifiable certificate join a front proxy's call") {
  // The front proxy names kf-admin; a self-signed client copies its X-Remote-* fields. The
  // attacker must go upstream alone (to be refused there), never get the admin's answer.
  asio::io_context ioc;
  Coalescer coalescer;
  const RequestHeaderNames names;
  CoalescingFilter filter(coalescer, names);
  ClientCertificate proxy;
  proxy.presented = proxy.front_proxy = true;
  ClientCertificate self_signed;
  self_signed.presented = true;
  Reader admin("{\"items\":[\"secret\"]}");
  Reader admin_too("{\"items\":[\"unused\"]}");
  Reader attacker("{\"items\":[\"attacker went upstream\"]}");
  for (Reader* r : {&admin, &admin_too, &attacker}) {
    r->r.fields.erase(http::field::authorization);
    r->r.fields.set("X-Remote-User", "kf-admin");
    r->r.fields.set("X-Remote-Group", "system:masters");
  }
  admin.r.request.client_cert = admin_too.r.request.client_cert = &proxy;
  attacker.r.request.client_cert = &self_signed;
  CHECK_FALSE(CoalescingFilter::Key(attacker.r.request, names).has_value());

  CallUnderWay earlier(coalescer, admin.r);
  REQUIRE(earlier.ticket.leader);
  const auto led = Spawn(ioc, filter.Serve(admin.x, admin.next));
  ioc.poll();
  const auto followed = Spawn(ioc, filter.Serve(admin_too.x, admin_too.next));
  const auto attacked = Spawn(ioc, filter.Serve(attacker.x, attacker.next));
  ioc.poll();
  CHECK(attacker.probe.calls == 1);  // Went its own way at once.
  earlier.Land();
  REQUIRE(
      RunUntil(ioc, [&] { return led.finished() && followed.finished() && attacked.finished(); }));
  CHECK(admin_too.x.answer == Answer::kCoalesced);  // The front proxy's own requests share.
  CHECK(admin_too.resp.body == admin.resp.body);
  CHECK(attacker.x.answer == Answer::kPassthrough);
  CHECK(attacker.resp.body == "{\"items\":[\"attacker went upstream\"]}");
  CHECK(coalescer.coalesced() == 1);
}

// The identity inputs of one request, each a small choice (a list of indices) so that random
// pairs often collide.
enum Input {
  kToken,             // none, "t1", "t2"
  kCert,              // none, unverifiable, verified user, front proxy, front proxy and verified
                      // user, verified but subject refused
  kCn,                // kNames
  kOrgs,              // kGroups
  kRemoteUser,        // kNames ("" too)
  kRemoteUserCase,    // X-Remote-User, x-remote-user, X-REMOTE-USER
  kRemoteGroup,       // kGroups
  kRemoteUid,         // none, "1", "2"
  kExtra,             // (key spelling, value) pairs, flattened
  kImpersonateUser,   // none, kNames
  kImpersonateGroup,  // kGroups
  kInputCount,
};
using IdentityInputs = std::array<std::vector<int>, kInputCount>;

constexpr std::array<std::string_view, 4> kNames{"alice", "bob", "kf-admin", ""};
constexpr std::array<std::string_view, 3> kGroups{"system:masters", "system:nodes", ""};
constexpr std::array<std::string_view, 4> kExtraKeys{
    "X-Remote-Extra-Scopes", "x-remote-extra-scopes", "X-Remote-Extra-%53copes",
    "X-Remote-Extra-Other"};
constexpr std::array<std::string_view, 3> kUserCase{"X-Remote-User", "x-remote-user",
                                                    "X-REMOTE-USER"};

int Pick(std::mt19937& rng, int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); }

// Up to two picks of [0, n), `per` at a time.
std::vector<int> PickList(std::mt19937& rng, int n, int per = 1) {
  std::vector<int> out(static_cast<size_t>(Pick(rng, 3) * per));
  for (int& v : out) v = Pick(rng, n);
  return out;
}

IdentityInputs RandomInputs(std::mt19937& rng) {
  IdentityInputs in;
  in[kToken] = {Pick(rng, 3)};
  in[kCert] = {Pick(rng, 6)};
  in[kCn] = {Pick(rng, 3)};
  in[kOrgs] = PickList(rng, 2);
  in[kRemoteUser] = PickList(rng, 4);
  in[kRemoteUserCase] = {Pick(rng, 3)};
  in[kRemoteGroup] = PickList(rng, 3);
  in[kRemoteUid] = {Pick(rng, 3)};
  in[kExtra] = PickList(rng, 4, 2);  // Key spellings; values taken modulo kGroups.
  in[kImpersonateUser] = {Pick(rng, 3)};
  in[kImpersonateGroup] = PickList(rng, 2);
  if (Pick(rng, 4) == 0) {
    // Fields that name the certificate's own user: a front proxy and the certificate itself
    // then vouch for one and the same user.
    in[kRemoteUser] = in[kCn];
    in[kRemoteGroup] = in[kOrgs];
    in[kRemoteUid] = {0};
    in[kExtra].clear();
  }
  return in;
}

// `in` with input `which` changed to something else (or left alone when no other value came).
IdentityInputs Mutate(IdentityInputs in, int which, std::mt19937& rng) {
  const IdentityInputs before = in;
  for (int tries = 0; tries < 20 && in == before; ++tries) {
    in[static_cast<size_t>(which)] = RandomInputs(rng)[static_cast<size_t>(which)];
  }
  return in;
}

// A request built from IdentityInputs, with the certificate it presented.
struct IdentityRequest {
  explicit IdentityRequest(const IdentityInputs& in) {
    const int token = in[kToken][0], kind = in[kCert][0];
    if (token > 0) r.fields.set(http::field::authorization, token == 1 ? "Bearer t1" : "Bearer t2");
    cert.presented = kind > 0;
    cert.verified = kind == 2 || kind == 4 || kind == 5;
    cert.front_proxy = kind == 3 || kind == 4;
    cert.subject_refused = kind == 5;
    if (cert.verified) {
      cert.user.username = std::string(kNames[At(in[kCn], 0)]);
      for (int o : in[kOrgs]) cert.user.groups.emplace_back(kGroups[At({o}, 0)]);
    }
    if (cert.presented) r.request.client_cert = &cert;
    for (int u : in[kRemoteUser]) {
      r.fields.insert(kUserCase[At(in[kRemoteUserCase], 0)], kNames[At({u}, 0)]);
    }
    for (int g : in[kRemoteGroup]) r.fields.insert("X-Remote-Group", kGroups[At({g}, 0)]);
    if (in[kRemoteUid][0] > 0) r.fields.insert("X-Remote-Uid", std::to_string(in[kRemoteUid][0]));
    for (size_t i = 0; i + 1 < in[kExtra].size(); i += 2) {
      r.fields.insert(kExtraKeys[At(in[kExtra], i)],
                      kGroups[At(in[kExtra], i + 1) % kGroups.size()]);
    }
    if (in[kImpersonateUser][0] > 0) {
      r.fields.insert("Impersonate-User", kNames[At(in[kImpersonateUser], 0)]);
    }
    for (int g : in[kImpersonateGroup]) r.fields.insert("Impersonate-Group", kGroups[At({g}, 0)]);
  }
  static size_t At(const std::vector<int>& v, size_t i) { return static_cast<size_t>(v[i]); }
  ClientCertificate cert;
  TestRequest r{http::verb::get, std::string(kCoalescedTarget)};
};

// Who the apiserver would take the request to be, and as whom it would act: the vouched user,
// how it was vouched, which token, and whom it impersonates. Compared field by field, never
// through the key under test.
bool SameEffectiveIdentity(const Request& a, const Request& b, const RequestHeaderNames& names) {
  const Vouched va = Vouch(a, names);
  const Vouched vb = Vouch(b, names);
  const auto impersonation = [](const Request& r) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& f : r.headers) {
      if (boost::beast::iequals(f.name_string().substr(0, 12), "Impersonate-")) {
        out.emplace_back(absl::AsciiStrToLower(ToAbsl(f.name_string())), std::string(f.value()));
      }
    }
    return out;
  };
  return va.by == vb.by && va.user == vb.user && va.credential == vb.credential &&
         impersonation(a) == impersonation(b);
}

TEST_CASE("Coalescing keys differ whenever the identity or the way it was vouched differs") {
  const RequestHeaderNames names;
  std::mt19937 rng(20240601);
  int pairs = 0, differing = 0, by_only = 0, shared = 0;
  for (int i = 0; i < 20000; ++i) {
    const IdentityInputs a_in = RandomInputs(rng);
    const IdentityInputs b_in = Mutate(a_in, Pick(rng, kInputCount), rng);
    IdentityRequest a(a_in), b(b_in), a_again(a_in);
    const auto ka = CoalescingFilter::Key(a.r.request, names);
    const auto kb = CoalescingFilter::Key(b.r.request, names);
    REQUIRE(ka == CoalescingFilter::Key(a_again.r.request, names));  // Deterministic.
    ++pairs;
    // Presented, unverifiable and no front proxy's: never shared, whatever it carries.
    if (a.cert.presented && !a.cert.verified && !a.cert.front_proxy) REQUIRE_FALSE(ka.has_value());
    const bool same = SameEffectiveIdentity(a.r.request, b.r.request, names);
    if (!same) {
      ++differing;
      const Vouched va = Vouch(a.r.request, names), vb = Vouch(b.r.request, names);
      if (va.by != vb.by && va.user == vb.user && va.credential == vb.credential) ++by_only;
      INFO("pair " << i << ": " << ByName(va.by) << " " << va.user.username << " / "
                   << ByName(vb.by) << " " << vb.user.username);
      REQUIRE_FALSE((ka && kb && *ka == *kb));
    } else if (ka && kb && *ka == *kb) {
      ++shared;
    }
  }
  // The run met what it is about: pairs of other identities, pairs that differ only in how
  // the same user was vouched for (a certificate and a front proxy naming one user), and pairs
  // that still share an answer.
  CHECK(pairs == 20000);
  CHECK(differing > 5000);
  CHECK(by_only > 100);
  CHECK(shared > 100);
}

}  // namespace
}  // namespace kf::test
