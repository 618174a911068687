#include "cache/label_selector.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "cache/label_lexer.h"
#include "common/strings.h"

namespace kf {

namespace {

using Token = LabelToken;
using Item = LabelItem;
using Lexer = LabelLexer;

// --- Requirement validation: labels.NewRequirement ------------------------------------------

// strconv.ParseInt(s, 10, 64).
bool ParseGoInt64(std::string_view s, int64_t* out) {
  bool negative = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty()) return false;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (v > (limit - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.append(sep);
    out.append(parts[i]);
  }
  return out;
}

// field.Invalid(path, value, detail).Error().
std::string InvalidValue(std::string_view path, std::string_view value, std::string_view detail) {
  return std::string(path) + ": Invalid value: " + GoQuote(value) + ": " + std::string(detail);
}

// The aggregate of NewRequirement's field.ErrorList: one error as is, several as "[a, b]". (The
// aggregate also drops duplicate messages; these carry distinct indices, so there are none.)
absl::Status Aggregate(const std::vector<std::string>& errs) {
  if (errs.empty()) return absl::OkStatus();
  if (errs.size() == 1) return absl::InvalidArgumentError(errs[0]);
  return absl::InvalidArgumentError("[" + Join(errs, ", ") + "]");
}

// Only the checks the parser can fail: it has validated the key already and always passes a
// value count that suits the operator.
absl::StatusOr<LabelRequirement> NewRequirement(std::string key, LabelOperator op,
                                                std::vector<std::string> values) {
  std::vector<std::string> errs;
  if (op == LabelOperator::kGreaterThan || op == LabelOperator::kLessThan) {
    for (size_t i = 0; i < values.size(); ++i) {
      int64_t ignored;
      if (!ParseGoInt64(values[i], &ignored)) {
        errs.push_back(InvalidValue("values[" + std::to_string(i) + "]", values[i],
                                    "for 'Gt', 'Lt' operators, the value must be an integer"));
      }
    }
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (auto v = LabelValueErrors(values[i]); !v.empty()) {
      errs.push_back(
          InvalidValue("values[" + std::to_string(i) + "][" + key + "]", values[i], Join(v, "; ")));
    }
  }
  if (absl::Status s = Aggregate(errs); !s.ok()) return s;
  return LabelRequirement(std::move(key), op, std::move(values));
}

// --- Parser: labels.Parser ------------------------------------------------------------------

// In the Values context "in" and "notin" are identifiers: "in in (in)" is a valid selector.
enum class Context { kKeyAndOperator, kValues };

absl::Status Error(const std::string& message) { return absl::InvalidArgumentError(message); }

class Parser {
 public:
  explicit Parser(std::string_view selector) {
    Lexer lexer(selector);
    do {
      items_.push_back(lexer.Lex());
    } while (items_.back().token != Token::kEndOfString);
  }

  absl::StatusOr<std::vector<LabelRequirement>> Parse();

 private:
  const Item& Lookahead(Context context, Token* token) const {
    const Item& item = items_[std::min(pos_, items_.size() - 1)];
    *token = item.token;
    if (context == Context::kValues && (*token == Token::kIn || *token == Token::kNotIn)) {
      *token = Token::kIdentifier;
    }
    return item;
  }
  const Item& Consume(Context context, Token* token) {
    const Item& item = Lookahead(context, token);
    if (pos_ < items_.size()) ++pos_;
    return item;
  }

  absl::StatusOr<LabelRequirement> ParseRequirement();
  absl::Status ParseKeyAndInferOperator(std::string* key, std::optional<LabelOperator>* op);
  absl::StatusOr<LabelOperator> ParseOperator();
  absl::StatusOr<std::vector<std::string>> ParseValues();
  absl::Status ParseIdentifiersList(std::vector<std::string>* values);
  absl::StatusOr<std::string> ParseExactValue();

