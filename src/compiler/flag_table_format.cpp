#include "compiler/flag_table_format.hpp"

namespace kache::compiler {

bool rule_matches(const ForwardRule& r, std::string_view flag) {
  return r.match == Match::Exact ? flag == r.flag : flag.starts_with(r.flag);
}

std::string_view unquote(std::string_view t) {
  while (!t.empty() && (t.front() == '"' || t.front() == '\'')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == '"' || t.back() == '\'')) t.remove_suffix(1);
  return t;
}

std::vector<std::string_view> split_option_list(std::string_view value) {
  std::vector<std::string_view> out;
  auto is_sep = [](char c) {
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  };
  std::size_t i = 0;
  while (i < value.size()) {
    while (i < value.size() && is_sep(value[i])) ++i;
    std::size_t start = i;
    while (i < value.size() && !is_sep(value[i])) ++i;
    if (i > start) out.push_back(value.substr(start, i - start));
  }
  return out;
}

bool is_machine_native(std::string_view value) {
  value = unquote(value);
  return value == "native" || value.ends_with("=native");
}

}  // namespace kache::compiler
