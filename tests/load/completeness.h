// Completeness of the agents' watch streams, checked against the churn's own record of what it
// wrote.
//
// A watch stream is one reflector's LIST+WATCH series (re-watches from the last resourceVersion
// seen continue it). Every event must come with a resourceVersion above everything the stream
// saw before (events and bookmarks); and every churn write that the stream's selector matches,
// with a resourceVersion above the one its LIST returned, must have arrived by the end. A stream
// that relisted after a 410 lost continuity by design: it is counted, and left out of the check.
//
// resourceVersions are compared as numbers: they are etcd revisions, passed through unchanged by
// kube-fanout, and this is a test of exactly that.
#ifndef KUBE_FANOUT_TESTS_LOAD_COMPLETENESS_H_
#define KUBE_FANOUT_TESTS_LOAD_COMPLETENESS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "tests/tools/churn.h"
#include "tests/tools/churn_objects.h"

namespace kf::load {

// The churn's kinds and its record of successful writes (tests/tools/churn.h).
using tools::Kind;
using tools::KindName;
using tools::kKinds;
using tools::Write;

// What one watch stream saw. Single-threaded: owned by the agent thread running the stream.
class StreamRecord {
 public:
  // key: which objects the stream selects, -1 for all of its kind; else the index of the one
  // node (pods by spec.nodeName, the node by name) or configmap.
  StreamRecord(Kind kind, int32_t key) : kind_(kind), key_(key) {}

  // A LIST returned `rv`: the first one starts the stream; one after a 410 marks it relisted
  // (and forgets what it saw: the check skips it).
  void OnList(uint64_t rv, bool after_410);
  void OnEvent(uint64_t rv);
  void OnBookmark(uint64_t rv);

  // Where a re-watch resumes: the highest resourceVersion seen (events or bookmarks).
  uint64_t resume_rv() const { return std::max(last_event_rv_, last_bookmark_rv_); }

  Kind kind() const { return kind_; }
  int32_t key() const { return key_; }
  bool listed() const { return listed_; }
  bool relisted_after_410() const { return relisted_; }
  uint64_t start_rv() const { return start_rv_; }
  uint64_t out_of_order() const { return out_of_order_; }
  uint64_t duplicates() const { return duplicates_; }
  uint64_t events() const { return events_; }
  // The resourceVersions of the events received since the stream started, ascending.
  const std::vector<uint64_t>& received() const { return received_; }

 private:
  Kind kind_;
  int32_t key_;
  bool listed_ = false;
  bool relisted_ = false;
  uint64_t start_rv_ = 0;
  uint64_t last_event_rv_ = 0, last_bookmark_rv_ = 0;
  uint64_t out_of_order_ = 0, duplicates_ = 0, events_ = 0;
  std::vector<uint64_t> received_;
};

// One incomplete stream, for the report: where to start looking.
struct IncompleteStream {
  Kind kind;
  int32_t key;
  uint64_t start_rv = 0, resume_rv = 0;
  uint64_t missing = 0, out_of_order = 0, duplicates = 0;
  std::vector<uint64_t> first_missing;  // Up to a few resourceVersions.
};

struct Completeness {
  uint64_t watch_streams = 0;  // All streams.
  uint64_t never_listed = 0;   // Never got a LIST answer: nothing to check.
  uint64_t checked = 0;        // Listed and not relisted after a 410.
  uint64_t complete = 0, incomplete = 0;
  uint64_t relisted_after_410 = 0;
  uint64_t out_of_order = 0, duplicates = 0;  // Over all streams.
  uint64_t missing_events = 0;                // Over the checked streams.
  uint64_t expected_events = 0;               // Writes the checked streams had to receive.
  std::vector<IncompleteStream> samples;      // The first few incomplete streams.
};

// `key_of(kind, object)` maps a written object to the stream key that selects it (the pod's
// node; the node's or configmap's own index), or -1 when no keyed stream selects it. A checked
// stream is complete when it saw nothing out of order, no duplicate, and no write is missing.
Completeness CheckCompleteness(const std::vector<const StreamRecord*>& streams,
                               const std::vector<Write>& writes,
                               const std::function<int32_t(Kind, uint32_t)>& key_of);

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_COMPLETENESS_H_
