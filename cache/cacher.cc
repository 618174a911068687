#include "cache/cacher.h"

#include <algorithm>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "cache/partial_metadata.h"
#include "common/api/cbor.h"
#include "common/api/kube_proto.h"
#include "common/api/protowire.h"

namespace kf {
namespace {

// The form of `object` a watcher with `f` gets: itself, or its shared metadata-only or CBOR
// form, each of the object or of its shared form without managedFields.
const ObjectPtr& ViewOf(const WatchFilter& f, const ObjectPtr& object) {
  const ObjectPtr& o = f.drop_managed_fields ? CachedObject::WithoutManagedFields(object) : object;
  if (f.cbor) return o->Cbor(f.cbor_bytes_map);
  return f.partial_metadata ? o->PartialMetadata() : o;
}

// What `event` means to a watcher with `filter`, applying selector transitions: entering
// the selection is ADDED, leaving it is DELETED with the previous state at the event's RV
// (cache_watcher.go, convertToWatchEvent). Nothing when the event does not concern the watcher.
std::optional<FramePieces> EventFor(const WatchFilter& f, const WatchEvent& e) {
  switch (e.type()) {
    case EventType::kAdded:
      if (!f.Matches(*e.object())) return std::nullopt;
      return Frame("ADDED", ViewOf(f, e.object()));
    case EventType::kDeleted:
      if (!f.Matches(*e.object())) return std::nullopt;
      return Frame("DELETED", ViewOf(f, e.object()));
    case EventType::kModified: {
      const bool is = f.Matches(*e.object());
      // Filled-in history whose state before is unknown reaches only watchers whose selection
      // an update cannot change (Cacher::ReplayableLocked).
      const bool was = e.prev_unknown() ? is : e.prev() != nullptr && f.Matches(*e.prev());
      if (was && is) return Frame("MODIFIED", ViewOf(f, e.object()));
      if (is) return Frame("ADDED", ViewOf(f, e.object()));
      if (was) return Frame("DELETED", ViewOf(f, e.PrevAtEventVersion()));
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace

Cacher::Cacher(ResourceType type, EventRingLimits limits, std::function<Clock::time_point()> now,
               Encoding encoding)
    : type_(std::move(type)),
      encoding_(encoding),
      limits_(limits),
      now_(std::move(now)),
      node_field_(type_.NodeNameIndexField()),
      ring_(limits),
      watchers_(type_.NodeNameIndexField()) {}

void Cacher::IndexLocked(const ObjectPtr& before, const ObjectPtr& after) {
  if (node_field_.empty()) return;
  const std::string* was = before ? before->fields().Get(node_field_) : nullptr;
  const std::string* is = after ? after->fields().Get(node_field_) : nullptr;
  if (was != nullptr && (is == nullptr || *was != *is)) {
    auto it = by_node_.find(*was);
    if (it != by_node_.end()) {
      it->second.erase(before->key());
      if (it->second.empty()) by_node_.erase(it);
    }
  }
  if (is != nullptr) by_node_[*is].insert(after->key());
}

void Cacher::ReindexLocked() {
  by_node_.clear();
  for (const auto& [key, obj] : store_) IndexLocked(nullptr, obj);
}

void Cacher::Notifications::Add(CacheWatcher& w) {
  NotifySink* sink = w.sink();
  if (sink == nullptr) {
    functions.push_back(w.shared_from_this());
    return;
  }
  // A few sinks (one per worker thread); the last one used is the likeliest.
  for (auto it = sinks.rbegin(); it != sinks.rend(); ++it) {
    if (it->first == sink) {
      it->second.push_back(w.sink_ref());
      return;
    }
  }
  sinks.emplace_back(sink, std::vector<NotifySink::Ref>{w.sink_ref()});
}

void Cacher::Finish(const Notifications& notify, std::vector<std::function<void()>>& ready) {
  for (const auto& [sink, refs] : notify.sinks) sink->Notify(refs);
  for (const auto& w : notify.functions) w->Notify();
  for (auto& f : ready) f();
}

void Cacher::AdvanceLocked(uint64_t rv, std::vector<std::function<void()>>* ready, bool streamed) {
  last_update_ = now_();
  if (rv > rv_) rv_ = rv;
  if (streamed && rv > streamed_rv_) streamed_rv_ = rv;
  rv_published_.store(rv_, std::memory_order_release);
  while (!waiters_.empty() && waiters_.begin()->first <= rv_) {
    ready->push_back(std::move(waiters_.begin()->second));
    waiters_.erase(waiters_.begin());
  }
}

void Cacher::DispatchLocked(const EventPtr& e, Notifications* notify) {
  // Raw pointers: the index holds the watchers, and is not changed before the loop ends.
  std::vector<CacheWatcher*> candidates;
  watchers_.Candidates(e->object().get(), e->prev().get(), &candidates);
  std::vector<CacheWatcher*> closed;
  // Each watcher is mostly cache misses: the one kAhead on is fetched while this one is served.
  constexpr size_t kAhead = 4;
  const size_t n = candidates.size();
  for (size_t i = 0; i < n && i < kAhead; ++i) candidates[i]->PrefetchForPush();
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) candidates[i + kAhead]->PrefetchForPush();
    CacheWatcher* w = candidates[i];
    if (e->resource_version() <= w->skip_through) continue;
    std::optional<FramePieces> pieces = EventFor(w->filter(), *e);
    if (!pieces) continue;
    size_t bytes = 0;
    for (const Piece& p : *pieces) bytes += p.bytes.size();
    // The object the frame carries, shared by every queue it goes to.
    const CachedObject* shared = FrameObject(*pieces);
    ++dispatched_;
    CacheWatcher::Pushed pushed =
        w->Push(*pieces, bytes, e->resource_version(), shared, e->received());
    if (pushed == CacheWatcher::Pushed::kNoRoom) {
      // The process-wide budget is spent: the watchers further behind than this one would be
      // go, largest first; then this one, if there is still no room. (Room for the frame whole:
      // at most what it costs, if no other queue holds its object.)
      w->budget()->MakeRoom(bytes + CacheWatcher::EntryBytes(pieces->size()),
                            w->queued_bytes() + bytes);
      pushed = w->Push(*pieces, bytes, e->resource_version(), shared, e->received());
      if (pushed == CacheWatcher::Pushed::kNoRoom) {
        pushed = w->CutForTotal() ? CacheWatcher::Pushed::kNotify : CacheWatcher::Pushed::kQuiet;
      }
    }
    if (pushed == CacheWatcher::Pushed::kNotify) notify->Add(*w);
    if (w->closed()) closed.push_back(w);  // Cut for slowness; the session sees it.
  }
  for (CacheWatcher* w : closed) watchers_.Remove(w);
}

void Cacher::AddEventLocked(EventType type, ObjectPtr object, ObjectPtr prev,
                            Notifications* notify) {
  auto event = std::make_shared<const WatchEvent>(type, std::move(object), std::move(prev), now_());
  ring_.Push(event, event->received());
  DispatchLocked(event, notify);
}

void Cacher::Replace(std::vector<ObjectPtr> objects, uint64_t list_rv) {
  Notifications notify;
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mu_);
    absl::btree_map<std::string, ObjectPtr> next;
    for (ObjectPtr& o : objects) next.emplace(o->key(), std::move(o));
    if (synced_) {
      // A relist: what changed while the watch was broken becomes events, in RV order, the
      // deletions (whose own RVs are unknown) last at the list's RV.
      std::vector<std::pair<ObjectPtr, ObjectPtr>> changed;  // (new, old)
      for (const auto& [key, obj] : next) {
        auto it = store_.find(key);
        if (it == store_.end()) {
          changed.emplace_back(obj, nullptr);
        } else if (it->second->resource_version() != obj->resource_version()) {
          changed.emplace_back(obj, it->second);
        }
      }
      std::sort(changed.begin(), changed.end(), [](const auto& a, const auto& b) {
        return a.first->resource_version() < b.first->resource_version();
      });
      for (auto& [obj, old] : changed) {
        const EventType t = old ? EventType::kModified : EventType::kAdded;
        AddEventLocked(t, obj, old, &notify);
      }
      for (const auto& [key, old] : store_) {
        if (next.count(key) == 0) {
          AddEventLocked(EventType::kDeleted, old->WithResourceVersion(list_rv), old, &notify);
        }
      }
    }
    store_ = std::move(next);
    ReindexLocked();
    // Resuming from before the relist could miss changes the diff folded together.
    ring_.Reset(list_rv);
    synced_ = true;
    AdvanceLocked(list_rv, &ready);
  }
  Finish(notify, ready);
}

std::optional<Cacher::State> Cacher::ExportState() const {
  absl::MutexLock lock(&mu_);
  if (!synced_) return std::nullopt;
  State s;
  s.resource_version = rv_;
  s.bookmark_template = bookmark_template_;
  s.objects.reserve(store_.size());
  for (const auto& [key, obj] : store_) s.objects.push_back(obj);
  // Not the history filled in from the upstream: a snapshot keeps no unknown previous states.
  s.window_start_rv = std::max(ring_.oldest_resumable_rv(), ring_.history_through_rv());
  if (auto events = ring_.Since(s.window_start_rv); events.ok()) s.events = *std::move(events);
  return s;
}

absl::Status Cacher::ImportState(State state) {
  uint64_t last = state.window_start_rv;
  for (const EventPtr& e : state.events) {
    if (e->resource_version() <= last || e->resource_version() > state.resource_version) {
      return absl::InvalidArgumentError("snapshot events out of order");
    }
    last = e->resource_version();
  }
  if (state.window_start_rv > state.resource_version) {
    return absl::InvalidArgumentError("snapshot window starts after its resourceVersion");
  }
  absl::MutexLock lock(&mu_);
  if (synced_) return absl::FailedPreconditionError("cache already synced");
  store_.clear();
  for (ObjectPtr& o : state.objects) store_.insert_or_assign(o->key(), std::move(o));
  ReindexLocked();
  ring_.Reset(state.window_start_rv);
  const Clock::time_point now = now_();
  for (EventPtr& e : state.events) ring_.Push(std::move(e), now);
  if (!state.bookmark_template.empty()) bookmark_template_ = std::move(state.bookmark_template);
  rv_ = state.resource_version;
  streamed_rv_ = rv_;
  rv_published_.store(rv_, std::memory_order_release);
  synced_ = true;
  last_update_ = now;
  return absl::OkStatus();
}

void Cacher::Apply(EventType type, ObjectPtr object) {
  Notifications notify;
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mu_);
    if (object->resource_version() <= rv_) {
      // Already seen (a resumed watch's replay), or an event a content proof overtook.
      if (object->resource_version() > streamed_rv_) ++events_after_proof_;
      return;
    }
    ObjectPtr prev;
    auto it = store_.find(object->key());
    if (it != store_.end()) prev = it->second;
    if (type == EventType::kDeleted) {
      if (it != store_.end()) store_.erase(it);
      IndexLocked(prev, nullptr);
    } else {
      store_.insert_or_assign(object->key(), object);
      IndexLocked(prev, object);
      if (type == EventType::kAdded && prev) type = EventType::kModified;
      if (type == EventType::kModified && !prev) type = EventType::kAdded;
    }
    const uint64_t rv = object->resource_version();
    AddEventLocked(type, std::move(object), std::move(prev), &notify);
    AdvanceLocked(rv, &ready);
  }
  Finish(notify, ready);
}

