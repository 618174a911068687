#include "ratelimit/admission.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace kf::ratelimit {

using Clock = Admission::Clock;

struct Waiter {
  uint64_t ticket = 0;
  Flow flow;
  Admission::Done done;
  Clock::time_point enqueued;
};

struct Level {
  PriorityLevelConfig cfg;
  int seats = 0;
  int executing = 0;
  int queued = 0;
  std::vector<std::deque<Waiter>> queues;
  size_t next = 0;  // Round robin over the queues.
  Admission::LevelStats stats;
};

struct Bucket {
  double tokens = 0;
  Clock::time_point last;
};

struct State {
  absl::Mutex mu;
  std::function<Clock::time_point()> now;
  Config config ABSL_GUARDED_BY(mu);
  std::map<std::string, std::shared_ptr<Level>> levels ABSL_GUARDED_BY(mu);
  // Levels of earlier configurations that still have queued requests.
  std::vector<std::shared_ptr<Level>> retired ABSL_GUARDED_BY(mu);
  // Token buckets by flow key: rateLimit's, and cachedReadRateLimit's.
  absl::flat_hash_map<std::string, Bucket> buckets ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, Bucket> cached_buckets ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint64_t, std::shared_ptr<Level>> tickets ABSL_GUARDED_BY(mu);
  uint64_t next_ticket ABSL_GUARDED_BY(mu) = 1;
  std::map<std::string, Admission::SchemaStats> schemas ABSL_GUARDED_BY(mu);
};

namespace {

constexpr char kCatchAll[] = "catch-all";
constexpr size_t kMaxBuckets = 100000;

using Ready = std::vector<std::pair<Admission::Done, Decision>>;

void RunReady(Ready& ready) {
  for (auto& [done, decision] : ready) done(std::move(decision));
}

bool AnyGlob(const std::vector<std::string>& patterns, std::string_view value) {
  for (const auto& p : patterns) {
    if (GlobMatch(p, value)) return true;
  }
  return false;
}

bool RuleMatches(const PolicyRule& r, const RequestAttributes& a) {
  if (!r.users.empty() && !AnyGlob(r.users, a.user)) return false;
  if (!r.groups.empty()) {
    bool any = false;
    for (const auto& g : a.groups) any = any || AnyGlob(r.groups, g);
    if (!any) return false;
  }
  if (!r.user_agents.empty() && !AnyGlob(r.user_agents, a.user_agent)) return false;
  if (!r.verbs.empty() && !AnyGlob(r.verbs, a.verb)) return false;
  if (!a.resource_request) {
    return !r.non_resource_urls.empty() && AnyGlob(r.non_resource_urls, a.path);
  }
  if (!r.non_resource_urls.empty()) return false;
  if (!r.api_groups.empty() && !AnyGlob(r.api_groups, a.api_group)) return false;
  if (!r.resources.empty() && !AnyGlob(r.resources, a.resource)) return false;
  if (!r.namespaces.empty() && !AnyGlob(r.namespaces, a.namespace_)) return false;
  return true;
}

std::map<std::string, std::shared_ptr<Level>> BuildLevels(const Config& c) {
  int shares = 0;
  for (const auto& l : c.priority_levels) shares += l.exempt ? 0 : l.concurrency_shares;
  PriorityLevelConfig catch_all;
  catch_all.name = std::string(kCatchAll);
  catch_all.concurrency_shares = 5;
  catch_all.queues = 16;
  catch_all.hand_size = 4;
  shares += catch_all.concurrency_shares;
  std::map<std::string, std::shared_ptr<Level>> out;
  auto add = [&](const PriorityLevelConfig& cfg) {
    auto l = std::make_shared<Level>();
    l->cfg = cfg;
    if (!cfg.exempt) {
      l->seats = std::max(1, static_cast<int>(std::ceil(static_cast<double>(c.total_concurrency) *
                                                        cfg.concurrency_shares / shares)));
      l->queues.resize(static_cast<size_t>(cfg.queues));
    }
    l->stats.seats = l->seats;
    out[cfg.name] = std::move(l);
  };
  for (const auto& l : c.priority_levels) add(l);
  if (!out.contains(catch_all.name)) add(catch_all);
  return out;
}

// Shuffle sharding: deals `hand` distinct queues of `queues` from the flow's hash, as APF's
// dealer does (successive remainders, skipping queues already dealt).
std::vector<int> Deal(uint64_t h, int queues, int hand) {
  std::vector<int> chosen;
  for (int i = 0; i < hand; ++i) {
    const auto remaining = static_cast<uint64_t>(queues - i);
    int idx = static_cast<int>(h % remaining);
    h /= remaining;
    std::vector<int> sorted = chosen;
    std::sort(sorted.begin(), sorted.end());
    for (int c : sorted) {
      if (c <= idx) ++idx;
    }
    chosen.push_back(idx);
  }
  return chosen;
}

Flow ClassifyLocked(const State& s, const RequestAttributes& a) ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
  for (const auto& f : s.config.flow_schemas) {
    bool match = f.rules.empty();
    for (const auto& r : f.rules) match = match || RuleMatches(r, a);
    if (!match) continue;
    std::string dist;
    switch (f.distinguisher) {
      case Distinguisher::kByUser:
        dist = a.bound_to.empty() ? a.Identity() : absl::StrCat(a.Identity(), " ", a.bound_to);
        break;
      case Distinguisher::kByNamespace:
        dist = a.namespace_;
        break;
      case Distinguisher::kNone:
        break;
    }
    return Flow{f.name, f.priority_level, absl::StrCat(f.name, "/", dist), f.drop_managed_fields};
  }
  return Flow{std::string(kCatchAll), std::string(kCatchAll),
              absl::StrCat(kCatchAll, "/", a.Identity()), false};
}

