// Shared helpers for cache tests: objects in the apiserver's JSON form.
#ifndef KUBE_FANOUT_TESTS_CACHE_TEST_OBJECTS_H_
#define KUBE_FANOUT_TESTS_CACHE_TEST_OBJECTS_H_

#include <catch2/catch.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache/cache_watcher.h"
#include "cache/cached_object.h"

namespace kf::testing {

inline ResourceType PodsType() { return ResourceType{"", "v1", "pods", "Pod", true, false}; }

// A pod as the apiserver writes it in a watch event.
inline std::string PodJson(const std::string& ns, const std::string& name, uint64_t rv,
                           const std::string& node = "", const std::string& app = "web") {
  return absl::StrCat(
      "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"", name,
      "\",\"namespace\":\"", ns, "\",\"uid\":\"u-", name, "\",\"resourceVersion\":\"", rv,
      "\",\"creationTimestamp\":\"2026-11-22T00:00:00Z\",\"labels\":{\"app\":\"", app,
      "\"}},\"spec\":{", node.empty() ? "" : absl::StrCat("\"nodeName\":\"", node, "\","),
      "\"containers\":[{\"name\":\"c\",\"image\":\"busybox\"}]},\"status\":{\"phase\":\"Pending\"}"
      "}");
}

inline ObjectPtr Pod(const std::string& ns, const std::string& name, uint64_t rv,
                     const std::string& node = "", const std::string& app = "web") {
  auto o = CachedObject::FromJson(PodsType(), PodJson(ns, name, rv, node, app));
  REQUIRE(o.ok());
  return *o;
}

// A watch filter from a namespace and selectors in the apiserver's syntax.
inline WatchFilter Filter(const std::string& ns = "", const std::string& labels = "",
                          const std::string& fields = "") {
  WatchFilter f;
  f.namespace_ = ns;
  f.labels = *LabelSelector::Parse(labels);
  f.fields = *FieldSelector::Parse(fields);
  f.name = f.fields.RequiresExactMatch("metadata.name");
  return f;
}

}  // namespace kf::testing

#endif  // KUBE_FANOUT_TESTS_CACHE_TEST_OBJECTS_H_