void Cacher::Bookmark(uint64_t rv) {
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mu_);
    AdvanceLocked(rv, &ready);
  }
  Finish(Notifications(), ready);
}

bool Cacher::ProveCurrent(uint64_t rv, const std::vector<Listed>& listed) {
  std::vector<std::function<void()>> ready;
  {
    absl::MutexLock lock(&mu_);
    if (!synced_) return false;
    if (rv_ >= rv) return true;
    if (listed.size() != store_.size()) return false;
    for (const Listed& l : listed) {
      auto it = store_.find(l.key);
      if (it == store_.end() || it->second->resource_version() != l.resource_version) return false;
    }
    ++content_proofs_;
    AdvanceLocked(rv, &ready, /*streamed=*/false);
  }
  Finish(Notifications(), ready);
  return true;
}

void Cacher::SetBookmarkTemplate(std::string object) {
  absl::MutexLock lock(&mu_);
  bookmark_template_ = std::move(object);
  last_bookmark_ = {};
  last_bookmark_rv_ = {};
}

std::optional<Cacher::Digest> Cacher::VersionsDigest() const {
  absl::MutexLock lock(&mu_);
  if (!synced_) return std::nullopt;
  Digest d{.resource_version = rv_};
  for (const auto& [key, object] : store_) d.versions.Add(key, object->resource_version());
  return d;
}

