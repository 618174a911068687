#include "proxy/upstream/node_shape.h"

#include <catch2/catch.hpp>

namespace kf {
namespace {

constexpr std::string_view kProbe = "kube-fanout-probe-0123456789abcdef";

Identity Node(std::string name) {
  return Identity{"system:node:" + name, {"system:nodes", "system:authenticated"}};
}

AccessAttributes Attrs(std::string verb, std::string resource, std::string ns, std::string name,
                       std::string fields = "", std::string labels = "") {
  AccessAttributes a;
  a.verb = std::move(verb);
  a.version = "v1";
  a.resource = std::move(resource);
  a.namespace_ = std::move(ns);
  a.name = std::move(name);
  a.field_selector = std::move(fields);
  a.label_selector = std::move(labels);
  return a;
}

TEST_CASE("A node's questions are shared for a node identity with no uid or extra") {
  CHECK(SharableNodeName(Node("n1")) == "n1");
  Identity reordered{"system:node:n1", {"system:authenticated", "system:nodes"}};
  CHECK(SharableNodeName(reordered) == "n1");
  CHECK_FALSE(SharableNodeName(Node("")));
  CHECK_FALSE(SharableNodeName(Identity{"alice", {"system:nodes", "system:authenticated"}}));
  CHECK_FALSE(SharableNodeName(Identity{"system:node:n1", {"system:authenticated"}}));
  CHECK_FALSE(SharableNodeName(Identity{"system:node:n1", {}}));
  CHECK_FALSE(SharableNodeName(Identity{"system:node:n1", {"system:nodes-x", "system:node"}}));
  // Further groups are shared too: the probe asks in the same groups (below).
  Identity more = Node("n1");
  more.groups.push_back("kf:node-proxiers");
  CHECK(SharableNodeName(more) == "n1");
  CHECK(SharableNodeName(Identity{"system:node:n1", {"system:nodes"}}) == "n1");
  Identity uid = Node("n1");
  uid.uid = "u";
  CHECK_FALSE(SharableNodeName(uid));
  Identity extra = Node("n1");
  extra.extra = {{"k", {"v"}}};
  CHECK_FALSE(SharableNodeName(extra));
}

TEST_CASE("NodeShape replaces the node's name where it is a whole value, else shares nothing") {
  struct Row {
    AccessAttributes in;
    std::optional<AccessAttributes> out;  // nullopt: not shared.
  };
  const std::string p(kProbe);
  const std::vector<Row> rows = {
      // Its pods, by spec.nodeName, with the other selector forms apimachinery reads.
      {Attrs("list", "pods", "", "", "spec.nodeName=n1"),
       Attrs("list", "pods", "", "", "spec.nodeName=" + p)},
      {Attrs("watch", "pods", "", "", "spec.nodeName==n1,status.phase!=Failed"),
       Attrs("watch", "pods", "", "", "spec.nodeName==" + p + ",status.phase!=Failed")},
      {Attrs("list", "pods", "", "", "status.phase=Running,spec.nodeName!=n1"),
       Attrs("list", "pods", "", "", "status.phase=Running,spec.nodeName!=" + p)},
      // Its Node, by name and by metadata.name.
      {Attrs("get", "nodes", "", "n1"), Attrs("get", "nodes", "", p)},
      {Attrs("watch", "nodes", "", "n1", "metadata.name=n1"),
       Attrs("watch", "nodes", "", p, "metadata.name=" + p)},
      // Nothing of the node's: the same question for every node.
      {Attrs("watch", "services", "", ""), Attrs("watch", "services", "", "")},
      {Attrs("get", "configmaps", "kube-system", "kube-proxy"),
       Attrs("get", "configmaps", "kube-system", "kube-proxy")},
      // Another node's pods or Node: unchanged (each node's own answer is the probe's).
      {Attrs("list", "pods", "", "", "spec.nodeName=n2"),
       Attrs("list", "pods", "", "", "spec.nodeName=n2")},
      // The name elsewhere: a namespace, a label selector, part of a value, a selector's key.
      {Attrs("get", "configmaps", "n1", "c"), std::nullopt},
      {Attrs("list", "pods", "", "", "", "kubernetes.io/hostname=n1"), std::nullopt},
      {Attrs("list", "pods", "", "", "spec.nodeName=n1x"), std::nullopt},
      {Attrs("list", "pods", "", "", "spec.nodeName=n1\\,n1"), std::nullopt},
      {Attrs("list", "pods", "", "", "n1=x"), std::nullopt},
      {Attrs("get", "configmaps", "ns", "n1-config"), std::nullopt},
      // The probe's name already asked about: never shared.
      {Attrs("list", "pods", "", "", "spec.nodeName=" + p), std::nullopt},
      {Attrs("get", "nodes", "", p), std::nullopt},
  };
  for (const Row& row : rows) {
    CAPTURE(row.in.verb, row.in.resource, row.in.namespace_, row.in.name, row.in.field_selector,
            row.in.label_selector);
    const std::optional<AccessAttributes> got = NodeShape(row.in, "n1", kProbe);
    REQUIRE(got.has_value() == row.out.has_value());
    if (!got) continue;
    CHECK(got->verb == row.out->verb);
    CHECK(got->resource == row.out->resource);
    CHECK(got->namespace_ == row.out->namespace_);
    CHECK(got->name == row.out->name);
    CHECK(got->field_selector == row.out->field_selector);
    CHECK(got->label_selector == row.out->label_selector);
  }
}

TEST_CASE(
    "Two nodes' own questions have one shape, and a node named as part of the probe's name still "
    "shares") {
  const auto a = NodeShape(Attrs("list", "pods", "", "", "spec.nodeName=n1"), "n1", kProbe);
  const auto b = NodeShape(Attrs("list", "pods", "", "", "spec.nodeName=n2"), "n2", kProbe);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->field_selector == b->field_selector);
  // "a" is part of the probe's name (hex): its own value is still replaced, nothing refused.
  const auto short_name = NodeShape(Attrs("get", "nodes", "", "a"), "a", kProbe);
  REQUIRE(short_name);
  CHECK(short_name->name == kProbe);
}

TEST_CASE("The probe node is a node in the nodes' groups, with a new name each start") {
  const std::string one = NewProbeNodeName();
  CHECK(one.size() == std::string_view("kube-fanout-probe-").size() + 16);
  CHECK(one.starts_with("kube-fanout-probe-"));
  CHECK(one != NewProbeNodeName());
  const Identity probe = ProbeNodeUser(one, Node("n1").groups);
  CHECK(SharableNodeName(probe) == one);
  CHECK(probe.groups == Node("n1").groups);
  // In exactly the node's groups, in its order: a group's grant is the probe's as the node's.
  const std::vector<std::string> groups{"kf:node-proxiers", "system:nodes", "system:masters"};
  const Identity in_groups = ProbeNodeUser(one, groups);
  CHECK(in_groups.username == "system:node:" + one);
  CHECK(in_groups.groups == groups);
  CHECK(in_groups.uid.empty());
  CHECK(in_groups.extra.empty());
}

}  // namespace
}  // namespace kf