const FlowSchemaConfig* SchemaLocked(const State& s, const std::string& name)
    ABSL_SHARED_LOCKS_REQUIRED(s.mu) {
  for (const auto& f : s.config.flow_schemas) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// Lets queued requests into free seats, round robin over the level's queues.
void DispatchLocked(const std::shared_ptr<State>& s, const std::shared_ptr<Level>& level,
                    Ready* ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
  while (level->executing < level->seats && level->queued > 0) {
    std::deque<Waiter>* q = nullptr;
    for (size_t i = 0; i < level->queues.size(); ++i) {
      auto& cand = level->queues[(level->next + i) % level->queues.size()];
      if (!cand.empty()) {
        q = &cand;
        level->next = (level->next + i + 1) % level->queues.size();
        break;
      }
    }
    if (q == nullptr) break;
    Waiter w = std::move(q->front());
    q->pop_front();
    --level->queued;
    ++level->executing;
    s->tickets.erase(w.ticket);
    const auto waited = s->now() - w.enqueued;
    ++level->stats.admitted;
    ++level->stats.queued_total;
    level->stats.wait_seconds_sum += std::chrono::duration<double>(waited).count();
    ++s->schemas[w.flow.schema].admitted;
    Decision d;
    d.admitted = true;
    d.flow = w.flow;
    d.waited = waited;
    d.seat = Seat(s, level);
    ready->emplace_back(std::move(w.done), std::move(d));
  }
}

// Takes a token from the flow's bucket (refilled at qps up to burst). nullopt: taken; else
// the seconds until one will be there. (The caller holds the lock guarding `buckets`.)
std::optional<int> TakeToken(absl::flat_hash_map<std::string, Bucket>& buckets,
                             const TokenBucketConfig& limit, const std::string& key,
                             Clock::time_point now) {
  if (buckets.size() > kMaxBuckets) {
    // Drop the buckets that have refilled: they are as good as new.
    absl::erase_if(buckets, [&](const auto& kv) {
      return kv.second.tokens +
                 std::chrono::duration<double>(now - kv.second.last).count() * limit.qps >=
             limit.burst;
    });
  }
  auto [it, fresh] = buckets.try_emplace(key, Bucket{limit.burst, now});
  Bucket& b = it->second;
  b.tokens = std::min(limit.burst,
                      b.tokens + std::chrono::duration<double>(now - b.last).count() * limit.qps);
  b.last = now;
  if (b.tokens < 1) return static_cast<int>(std::ceil((1 - b.tokens) / limit.qps));
  b.tokens -= 1;
  return std::nullopt;
}

}  // namespace