absl::StatusOr<std::vector<Cacher::Listed>> Cacher::VersionsAt(uint64_t rv) const {
  auto page = ListPage(WatchFilter{}, PageRequest{.at_rv = rv});
  if (!page.ok()) return page.status();
  std::vector<Listed> out;
  out.reserve(page->items.size());
  for (const ObjectPtr& o : page->items) out.push_back({o->key(), o->resource_version()});
  return out;
}

bool Cacher::synced() const {
  absl::MutexLock lock(&mu_);
  return synced_;
}

uint64_t Cacher::resource_version() const { return rv_published_.load(std::memory_order_acquire); }

uint64_t Cacher::window_start_rv() const {
  absl::MutexLock lock(&mu_);
  return ring_.oldest_resumable_rv();
}

bool Cacher::NothingFor(const WatchFilter& filter, uint64_t after_rv, uint64_t through_rv) const {
  absl::MutexLock lock(&mu_);
  if (!synced_ || rv_ < through_rv) return false;
  auto events = ring_.Since(after_rv);
  if (!events.ok()) return false;
  for (const EventPtr& e : *events) {
    if (e->resource_version() > through_rv) break;
    if (e->prev_unknown() && filter.ReadsContent()) return false;
    if (filter.Matches(*e->object()) || (e->prev() != nullptr && filter.Matches(*e->prev()))) {
      return false;
    }
  }
  return true;
}

