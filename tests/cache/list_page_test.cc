// Cacher::ListPage: pages of a list over the current state or the state at an earlier RV, with
// the apiserver cacher's has-more and count rules.
#include <catch2/catch.hpp>

#include "cache/cacher.h"
#include "tests/cache/test_objects.h"

namespace kf {
namespace {

using testing::Filter;
using testing::Pod;
using testing::PodsType;

std::vector<std::string> Names(const Cacher::Page& p) {
  std::vector<std::string> out;
  for (const auto& o : p.items)
    out.push_back(o->key() + "@" + std::to_string(o->resource_version()));
  return out;
}

struct PageFixture {
  Cacher cacher{PodsType(), EventRingLimits{}, [] { return std::chrono::steady_clock::now(); }};
  PageFixture() {
    cacher.Replace({Pod("a", "p1", 10, "n1"), Pod("a", "p2", 11, "n2", "db"),
                    Pod("a", "p3", 12, "n1"), Pod("b", "p1", 13, "n1")},
                   20);
  }
  Cacher::Page Page(const WatchFilter& f, Cacher::PageRequest r) {
    auto p = cacher.ListPage(f, r);
    REQUIRE(p.ok());
    return *p;
  }
};

TEST_CASE("ListPage pages the current state in key order") {
  PageFixture fx;
  Cacher::PageRequest r;
  r.limit = 2;
  auto p = fx.Page(Filter(), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p1@10", "a/p2@11"});
  CHECK(p.has_more);
  CHECK(p.candidates == 4);  // remainingItemCount = 4 - 2.
  CHECK(p.resource_version == 20);
  r.start_key = std::string("a/p2\0", 5);
  p = fx.Page(Filter(), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p3@12", "b/p1@13"});
  CHECK_FALSE(p.has_more);  // Full, and nothing after it.
  // Within a namespace.
  r.start_key.clear();
  r.limit = 3;
  p = fx.Page(Filter("a"), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p1@10", "a/p2@11", "a/p3@12"});
  CHECK_FALSE(p.has_more);
}

TEST_CASE("ListPage with a selector counts non-matching items for has-more") {
  PageFixture fx;
  Cacher::PageRequest r;
  r.limit = 1;
  // app=db matches a/p2 only; a/p3 and b/p1 follow it, so the apiserver says there is more.
  auto p = fx.Page(Filter("", "app=db"), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p2@11"});
  CHECK(p.has_more);
  // Not full: no more.
  r.limit = 5;
  p = fx.Page(Filter("", "app=db"), r);
  CHECK_FALSE(p.has_more);
}

TEST_CASE("ListPage over the node index counts only that node's pods") {
  PageFixture fx;
  Cacher::PageRequest r;
  r.limit = 1;
  r.node_name_index = "n2";
  auto p = fx.Page(Filter("", "", "spec.nodeName=n2"), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p2@11"});
  CHECK_FALSE(p.has_more);  // Other pods follow, but not on n2.
  r.node_name_index.reset();
  p = fx.Page(Filter("", "", "spec.nodeName=n2"), r);
  CHECK(p.has_more);  // Without the index, every later pod counts.
}

TEST_CASE("The node index follows binds, moves, deletions and relists") {
  PageFixture fx;
  Cacher::PageRequest r;
  auto on = [&](const std::string& node, const std::string& ns = "") {
    r.node_name_index = node;
    return Names(fx.Page(Filter(ns, "", "spec.nodeName=" + node), r));
  };
  using V = std::vector<std::string>;
  CHECK(on("n1") == V{"a/p1@10", "a/p3@12", "b/p1@13"});
  CHECK(on("n1", "b") == V{"b/p1@13"});                    // The namespace still narrows it.
  fx.cacher.Apply(EventType::kAdded, Pod("a", "p4", 21));  // Not bound yet.
  CHECK(on("n3").empty());
  fx.cacher.Apply(EventType::kModified, Pod("a", "p4", 22, "n3"));  // Bound.
  fx.cacher.Apply(EventType::kModified, Pod("a", "p1", 23, "n3"));  // Moved off n1.
  fx.cacher.Apply(EventType::kDeleted, Pod("a", "p3", 24, "n1"));
  CHECK(on("n1") == V{"b/p1@13"});
  CHECK(on("n3") == V{"a/p1@23", "a/p4@22"});
  // The index and a scan give the same pages, for every node.
  for (const std::string node : {"n1", "n2", "n3", "n4"}) {
    const V indexed = on(node);
    r.node_name_index.reset();
    CHECK(Names(fx.Page(Filter("", "", "spec.nodeName=" + node), r)) == indexed);
  }
  // A relist rebuilds it.
  fx.cacher.Replace({Pod("a", "p9", 30, "n2")}, 30);
  CHECK(on("n3").empty());
  CHECK(on("n2") == V{"a/p9@30"});
}

TEST_CASE("ListPage lists the state at an earlier RV from the event window") {
  PageFixture fx;
  fx.cacher.Apply(EventType::kModified, Pod("a", "p1", 21, "n1"));
  fx.cacher.Apply(EventType::kDeleted, Pod("a", "p2", 22, "n2", "db"));
  fx.cacher.Apply(EventType::kAdded, Pod("a", "p0", 23, "n1"));
  fx.cacher.Apply(EventType::kModified, Pod("a", "p1", 24, "n1"));
  Cacher::PageRequest r;
  r.at_rv = 20;
  auto p = fx.Page(Filter(), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p1@10", "a/p2@11", "a/p3@12", "b/p1@13"});
  CHECK(p.resource_version == 20);
  r.at_rv = 22;
  p = fx.Page(Filter(), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p1@21", "a/p3@12", "b/p1@13"});
  r.at_rv = 23;
  r.limit = 2;
  p = fx.Page(Filter("a"), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p0@23", "a/p1@21"});
  CHECK(p.has_more);
  CHECK(p.candidates == 3);
  r.at_rv = 0;  // Current.
  r.limit = 0;
  p = fx.Page(Filter("a"), r);
  CHECK(Names(p) == std::vector<std::string>{"a/p0@23", "a/p1@24", "a/p3@12"});
  CHECK(p.resource_version == 24);
}

TEST_CASE("ListPage refuses states it does not know") {
  PageFixture fx;
  Cacher::PageRequest r;
  r.at_rv = 19;  // Before the list: the window starts at 20.
  CHECK(absl::IsFailedPrecondition(fx.cacher.ListPage(Filter(), r).status()));
  r.at_rv = 21;  // Newer than the cache.
  CHECK(absl::IsFailedPrecondition(fx.cacher.ListPage(Filter(), r).status()));
}

}  // namespace
}  // namespace kf