  std::vector<Item> items_;
  size_t pos_ = 0;
};

absl::StatusOr<std::vector<LabelRequirement>> Parser::Parse() {
  std::vector<LabelRequirement> requirements;
  while (true) {
    Token t;
    const Item& next = Lookahead(Context::kValues, &t);
    if (t == Token::kEndOfString) return requirements;
    if (t != Token::kIdentifier && t != Token::kDoesNotExist) {
      return Error("found '" + next.literal + "', expected: !, identifier, or 'end of string'");
    }
    absl::StatusOr<LabelRequirement> r = ParseRequirement();
    if (!r.ok()) return Error("unable to parse requirement: " + std::string(r.status().message()));
    requirements.push_back(*std::move(r));
    const Item& after = Consume(Context::kValues, &t);
    if (t == Token::kEndOfString) return requirements;
    if (t != Token::kComma) {
      return Error("found '" + after.literal + "', expected: ',' or 'end of string'");
    }
    const Item& following = Lookahead(Context::kValues, &t);
    if (t != Token::kIdentifier && t != Token::kDoesNotExist) {
      return Error("found '" + following.literal + "', expected: identifier after ','");
    }
  }
}

absl::StatusOr<LabelRequirement> Parser::ParseRequirement() {
  std::string key;
  std::optional<LabelOperator> op;
  if (absl::Status s = ParseKeyAndInferOperator(&key, &op); !s.ok()) return s;
  if (op.has_value()) return NewRequirement(std::move(key), *op, {});
  absl::StatusOr<LabelOperator> binary = ParseOperator();
  if (!binary.ok()) return binary.status();
  if (*binary == LabelOperator::kIn || *binary == LabelOperator::kNotIn) {
    absl::StatusOr<std::vector<std::string>> values = ParseValues();
    if (!values.ok()) return values.status();
    return NewRequirement(std::move(key), *binary, *std::move(values));
  }
  absl::StatusOr<std::string> value = ParseExactValue();
  if (!value.ok()) return value.status();
  return NewRequirement(std::move(key), *binary, {*std::move(value)});
}

// "!k" → DoesNotExist (even if an operator follows: "!k=v" then fails in Parse); "k" followed by
// ',' or the end → Exists; otherwise no operator yet.
absl::Status Parser::ParseKeyAndInferOperator(std::string* key, std::optional<LabelOperator>* op) {
  Token t;
  const Item* item = &Consume(Context::kValues, &t);
  if (t == Token::kDoesNotExist) {
    *op = LabelOperator::kDoesNotExist;
    item = &Consume(Context::kValues, &t);
  }
  if (t != Token::kIdentifier) return Error("found '" + item->literal + "', expected: identifier");
  // The parser's field path is nil, which Go prints as "<nil>".
  if (auto errs = LabelKeyErrors(item->literal); !errs.empty()) {
    return Error(InvalidValue("<nil>", item->literal, Join(errs, "; ")));
  }
  *key = item->literal;
  Lookahead(Context::kValues, &t);
  if ((t == Token::kEndOfString || t == Token::kComma) && !op->has_value()) {
    *op = LabelOperator::kExists;
  }
  return absl::OkStatus();
}

absl::StatusOr<LabelOperator> Parser::ParseOperator() {
  Token t;
  const Item& item = Consume(Context::kKeyAndOperator, &t);
  switch (t) {
    case Token::kIn:
      return LabelOperator::kIn;
    case Token::kNotIn:
      return LabelOperator::kNotIn;
    case Token::kEquals:
      return LabelOperator::kEquals;
    case Token::kDoubleEquals:
      return LabelOperator::kDoubleEquals;
    case Token::kNotEquals:
      return LabelOperator::kNotEquals;
    case Token::kGreaterThan:
      return LabelOperator::kGreaterThan;
    case Token::kLessThan:
      return LabelOperator::kLessThan;
    default:
      return Error("found '" + item.literal + "', expected: in, notin, =, ==, !=, gt, lt");
  }
}

// "(" list ")", as a sorted set (sets.String.List()); "()" is the set {""}.
absl::StatusOr<std::vector<std::string>> Parser::ParseValues() {
  Token t;
  const Item& open = Consume(Context::kValues, &t);
  if (t != Token::kOpenPar) return Error("found '" + open.literal + "' expected: '('");
  const Item& first = Lookahead(Context::kValues, &t);
  std::vector<std::string> values;
  if (t == Token::kClosedPar) {
    Consume(Context::kValues, &t);
    values.emplace_back();
  } else if (t == Token::kIdentifier || t == Token::kComma) {
    if (absl::Status s = ParseIdentifiersList(&values); !s.ok()) return s;
    // Unreachable: the list ends only before ')'. Go reports the literal seen before the list.
    if (Consume(Context::kValues, &t); t != Token::kClosedPar) {
      return Error("found '" + first.literal + "', expected: ')'");
    }
  } else {
    return Error("found '" + first.literal + "', expected: ',', ')' or identifier");
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

// Comma-separated, possibly empty identifiers: "(a,,b)", "(,a)" and "(a,)" all include "".
absl::Status Parser::ParseIdentifiersList(std::vector<std::string>* values) {
  while (true) {
    Token t;
    const Item& item = Consume(Context::kValues, &t);
    if (t == Token::kIdentifier) {
      values->push_back(item.literal);
      const Item& next = Lookahead(Context::kValues, &t);
      if (t == Token::kClosedPar) return absl::OkStatus();
      if (t != Token::kComma) return Error("found '" + next.literal + "', expected: ',' or ')'");
    } else if (t == Token::kComma) {
      if (values->empty()) values->emplace_back();  // "(,"
      Lookahead(Context::kValues, &t);
      if (t == Token::kClosedPar || t == Token::kComma) values->emplace_back();  // ",)" ",,"
      if (t == Token::kClosedPar) return absl::OkStatus();
    } else {
      return Error("found '" + item.literal + "', expected: ',', or identifier");
    }
  }
}

// The value after =, ==, !=, >, <; empty when ',' or the end follows ("k=" selects k="").
absl::StatusOr<std::string> Parser::ParseExactValue() {
  Token t;
  Lookahead(Context::kValues, &t);
  if (t == Token::kEndOfString || t == Token::kComma) return std::string();
  const Item& item = Consume(Context::kValues, &t);
  if (t == Token::kIdentifier) return item.literal;
  return Error("found '" + item.literal + "', expected: identifier");
}

bool HasValue(const std::vector<std::string>& values, const std::string& v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

}  // namespace

bool LabelRequirement::Matches(const LabelSet& labels) const {
  const std::string* v = labels.Get(key_);
  switch (op_) {
    case LabelOperator::kIn:
    case LabelOperator::kEquals:
    case LabelOperator::kDoubleEquals:
      return v != nullptr && HasValue(values_, *v);
    case LabelOperator::kNotIn:
    case LabelOperator::kNotEquals:
      return v == nullptr || !HasValue(values_, *v);
    case LabelOperator::kExists:
      return v != nullptr;
    case LabelOperator::kDoesNotExist:
      return v == nullptr;
    case LabelOperator::kGreaterThan:
    case LabelOperator::kLessThan: {
      int64_t have, want;
      if (v == nullptr || values_.size() != 1 || !ParseGoInt64(*v, &have) ||
          !ParseGoInt64(values_[0], &want)) {
        return false;
      }
      return op_ == LabelOperator::kGreaterThan ? have > want : have < want;
    }
  }
  return false;
}

std::string LabelRequirement::String() const {
  std::string out = op_ == LabelOperator::kDoesNotExist ? "!" + key_ : key_;
  switch (op_) {
    case LabelOperator::kExists:
    case LabelOperator::kDoesNotExist:
      return out;
    case LabelOperator::kIn:
      return out + " in (" + Join(values_, ",") + ")";
    case LabelOperator::kNotIn:
      return out + " notin (" + Join(values_, ",") + ")";
    case LabelOperator::kEquals:
      out += "=";
      break;
    case LabelOperator::kDoubleEquals:
      out += "==";
      break;
    case LabelOperator::kNotEquals:
      out += "!=";
      break;
    case LabelOperator::kGreaterThan:
      out += ">";
      break;
    case LabelOperator::kLessThan:
      out += "<";
      break;
  }
  return out + Join(values_, ",");
}

absl::StatusOr<LabelSelector> LabelSelector::Parse(std::string_view selector) {
  absl::StatusOr<std::vector<LabelRequirement>> requirements = Parser(selector).Parse();
  if (!requirements.ok()) return StatusMessageError(ToStd(requirements.status().message()));
  // Go sorts with sort.Sort (not stable), but for fewer than 13 requirements that is an
  // insertion sort, which is; a stable sort keeps RequiresExactMatch deterministic either way.
  std::stable_sort(
      requirements->begin(), requirements->end(),
      [](const LabelRequirement& a, const LabelRequirement& b) { return a.key() < b.key(); });
  return LabelSelector(*std::move(requirements));
}

bool LabelSelector::Matches(const LabelSet& labels) const {
  return std::all_of(requirements_.begin(), requirements_.end(),
                     [&labels](const LabelRequirement& r) { return r.Matches(labels); });
}

std::optional<std::string> LabelSelector::RequiresExactMatch(std::string_view key) const {
  for (const LabelRequirement& r : requirements_) {
    if (r.key() != key) continue;
    const bool exact = r.op() == LabelOperator::kEquals || r.op() == LabelOperator::kDoubleEquals ||
                       r.op() == LabelOperator::kIn;
    if (exact && r.values().size() == 1) return r.values()[0];
    return std::nullopt;
  }
  return std::nullopt;
}

std::string LabelSelector::String() const {
  std::string out;
  for (const LabelRequirement& r : requirements_) {
    if (!out.empty()) out.push_back(',');
    out += r.String();
  }
  return out;
}

}  // namespace kf