size_t Cacher::object_count() const {
  absl::MutexLock lock(&mu_);
  return store_.size();
}

Cacher::Stats Cacher::GetStats() const {
  absl::MutexLock lock(&mu_);
  Stats s;
  s.objects = store_.size();
  s.watchers = watchers_.size();
  s.window_events = ring_.size();
  s.window_bytes = ring_.bytes();
  watchers_.ForEach(
      [&s](const std::shared_ptr<CacheWatcher>& w) { s.queued_bytes += w->queued_bytes(); });
  s.dispatched = dispatched_;
  s.watchers_cut = cuts_.queue_bytes.load(std::memory_order_relaxed);
  s.watchers_cut_total_budget = cuts_.total_queue_bytes.load(std::memory_order_relaxed);
  s.resource_version = rv_;
  s.synced = synced_;
  s.last_update = last_update_;
  s.content_proofs = content_proofs_;
  s.events_after_proof = events_after_proof_;
  return s;
}

size_t Cacher::watcher_count() const {
  absl::MutexLock lock(&mu_);
  return watchers_.size();
}

Cacher::ListResult Cacher::List(const WatchFilter& filter) const {
  absl::MutexLock lock(&mu_);
  ListResult r;
  r.resource_version = rv_;
  auto begin = store_.begin();
  std::string prefix;
  if (!filter.namespace_.empty() && type_.namespaced) {
    prefix = filter.namespace_ + "/";
    begin = store_.lower_bound(prefix);
  }
  for (auto it = begin; it != store_.end(); ++it) {
    if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) break;
    if (filter.Matches(*it->second)) r.items.push_back(it->second);
  }
  return r;
}