std::string RequestAttributes::Identity() const {
  return user.empty() ? absl::StrCat(user_agent, "@", source) : user;
}

Seat::Seat(std::shared_ptr<State> state, std::shared_ptr<Level> level)
    : state_(std::move(state)), level_(std::move(level)) {}

Seat& Seat::operator=(Seat&& other) noexcept {
  if (this != &other) {
    Release();
    state_ = std::move(other.state_);
    level_ = std::move(other.level_);
  }
  return *this;
}

void Seat::Release() {
  if (level_ == nullptr) return;
  Ready ready;
  {
    absl::MutexLock lock(&state_->mu);
    --level_->executing;
    DispatchLocked(state_, level_, &ready);
  }
  level_.reset();
  state_.reset();
  RunReady(ready);
}

Admission::Admission(Config config, std::function<Clock::time_point()> now)
    : state_(std::make_shared<State>()) {
  state_->now = std::move(now);
  Reconfigure(std::move(config));
}

Admission::~Admission() = default;

void Admission::Reconfigure(Config config) {
  absl::MutexLock lock(&state_->mu);
  for (auto& [name, level] : state_->levels) {
    if (level->queued > 0) state_->retired.push_back(level);
  }
  state_->levels = BuildLevels(config);
  state_->config = std::move(config);
  for (auto& [name, st] : state_->schemas) st.level.clear();
  for (const auto& f : state_->config.flow_schemas)
    state_->schemas[f.name].level = f.priority_level;
  state_->schemas[std::string(kCatchAll)].level = std::string(kCatchAll);
  state_->buckets.clear();
  state_->cached_buckets.clear();
}

Flow Admission::Classify(const RequestAttributes& request) const {
  absl::ReaderMutexLock lock(&state_->mu);
  return ClassifyLocked(*state_, request);
}

uint64_t Admission::Admit(const RequestAttributes& request, Done done) {
  State& s = *state_;
  Ready ready;
  uint64_t ticket = 0;
  {
    absl::MutexLock lock(&s.mu);
    const Flow flow = ClassifyLocked(s, request);
    const auto now = s.now();
    SchemaStats& schema_stats = s.schemas[flow.schema];
    auto reject = [&](std::string reason, int retry_after) {
      ++schema_stats.rejected[reason];
      Decision d;
      d.flow = flow;
      d.reject_reason = std::move(reason);
      d.retry_after_seconds = std::max(1, retry_after);
      ready.emplace_back(std::move(done), std::move(d));
    };
    const FlowSchemaConfig* schema = SchemaLocked(s, flow.schema);
    if (schema != nullptr && !request.long_running) {
      // A read for the cache at the cache's price; anything else at the passthrough price.
      std::optional<int> wait;
      if (request.cached_read && schema->cached_read_rate_limit) {
        wait = TakeToken(s.cached_buckets, *schema->cached_read_rate_limit, flow.key, now);
      } else if (schema->rate_limit.qps > 0) {
        wait = TakeToken(s.buckets, schema->rate_limit, flow.key, now);
      }
      if (wait) reject("rate-limited", *wait);
    }
    if (ready.empty()) {
      std::shared_ptr<Level> level = s.levels.at(flow.level);
      if (level->cfg.exempt || (level->executing < level->seats && level->queued == 0)) {
        ++level->executing;
        ++level->stats.admitted;
        ++schema_stats.admitted;
        Decision d;
        d.admitted = true;
        d.flow = flow;
        d.seat = Seat(state_, level);
        ready.emplace_back(std::move(done), std::move(d));
      } else {
        // The shortest of the flow's dealt queues.
        std::deque<Waiter>* best = nullptr;
        for (int q :
             Deal(std::hash<std::string>{}(flow.key), level->cfg.queues, level->cfg.hand_size)) {
          auto& cand = level->queues[static_cast<size_t>(q)];
          if (best == nullptr || cand.size() < best->size()) best = &cand;
        }
        if (best == nullptr || best->size() >= static_cast<size_t>(level->cfg.queue_length_limit)) {
          reject("queue-full", 1);
        } else {
          ticket = s.next_ticket++;
          best->push_back(Waiter{ticket, flow, std::move(done), now});
          ++level->queued;
          s.tickets[ticket] = level;
        }
      }
    }
  }
  RunReady(ready);
  return ticket;
}

