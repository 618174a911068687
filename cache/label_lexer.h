// LabelLexer: labels.Lexer of k8s.io/apimachinery, byte for byte, for the label selector
// parser (label_selector.cc). Like Go's, it reads bytes and uses 0 as the end-of-input
// sentinel, so an embedded NUL ends the token being scanned (and, when whitespace is being
// skipped, the whole selector). Value type; not thread-safe.
#ifndef KUBE_FANOUT_CACHE_LABEL_LEXER_H_
#define KUBE_FANOUT_CACHE_LABEL_LEXER_H_

#include <string>
#include <string_view>

namespace kf {

enum class LabelToken {
  kError,  // Zero, as Go's ErrorToken: scanSpecialSymbol tests "no token yet" with it.
  kEndOfString,
  kClosedPar,
  kComma,
  kDoesNotExist,
  kDoubleEquals,
  kEquals,
  kGreaterThan,
  kIdentifier,
  kIn,
  kLessThan,
  kNotEquals,
  kNotIn,
  kOpenPar,
};

struct LabelItem {
  LabelToken token;
  std::string literal;
};

class LabelLexer {
 public:
  explicit LabelLexer(std::string_view s) : s_(s) {}

  LabelItem Lex();

 private:
  char Read() { return pos_ < s_.size() ? s_[pos_++] : '\0'; }
  void Unread() { --pos_; }
  LabelItem ScanIdOrKeyword();
  // Longest run of special symbols that is still a token ("!=" rather than "!", "=").
  LabelItem ScanSpecialSymbol();

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace kf

#endif  // KUBE_FANOUT_CACHE_LABEL_LEXER_H_
