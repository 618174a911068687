#include "tests/load/list_scanner.h"

#include "common/api/kube_proto.h"
#include "common/api/upstream_list.h"

namespace kf::load {

void ListScanner::StartString() {
  in_string_ = true;
  escape_ = false;
  capture_overflow_ = false;
  const size_t depth = stack_.size();
  const bool in_object = depth > 0 && stack_.back() == '{';
  string_is_key_ = in_object && expect_key_;
  capture_ = nullptr;
  if (string_is_key_) {
    if (depth <= 2) {
      scratch_.clear();
      capture_ = &scratch_;
    }
    return;
  }
  // A string value directly in the top-level "metadata" object.
  if (depth == 2 && in_object && stack_[0] == '{' && key1_ == "metadata") {
    if (key2_ == "resourceVersion") {
      resource_version_.clear();
      capture_ = &resource_version_;
    } else if (key2_ == "continue") {
      continue_.clear();
      capture_ = &continue_;
    }
  }
}

void ListScanner::EndString() {
  in_string_ = false;
  if (!string_is_key_ || capture_ == nullptr) return;
  // An overlong key is no key we look for: keep it from matching.
  std::string key = capture_overflow_ ? std::string() : scratch_;
  if (stack_.size() == 1) {
    key1_ = std::move(key);
    key2_.clear();
  } else {
    key2_ = std::move(key);
  }
  capture_ = nullptr;
}

void ListScanner::Finish() {
  if (!protobuf_ || failed_ || done_) return;
  ProtoListPage page;
  if (!ParseProtoList(body_, &page)) {
    Fail();
    return;
  }
  resource_version_ = std::to_string(page.resource_version);
  continue_ = page.continue_token;
  items_ = page.items.size();
  done_ = true;
  body_.clear();
}

bool ListScanner::Feed(std::string_view data) {
  if (failed_) return false;
  if (protobuf_) {
    if (body_.size() + data.size() > kMaxProtobufBody) return Fail();
    body_.append(data);
    return true;
  }
  size_t i = 0;
  const size_t n = data.size();
  while (i < n && !done_) {
    if (in_string_) {
      // Fast path through the string up to its closing quote or the next escape.
      size_t j = i;
      if (!escape_) {
        while (j < n && data[j] != '"' && data[j] != '\\') ++j;
      }
      if (capture_ != nullptr && j > i) {
        const size_t limit = capture_ == &scratch_ ? kMaxKey : kMaxValue;
        if (capture_->size() + (j - i) > limit) {
          capture_overflow_ = true;
        } else {
          capture_->append(data.substr(i, j - i));
        }
      }
      if (j == n) return true;
      const char c = data[j];
      if (escape_) {
        escape_ = false;
        if (capture_ != nullptr && capture_->size() < kMaxValue) capture_->push_back(c);
      } else if (c == '\\') {
        escape_ = true;
        if (capture_ != nullptr && capture_->size() < kMaxValue) capture_->push_back(c);
      } else {  // The closing quote.
        EndString();
      }
      i = j + 1;
      continue;
    }
    const char c = data[i++];
    switch (c) {
      case '"':
        if (stack_.empty()) return Fail();  // The body must be an object.
        StartString();
        break;
      case '{':
      case '[':
        if (stack_.size() >= kMaxDepth || (stack_.empty() && (started_ || c != '{'))) {
          return Fail();
        }
        started_ = true;
        // An object element of the top-level "items" array.
        if (c == '{' && stack_.size() == 2 && stack_[1] == '[' && key1_ == "items") ++items_;
        stack_.push_back(c);
        expect_key_ = c == '{';
        if (stack_.size() == 2) key2_.clear();
        break;
      case '}':
      case ']':
        if (stack_.empty() || stack_.back() != (c == '}' ? '{' : '[')) return Fail();
        stack_.pop_back();
        expect_key_ = false;
        if (stack_.empty()) done_ = true;
        break;
      case ':':
        expect_key_ = false;
        break;
      case ',':
        expect_key_ = !stack_.empty() && stack_.back() == '{';
        break;
      default:  // Whitespace, numbers, true, false, null.
        break;
    }
  }
  return true;
}

}  // namespace kf::load