absl::StatusOr<Cacher::Page> Cacher::ListPage(const WatchFilter& filter,
                                              const PageRequest& req) const {
  absl::MutexLock lock(&mu_);
  const uint64_t at = req.at_rv == 0 ? rv_ : req.at_rv;
  if (at > rv_) return absl::FailedPreconditionError("resourceVersion newer than the cache");
  // The keys changed after `at`, each with its state at `at` (null: absent then): the state before
  // the first later event.
  absl::btree_map<std::string, ObjectPtr> overlay;
  if (at < rv_) {
    auto events = ring_.Since(at);
    if (!events.ok()) return absl::FailedPreconditionError(events.status().message());
    for (const EventPtr& e : *events) {
      const bool first = overlay.try_emplace(e->object()->key(), e->prev()).second;
      if (first && e->prev_unknown()) {
        return absl::FailedPreconditionError("state before the filled-in history not known");
      }
    }
  }
  std::string prefix;
  if (!filter.namespace_.empty() && type_.namespaced) prefix = filter.namespace_ + "/";
  const std::string& from = std::max(prefix, req.start_key);
  auto in_prefix = [&prefix](const std::string& k) {
    return prefix.empty() || k.compare(0, prefix.size(), prefix) == 0;
  };
  auto s = store_.lower_bound(from);
  auto o = overlay.lower_bound(from);
  // The next object of the state at `at`, in key order (null at the end of the prefix).
  auto next = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> const ObjectPtr* {
    for (;;) {
      const ObjectPtr* obj = nullptr;
      const std::string* key = nullptr;
      if (o != overlay.end() && (s == store_.end() || o->first <= s->first)) {
        if (s != store_.end() && s->first == o->first) ++s;
        key = &o->first;
        obj = &o->second;
        ++o;
      } else if (s != store_.end()) {
        key = &s->first;
        obj = &s->second;
        ++s;
      } else {
        return nullptr;
      }
      if (!in_prefix(*key)) return nullptr;
      if (*obj != nullptr) return obj;
    }
  };
  Page page;
  page.resource_version = at;
  const bool count_all = filter.labels.Empty() && filter.fields.Empty();
  bool full = false;
  // One candidate, in key order; false: stop.
  auto consider = [&](const ObjectPtr& obj) {
    ++page.candidates;
    if (full) {
      page.has_more = true;
      return count_all;
    }
    if (filter.Matches(*obj)) page.items.push_back(obj);
    if (req.limit > 0 && static_cast<int64_t>(page.items.size()) >= req.limit) full = true;
    return true;
  };
  if (req.node_name_index && !node_field_.empty() && overlay.empty() && req.start_key.empty()) {
    // The current state's keys of that node, from the index (in key order).
    auto keys = by_node_.find(*req.node_name_index);
    if (keys == by_node_.end()) return page;
    for (const std::string& key : keys->second) {
      if (!in_prefix(key)) continue;
      auto it = store_.find(key);
      if (it != store_.end() && !consider(it->second)) break;
    }
    return page;
  }
  for (const ObjectPtr* obj = next(); obj != nullptr; obj = next()) {
    if (req.node_name_index) {
      const std::string* node = (*obj)->fields().Get("spec.nodeName");
      if (node == nullptr || *node != *req.node_name_index) continue;
    }
    if (!consider(*obj)) break;
  }
  return page;
}

std::pair<ObjectPtr, uint64_t> Cacher::Get(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = store_.find(key);
  return {it == store_.end() ? nullptr : it->second, rv_};
}

absl::StatusOr<std::shared_ptr<CacheWatcher>> Cacher::Watch(WatchRequest req) {
  auto w = req.sink != nullptr
               ? std::make_shared<CacheWatcher>(std::move(req.filter), req.max_queue_bytes,
                                                req.sink, req.sink_ref, req.total_budget, &cuts_)
               : std::make_shared<CacheWatcher>(std::move(req.filter), req.max_queue_bytes,
                                                std::move(req.notify), req.total_budget, &cuts_);
  std::vector<Piece> initial;
  uint64_t last_rv = 0;
  {
    absl::MutexLock lock(&mu_);
    bool replay_state = req.start == Start::kInitialState;
    if (!replay_state && req.resource_version > rv_) {
      // Newer than the cache: nothing to replay; events up to that RV are skipped as they come,
      // as the apiserver's cache waits for the RV before it starts the watch.
      w->skip_through = req.resource_version;
    } else if (!replay_state) {
      auto events = ring_.Since(req.resource_version);
      // Like the apiserver's watch cache (getAllEventsSinceLocked): from before the window's
      // start (the last list's RV, or the oldest kept event) there is no exact start: 410.
      if (!events.ok()) return events.status();
      if (absl::Status s = ReplayableLocked(w->filter(), req.resource_version, *events); !s.ok()) {
        return s;
      }
      {
        for (const EventPtr& e : *events) {
          if (auto frame = EventFor(w->filter(), *e)) {
            for (Piece& p : *frame) initial.push_back(std::move(p));
            last_rv = e->resource_version();
          }
        }
      }
    }
    if (replay_state) {
      for (const auto& [key, obj] : store_) {
        if (w->filter().Matches(*obj)) AppendFrame("ADDED", ViewOf(w->filter(), obj), &initial);
      }
    }
    // The initial burst is not held against the budget: it is what the client asked for. The
    // session takes it right after Watch() returns.
    w->start_rv = rv_;
    w->Push(initial, 0, last_rv);
    watchers_.Add(w);
  }
  return w;
}

void Cacher::RemoveWatcher(CacheWatcher* watcher) {
  absl::MutexLock lock(&mu_);
  watchers_.Remove(watcher);
}

