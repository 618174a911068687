// Go's text handling where the apiserver's answers depend on it: UTF-8 decoding as
// unicode/utf8 does it, strconv.Quote (%q), and strings as encoding/json writes them. Stateless.
#ifndef KUBE_FANOUT_COMMON_API_GO_TEXT_H_
#define KUBE_FANOUT_COMMON_API_GO_TEXT_H_

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

namespace kf {

// Go's fmt %q of a string (strconv.Quote): printable text as is, `"` and `\` escaped, control
// characters and invalid UTF-8 as \a \n \x01 ..., non-printable runes as \u00a0 or \U000e0001.
// Go's unicode.IsPrint is approximated: every assigned non-printable rune class that can plausibly
// appear (C0/C1 controls, spaces other than U+0020, format characters, private use) is escaped;
// unassigned code points are treated as printable.
std::string GoQuote(std::string_view s);

// One UTF-8 sequence at the start of `s` as Go's utf8.DecodeRuneInString reads it: {rune, width};
// invalid or truncated sequences (overlong forms, surrogates, > U+10FFFF) give {0xFFFD, 1}.
// `s` must not be empty.
std::pair<char32_t, size_t> DecodeRune(std::string_view s);

// UTF-8 bytes of `r`.
void AppendRune(char32_t r, std::string* out);

// `s` with every byte that is not part of a valid UTF-8 sequence replaced by U+FFFD, as Go's
// encoding/json writes strings: what a client reads in a Status message built from raw input.
std::string ValidUtf8(std::string_view s);

// An InvalidArgument status carrying `message` as a client of the apiserver would read it in the
// Status body (through ValidUtf8).
absl::Status StatusMessageError(std::string_view message);

}  // namespace kf

#endif  // KUBE_FANOUT_COMMON_API_GO_TEXT_H_
