#include "util/shell_words.hpp"

#include <cctype>

namespace kache::util {

namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// One pass over a line; each method consumes what starts at line[i].
class Lexer {
 public:
  Lexer(std::string_view line, const ShellGrammar& grammar) : line_(line), grammar_(grammar) {}

  ShellWords run() {
    while (i_ < line_.size() && out_.end == ShellWords::End::complete) {
      const char c = line_[i_];
      if (c == ' ' || c == '\t') {
        end_word();
        ++i_;
        continue;
      }
      begin_word();
      if (c == '\'') {
        single_quoted();
      } else if (c == '"') {
        double_quoted();
      } else if (c == '\\') {
        escaped();
      } else if (c == '$' && grammar_.expand) {
        expand(false);
      } else {
        if (at_word_start() || (c != '#' && c != '~')) note_special(c);  // "a#b" is one word
        append(c);
      }
    }
    if (out_.end != ShellWords::End::complete) i_ = line_.size();
    end_word();
    return std::move(out_);
  }

 private:
  void begin_word() {
    if (in_word_) return;
    in_word_ = true;
    start_ = i_;
    text_.clear();
  }
  void end_word() {
    if (!in_word_) return;
    out_.words.push_back({text_, std::string(line_.substr(start_, i_ - start_))});
    in_word_ = false;
  }
  bool at_word_start() const { return i_ == start_; }
  void append(char c) {
    text_ += c;
    ++i_;
  }
  void note_special(char c) {
    if (out_.special == 0 && grammar_.specials.find(c) != std::string_view::npos) out_.special = c;
  }

  void single_quoted() {
    const std::size_t close = line_.find('\'', i_ + 1);
    if (close == std::string_view::npos) {
      text_ += line_.substr(i_ + 1);
      out_.end = ShellWords::End::open;
      return;
    }
    text_ += line_.substr(i_ + 1, close - i_ - 1);
    i_ = close + 1;
  }

  void double_quoted() {
    ++i_;
    while (i_ < line_.size() && line_[i_] != '"' && out_.end == ShellWords::End::complete) {
      const char c = line_[i_];
      if (c == '\\' && i_ + 1 < line_.size() && std::string_view("$`\"\\").find(line_[i_ + 1]) != std::string_view::npos) {
        text_ += line_[i_ + 1];
        i_ += 2;
      } else if (c == '$' && grammar_.expand) {
        expand(true);
      } else {
        if (c == '`') note_special(c);
        append(c);
      }
    }
    if (i_ >= line_.size()) {
      if (out_.end == ShellWords::End::complete) out_.end = ShellWords::End::open;
      return;
    }
    if (out_.end == ShellWords::End::complete) ++i_;
  }

  void escaped() {
    if (i_ + 1 >= line_.size()) {
      append('\\');
      out_.end = ShellWords::End::open;
      return;
    }
    text_ += line_[i_ + 1];
    i_ += 2;
  }

  // $NAME or ${NAME} at line[i]; an unquoted value that blanks would split or a glob would match is
  // refused rather than split.
  void expand(bool quoted) {
    std::size_t j = i_ + 1;
    const bool braced = j < line_.size() && line_[j] == '{';
    if (braced) ++j;
    std::size_t k = j;
    while (k < line_.size() && is_name_char(line_[k])) ++k;
    if (k == j || (braced && (k >= line_.size() || line_[k] != '}'))) {
      out_.end = ShellWords::End::unexpandable;
      return;
    }
    const std::string value = grammar_.expand(line_.substr(j, k - j));
    if (!quoted && value.find_first_of(" \t\n*?[") != std::string::npos) {
      out_.end = ShellWords::End::unexpandable;
      return;
    }
    text_ += value;
    i_ = k + (braced ? 1 : 0);
  }

  std::string_view line_;
  const ShellGrammar& grammar_;
  ShellWords out_;
  std::size_t i_ = 0;
  std::size_t start_ = 0;
  bool in_word_ = false;
  std::string text_;
};

}  // namespace

std::vector<std::string> ShellWords::texts() const {
  std::vector<std::string> out;
  out.reserve(words.size());
  for (const auto& w : words) out.push_back(w.text);
  return out;
}

ShellWords split_shell_words(std::string_view line, const ShellGrammar& grammar) { return Lexer(line, grammar).run(); }

}  // namespace kache::util
