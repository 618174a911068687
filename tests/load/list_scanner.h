// ListScanner: reads a LIST response body (a JSON object such as
// {"kind":"PodList","metadata":{"resourceVersion":"123","continue":"..."},"items":[...]}) as its
// bytes arrive, in any split, and keeps only what a reflector needs: the list's
// metadata.resourceVersion and metadata.continue, and the number of items. Nothing else is
// stored, so a list of any size costs a few bytes; the fields may come in any order (before or
// after "items"), and the items' own metadata is not confused with the list's.
//
// A lexical scan, not a validating parser: valid JSON is read correctly; broken JSON is noticed
// when its brackets do not balance. One scanner per response; not thread-safe.
#ifndef KUBE_FANOUT_TESTS_LOAD_LIST_SCANNER_H_
#define KUBE_FANOUT_TESTS_LOAD_LIST_SCANNER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kf::load {

class ListScanner {
 public:
  // Consumes the next bytes of the body. Returns false once the body is found broken.
  bool Feed(std::string_view data);
  // Protobuf bodies (an envelope around XList) are kept until the body's end and read then.
  void set_protobuf(bool on) { protobuf_ = on; }
  // The body has ended (a no-op for JSON, which is read as it comes).
  void Finish();

  // The top-level value has ended (bytes after it are ignored).
  bool done() const { return done_; }
  bool failed() const { return failed_; }
  const std::string& resource_version() const { return resource_version_; }
  const std::string& continue_token() const { return continue_; }
  uint64_t items() const { return items_; }

 private:
  static constexpr size_t kMaxKey = 32;
  static constexpr size_t kMaxValue = 64 << 10;
  static constexpr size_t kMaxDepth = 256;

  void StartString();
  void EndString();
  bool Fail() {
    failed_ = true;
    return false;
  }

  std::vector<char> stack_;  // '{' or '[' per open container.
  bool expect_key_ = false;  // In an object, the next string is a key.
  bool in_string_ = false;
  bool escape_ = false;
  bool string_is_key_ = false;
  std::string* capture_ = nullptr;  // Where the current string's bytes go, if anywhere.
  bool capture_overflow_ = false;
  std::string key1_, key2_;  // The current key at depth 1 and at depth 2.
  std::string scratch_;      // Bytes of a key being read.
  std::string resource_version_, continue_;
  uint64_t items_ = 0;
  bool started_ = false, done_ = false, failed_ = false;
  bool protobuf_ = false;
  std::string body_;  // Protobuf: the body so far (at most kMaxProtobufBody).
  static constexpr size_t kMaxProtobufBody = 512u << 20;
};

}  // namespace kf::load

#endif  // KUBE_FANOUT_TESTS_LOAD_LIST_SCANNER_H_
