#include "tests/load/completeness.h"

#include <algorithm>
#include <map>
#include <utility>

namespace kf::load {
namespace {

constexpr size_t kMaxSamples = 10;
constexpr size_t kMaxMissingPerSample = 5;

}  // namespace

void StreamRecord::OnList(uint64_t rv, bool after_410) {
  if (!listed_) {
    listed_ = true;
    start_rv_ = rv;
  } else if (after_410) {
    relisted_ = true;
    received_.clear();
    received_.shrink_to_fit();
  }
  // A new LIST is a new starting point for the order check.
  last_event_rv_ = rv;
  last_bookmark_rv_ = 0;
}

void StreamRecord::OnEvent(uint64_t rv) {
  ++events_;
  if (rv > resume_rv()) {
    last_event_rv_ = rv;
    if (!relisted_) received_.push_back(rv);
    return;
  }
  // At or below what the stream had already seen: a repeat, or an event out of order (which
  // still counts as received, so it is not reported missing too).
  const auto at = std::lower_bound(received_.begin(), received_.end(), rv);
  if (at != received_.end() && *at == rv) {
    ++duplicates_;
  } else {
    ++out_of_order_;
    if (!relisted_ && rv > start_rv_) received_.insert(at, rv);
  }
}

void StreamRecord::OnBookmark(uint64_t rv) {
  // A bookmark promises every event up to rv was sent; going back would make a re-watch repeat
  // events. Equal to the last event is fine (progress at the same revision).
  if (rv < resume_rv()) {
    ++out_of_order_;
    return;
  }
  last_bookmark_rv_ = rv;
}

Completeness CheckCompleteness(const std::vector<const StreamRecord*>& streams,
                               const std::vector<Write>& writes,
                               const std::function<int32_t(Kind, uint32_t)>& key_of) {
  // The writes each kind of stream can see, by key (-1: all of the kind), ascending.
  std::map<std::pair<Kind, int32_t>, std::vector<uint64_t>> by_key;
  for (const Write& w : writes) {
    by_key[{w.kind, -1}].push_back(w.rv);
    const int32_t key = key_of(w.kind, w.object);
    if (key >= 0) by_key[{w.kind, key}].push_back(w.rv);
  }
  for (auto& [key, rvs] : by_key) std::sort(rvs.begin(), rvs.end());

  Completeness c;
  for (const StreamRecord* s : streams) {
    ++c.watch_streams;
    c.out_of_order += s->out_of_order();
    c.duplicates += s->duplicates();
    if (!s->listed()) {
      ++c.never_listed;
      continue;
    }
    if (s->relisted_after_410()) {
      ++c.relisted_after_410;
      continue;
    }
    ++c.checked;
    uint64_t missing = 0;
    std::vector<uint64_t> first_missing;
    if (auto it = by_key.find({s->kind(), s->key()}); it != by_key.end()) {
      const std::vector<uint64_t>& rvs = it->second;
      for (auto w = std::upper_bound(rvs.begin(), rvs.end(), s->start_rv()); w != rvs.end(); ++w) {
        ++c.expected_events;
        if (!std::binary_search(s->received().begin(), s->received().end(), *w)) {
          ++missing;
          if (first_missing.size() < kMaxMissingPerSample) first_missing.push_back(*w);
        }
      }
    }
    c.missing_events += missing;
    if (missing == 0 && s->out_of_order() == 0 && s->duplicates() == 0) {
      ++c.complete;
      continue;
    }
    ++c.incomplete;
    if (c.samples.size() < kMaxSamples) {
      c.samples.push_back(IncompleteStream{s->kind(), s->key(), s->start_rv(), s->resume_rv(),
                                           missing, s->out_of_order(), s->duplicates(),
                                           std::move(first_missing)});
    }
  }
  return c;
}

}  // namespace kf::load