void Cacher::CloseAll() {
  Notifications notify;
  {
    absl::MutexLock lock(&mu_);
    watchers_.ForEach([&](const std::shared_ptr<CacheWatcher>& w) {
      if (w->Close()) notify.Add(*w);
    });
  }
  std::vector<std::function<void()>> none;
  Finish(notify, none);
}

std::shared_ptr<const std::string> Cacher::BookmarkFrame(uint64_t rv, bool initial_events_end,
                                                         bool partial_metadata, bool cbor) const {
  absl::MutexLock lock(&mu_);
  // Watchers of one form at one RV share the frame: a fleet's WatchLists starting together
  // end their initial events with the same bookmark.
  const size_t form = (cbor ? 2 : partial_metadata ? 1 : 0) + (initial_events_end ? 3 : 0);
  if (last_bookmark_[form] && last_bookmark_rv_[form] == rv) return last_bookmark_[form];
  std::string frame;
  if (encoding_ == Encoding::kProtobuf) {
    frame = ProtoBookmarkFrame(rv, initial_events_end, partial_metadata);
  } else if (cbor) {
    auto object = JsonToCbor(JsonBookmarkObject(rv, initial_events_end));
    frame = std::string(CborFramePrefix("BOOKMARK")) + (object.ok() ? object->bytes : "\xf6");
  } else {
    std::string json = JsonBookmarkObject(rv, initial_events_end);
    if (partial_metadata) {
      auto converted = PartialMetadataJson(json);
      if (converted.ok()) json = *std::move(converted);
    }
    frame = absl::StrCat("{\"type\":\"BOOKMARK\",\"object\":", json, "}\n");
  }
  auto shared = std::make_shared<const std::string>(std::move(frame));
  last_bookmark_[form] = shared;
  last_bookmark_rv_[form] = rv;
  return shared;
}

std::string Cacher::JsonBookmarkObject(uint64_t rv, bool initial_events_end) const {
  std::string object = bookmark_template_;
  if (object.empty()) {
    object = absl::StrCat("{\"kind\":\"", type_.kind, "\",\"apiVersion\":\"", type_.ApiVersion(),
                          "\",\"metadata\":{\"resourceVersion\":\"0\"}}");
  }
  auto spliced = SpliceResourceVersion(object, rv);
  std::string json = spliced.ok() ? *std::move(spliced) : object;
  if (initial_events_end) {
    // The WatchList end marker (KEP-3157), placed where the apiserver puts it.
    const std::string rv_member = absl::StrCat("\"resourceVersion\":\"", rv, "\"");
    const size_t at = json.find(rv_member);
    if (at != std::string::npos) {
      json.insert(at + rv_member.size(),
                  ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}");
    }
  }
  return json;
}

std::string Cacher::ProtoBookmarkFrame(uint64_t rv, bool initial_events_end,
                                       bool partial_metadata) const {
  std::string object = bookmark_template_;
  if (object.empty()) {
    // No template from upstream: an object with just the metadata a bookmark carries.
    std::string meta;
    for (int field : {1, 2, 3, 4, 5}) AppendBytesField(&meta, field, "");
    AppendBytesField(&meta, 6, "0");
    AppendVarintField(&meta, 7, 0);
    AppendBytesField(&meta, 8, "");
    AppendBytesField(&object, 1, meta);
  }
  static constexpr std::pair<std::string_view, std::string_view> kEnd{"k8s.io/initial-events-end",
                                                                      "true"};
  auto spliced = SpliceProtoMetadata(object, rv, initial_events_end ? &kEnd : nullptr);
  std::string message = spliced.ok() ? *std::move(spliced) : object;
  if (partial_metadata) {
    auto converted = PartialMetadataProto(message);
    if (converted.ok()) {
      return WatchFrame("BOOKMARK",
                        WrapUnknown(kPartialMetadataApiVersion, kPartialMetadataKind, *converted));
    }
  }
  return WatchFrame("BOOKMARK", WrapUnknown(type_.ApiVersion(), type_.kind, message));
}

void Cacher::WaitForVersion(uint64_t rv, std::function<void()> ready) {
  {
    absl::MutexLock lock(&mu_);
    if (rv_ < rv) {
      waiters_.emplace(rv, std::move(ready));
      return;
    }
  }
  ready();
}

}  // namespace kf
