#include "cache/label_lexer.h"

#include <utility>

namespace kf {
namespace {

using Token = LabelToken;
using Item = LabelItem;

// string2token: every literal but identifiers.
Token Keyword(std::string_view s) {
  static constexpr std::pair<std::string_view, Token> kKeywords[] = {
      {")", Token::kClosedPar},     {",", Token::kComma},    {"!", Token::kDoesNotExist},
      {"==", Token::kDoubleEquals}, {"=", Token::kEquals},   {">", Token::kGreaterThan},
      {"in", Token::kIn},           {"<", Token::kLessThan}, {"!=", Token::kNotEquals},
      {"notin", Token::kNotIn},     {"(", Token::kOpenPar},
  };
  for (const auto& [text, token] : kKeywords) {
    if (text == s) return token;
  }
  return Token::kIdentifier;
}

bool IsWhitespace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool IsSpecialSymbol(char c) {
  return c != 0 && std::string_view("=!(),><").find(c) != std::string_view::npos;
}

}  // namespace

LabelItem LabelLexer::Lex() {
  char c = Read();
  while (IsWhitespace(c)) c = Read();
  if (c == 0) return {Token::kEndOfString, ""};
  Unread();
  return IsSpecialSymbol(c) ? ScanSpecialSymbol() : ScanIdOrKeyword();
}

LabelItem LabelLexer::ScanIdOrKeyword() {
  std::string buffer;
  for (char c = Read(); c != 0; c = Read()) {
    if (IsSpecialSymbol(c) || IsWhitespace(c)) {
      Unread();
      break;
    }
    buffer.push_back(c);
  }
  return {Keyword(buffer), buffer};
}

LabelItem LabelLexer::ScanSpecialSymbol() {
  Item last{Token::kError, ""};
  std::string buffer;
  for (char c = Read(); c != 0; c = Read()) {
    if (!IsSpecialSymbol(c)) {
      Unread();
      break;
    }
    buffer.push_back(c);
    if (Token t = Keyword(buffer); t != Token::kIdentifier) {
      last = {t, buffer};
    } else if (last.token != Token::kError) {
      Unread();
      break;
    }
  }
  if (last.token == Token::kError) {
    return {Token::kError, "error expected: keyword found '" + buffer + "'"};
  }
  return last;
}

}  // namespace kf
