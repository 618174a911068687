// ShardSelector: a parsed shardSelector query parameter (KEP-5866, alpha in 1.36 behind the
// apiserver's ShardedListAndWatch gate): the objects whose FNV-1a 64-bit hash of one metadata
// field falls in one of the half-open ranges [start, end).
//
//   selector := term ("||" term)*
//   term     := "shardRange(" path "," hex "," hex ")" | "(" selector ")"
//   path     := object.metadata.uid | object.metadata.namespace   (one field for all terms)
//   hex      := '0x' and 16 lowercase hex digits, or '0x10000000000000000' (2^64), quoted
//               with ' or "; start < end
//
// The apiserver reads the expression with the CEL parser and walks its syntax tree
// (k8s.io/apiserver/pkg/sharding/parser.go, v0.36; matching in
// k8s.io/apimachinery/pkg/sharding/selector.go). Parse reads the part of CEL's syntax above
// (whitespace between tokens; string literals without escapes) and refuses anything else, valid
// CEL or not: the proxy passes those requests through and the apiserver answers them itself,
// its errors included (a 500 Status whose message no parser here could copy: CEL's own
// syntax errors).
//
// Value type: immutable after Parse, safe to share between threads. A default-constructed
// selector is empty and matches everything.
#ifndef KUBE_FANOUT_CACHE_SHARD_SELECTOR_H_
#define KUBE_FANOUT_CACHE_SHARD_SELECTOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace kf {

// The hashes a shard selector can select an object by, computed once per object version.
struct ShardHashes {
  uint64_t uid = 0;
  uint64_t namespace_ = 0;

  static ShardHashes Of(std::string_view uid, std::string_view ns);
};

class ShardSelector {
 public:
  ShardSelector() = default;  // Everything.

  // InvalidArgument: not a selector this parser reads exactly (the apiserver's to answer).
  static absl::StatusOr<ShardSelector> Parse(std::string_view selector);

  bool Empty() const { return data_ == nullptr; }
  bool Matches(const ShardHashes& hashes) const;
  // The apiserver's normal form, echoed in ListMeta.shardInfo.selector:
  // "shardRange(object.metadata.uid, '0x…', '0x…') || …", terms in the request's order.
  const std::string& String() const;

  // The hash the apiserver computes of a field's value (sharding.HashField): FNV-1a, 64 bits.
  static uint64_t Hash(std::string_view value);

  // At most this many ranges and bytes are read; past them the apiserver answers.
  static constexpr size_t kMaxRanges = 64;
  static constexpr size_t kMaxBytes = 8192;

 private:
  struct Range {
    uint64_t start = 0;
    uint64_t end = 0;  // Exclusive; with `to_top`, 2^64.
    bool to_top = false;
  };
  struct Data {
    bool by_namespace = false;
    std::vector<Range> ranges;  // At least one.
    std::string text;
  };
  // Null: everything, as most watches ask. Shared by copies: every watcher's filter holds one
  // (16 bytes where the selector itself is 64).
  std::shared_ptr<const Data> data_;

  friend class ShardParser;
};

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_SHARD_SELECTOR_H_
