#include "cache/shard_selector.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace kf {

// A recursive-descent reader of the CEL subset in shard_selector.h. Every refusal is the same
// InvalidArgument: the request then goes to the apiserver, which words the error.
class ShardParser {
 public:
  explicit ShardParser(std::string_view in) : in_(in) {}

  absl::StatusOr<ShardSelector> Run() {
    ShardSelector::Data data;
    if (!Expr(data, 0)) return Refused();
    SkipSpace();
    if (pos_ != in_.size() || data.ranges.empty()) return Refused();
    ShardSelector out;
    out.data_ = std::make_shared<const ShardSelector::Data>(std::move(data));
    return out;
  }

 private:
  static absl::Status Refused() {
    return absl::InvalidArgumentError("shard selector left to the apiserver");
  }

  // CEL's whitespace (its lexer's WHITESPACE: space, tab, CR, LF, form feed).
  void SkipSpace() {
    while (pos_ < in_.size() && (in_[pos_] == ' ' || in_[pos_] == '\t' || in_[pos_] == '\r' ||
                                 in_[pos_] == '\n' || in_[pos_] == '\f')) {
      ++pos_;
    }
  }
  bool Eat(std::string_view token) {
    SkipSpace();
    if (in_.substr(pos_, token.size()) != token) return false;
    pos_ += token.size();
    return true;
  }
  static bool IdentChar(char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && c >= '0' && c <= '9');
  }
  bool Ident(std::string* out) {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < in_.size() && IdentChar(in_[pos_], pos_ == start)) ++pos_;
    *out = std::string(in_.substr(start, pos_ - start));
    return !out->empty();
  }

  bool Expr(ShardSelector::Data& out, int depth) {
    if (depth > 8) return false;
    do {
      if (!Term(out, depth)) return false;
    } while (Eat("||"));
    return true;
  }

  bool Term(ShardSelector::Data& out, int depth) {
    if (Eat("(")) return Expr(out, depth + 1) && Eat(")");
    std::string fn;
    if (!Ident(&fn) || fn != "shardRange" || !Eat("(")) return false;
    std::string path, part;
    do {
      if (!Ident(&part)) return false;
      absl::StrAppend(&path, path.empty() ? "" : ".", part);
    } while (Eat("."));
    if (path != "object.metadata.uid" && path != "object.metadata.namespace") return false;
    const bool by_namespace = path == "object.metadata.namespace";
    if (!out.ranges.empty() && by_namespace != out.by_namespace) return false;
    std::string_view start, end;
    ShardSelector::Range r;
    if (!Eat(",") || !Hex(&start, &r.start, nullptr) || !Eat(",") ||
        !Hex(&end, &r.end, &r.to_top) || !Eat(")")) {
      return false;
    }
    if (start == "0x10000000000000000" || (!r.to_top && r.start >= r.end)) return false;
    if (out.ranges.size() >= ShardSelector::kMaxRanges) return false;
    out.by_namespace = by_namespace;
    out.ranges.push_back(r);
    absl::StrAppend(&out.text, out.text.empty() ? "" : " || ", "shardRange(", path, ", '",
                    ToAbsl(start), "', '", ToAbsl(end), "')");
    return true;
  }

  // A quoted bound as the apiserver accepts it: '0x' and 16 lowercase hex digits, or 2^64.
  bool Hex(std::string_view* text, uint64_t* value, bool* to_top) {
    SkipSpace();
    if (pos_ >= in_.size() || (in_[pos_] != '\'' && in_[pos_] != '"')) return false;
    const char quote = in_[pos_];
    const size_t close = in_.find(quote, pos_ + 1);
    if (close == std::string_view::npos) return false;
    *text = in_.substr(pos_ + 1, close - pos_ - 1);
    pos_ = close + 1;
    if (*text == "0x10000000000000000") {
      if (to_top == nullptr) return true;  // A start of 2^64: refused by the caller.
      *to_top = true;
      return true;
    }
    if (text->size() != 18 || text->substr(0, 2) != "0x") return false;
    for (char c : text->substr(2)) {
      if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    }
    return absl::SimpleHexAtoi(ToAbsl(text->substr(2)), value);
  }

  std::string_view in_;
  size_t pos_ = 0;
};

ShardHashes ShardHashes::Of(std::string_view uid, std::string_view ns) {
  return ShardHashes{.uid = ShardSelector::Hash(uid), .namespace_ = ShardSelector::Hash(ns)};
}

absl::StatusOr<ShardSelector> ShardSelector::Parse(std::string_view selector) {
  if (selector.size() > kMaxBytes) return absl::InvalidArgumentError("shard selector too long");
  return ShardParser(selector).Run();
}

const std::string& ShardSelector::String() const {
  static const std::string* const kEverything = new std::string();
  return data_ ? data_->text : *kEverything;
}

bool ShardSelector::Matches(const ShardHashes& hashes) const {
  if (!data_) return true;
  const uint64_t h = data_->by_namespace ? hashes.namespace_ : hashes.uid;
  for (const Range& r : data_->ranges) {
    if (h >= r.start && (r.to_top || h < r.end)) return true;
  }
  return false;
}

uint64_t ShardSelector::Hash(std::string_view value) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a 64-bit offset basis (hash/fnv).
  for (unsigned char c : value) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

}  // namespace kf