Decision Admission::ChargePassthrough(const Flow& flow) {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  Decision d;
  d.flow = flow;
  d.admitted = true;
  const FlowSchemaConfig* schema = SchemaLocked(s, flow.schema);
  // Without a cachedReadRateLimit the read paid rateLimit when it was admitted.
  if (schema == nullptr || !schema->cached_read_rate_limit || schema->rate_limit.qps <= 0) {
    return d;
  }
  if (auto wait = TakeToken(s.buckets, schema->rate_limit, flow.key, s.now())) {
    ++s.schemas[flow.schema].rejected["rate-limited"];
    d.admitted = false;
    d.reject_reason = "rate-limited";
    d.retry_after_seconds = std::max(1, *wait);
  }
  return d;
}

bool Admission::Cancel(uint64_t ticket) {
  absl::MutexLock lock(&state_->mu);
  auto it = state_->tickets.find(ticket);
  if (it == state_->tickets.end()) return false;
  Level& level = *it->second;
  state_->tickets.erase(it);
  for (auto& q : level.queues) {
    for (auto w = q.begin(); w != q.end(); ++w) {
      if (w->ticket == ticket) {
        q.erase(w);
        --level.queued;
        return true;
      }
    }
  }
  return true;
}

void Admission::ExpireQueued() {
  Ready ready;
  {
    absl::MutexLock lock(&state_->mu);
    const auto now = state_->now();
    auto expire = [&](Level& level) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_->mu) {
      for (auto& q : level.queues) {
        while (!q.empty() && now - q.front().enqueued >= level.cfg.queue_wait) {
          Waiter w = std::move(q.front());
          q.pop_front();
          --level.queued;
          state_->tickets.erase(w.ticket);
          ++state_->schemas[w.flow.schema].rejected["time-out"];
          Decision d;
          d.flow = w.flow;
          d.reject_reason = "time-out";
          d.waited = now - w.enqueued;
          ready.emplace_back(std::move(w.done), std::move(d));
        }
      }
    };
    for (auto& [name, level] : state_->levels) expire(*level);
    for (auto& level : state_->retired) expire(*level);
    std::erase_if(state_->retired, [](const auto& l) { return l->queued == 0; });
  }
  RunReady(ready);
}

std::map<std::string, Admission::LevelStats> Admission::LevelStatsSnapshot() const {
  absl::ReaderMutexLock lock(&state_->mu);
  std::map<std::string, LevelStats> out;
  for (const auto& [name, level] : state_->levels) {
    LevelStats st = level->stats;
    st.executing = level->executing;
    st.queued = level->queued;
    out[name] = st;
  }
  return out;
}

std::map<std::string, Admission::SchemaStats> Admission::SchemaStatsSnapshot() const {
  absl::ReaderMutexLock lock(&state_->mu);
  return state_->schemas;
}

}  // namespace kf::ratelimit
