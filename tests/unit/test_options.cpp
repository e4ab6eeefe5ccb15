// The option table of kache's commands (commands/options.hpp): its rows are well formed, the hand-read
// commands match them as they always read their arguments, their usage line is the one they printed,
// a CLI11 parser that leaves a row out is caught, and the completion scripts hold every spelling.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "commands/options.hpp"

namespace cmd = kache::commands;

namespace {

TEST(OptionTable, SpellingsAreOptionsAndUniquePerCommand) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const cmd::OptionRow& row : cmd::option_rows()) {
    EXPECT_FALSE(row.help.empty()) << row.spellings;
    for (const std::string_view name : cmd::spellings_of(row)) {
      EXPECT_TRUE(name.starts_with("-")) << name;
      EXPECT_TRUE(seen.emplace(std::string(row.command), std::string(name)).second)
          << "kache " << row.command << " has two rows spelled " << name;
    }
    // A value a shell completes as a path is a value: a flag has nothing to complete.
    if (row.value.empty()) {
      EXPECT_EQ(row.completes, cmd::Completes::nothing) << row.spellings;
    }
  }
}

TEST(OptionTable, EveryCommandHasItsHelpRow) {
  EXPECT_NO_THROW(cmd::find_row("", "--help"));
  for (const std::string_view command : cmd::kSubcommands) {
    EXPECT_FALSE(cmd::rows_of(command).empty()) << command;
    EXPECT_NO_THROW(cmd::find_row(command, "-h")) << command;
  }
  EXPECT_THROW(cmd::find_row("doctor", "--no-such-option"), std::logic_error);
}

TEST(OptionTable, MatchesValuesGivenApartOrAfterAnEqualsSign) {
  const std::vector<std::string> args = {"--nvcc", "/opt/nvcc", "--compiler-bindir=g++-12", "--json", "--hipcc"};
  std::size_t i = 0;
  auto m = cmd::match_option("doctor", args, i);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->is("--nvcc"));
  EXPECT_EQ(m->value, "/opt/nvcc");
  EXPECT_EQ(i, 1u);
  i = 2;
  m = cmd::match_option("doctor", args, i);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->is("-ccbin"));  // any spelling names the row
  EXPECT_EQ(m->value, "g++-12");
  i = 3;
  m = cmd::match_option("doctor", args, i);
  ASSERT_TRUE(m && m->is("--json"));
  i = 4;
  EXPECT_FALSE(cmd::match_option("doctor", args, i)) << "--hipcc without its value is no option";
}

TEST(OptionTable, RefusesWhatNoRowSpells) {
  const std::vector<std::string> args = {"--json=yes", "--nvc", "--", "--last"};
  for (std::size_t i = 0; i < 3; ++i) {
    std::size_t at = i;
    EXPECT_FALSE(cmd::match_option(i == 2 ? "explain" : "doctor", args, at)) << args[i];
  }
  std::size_t at = 3;
  EXPECT_FALSE(cmd::match_option("doctor", args, at)) << "--last is explain's, not doctor's";
}

TEST(OptionTable, DoctorsUsageLineIsTheOneItPrinted) {
  EXPECT_EQ(cmd::usage_line("doctor"),
            "usage: kache doctor [--json] [--nvcc PATH] [-ccbin COMPILER] [--hipcc PATH]\n"
            "                    [--probe-timeout SECONDS]\n");
}

TEST(OptionTable, OptionsHelpListsEveryRow) {
  const std::string text = cmd::options_help("explain");
  for (const cmd::OptionRow* row : cmd::rows_of("explain")) EXPECT_NE(text.find(row->help), std::string::npos);
  EXPECT_NE(text.find("  -- COMPILER ARGS...     "), std::string::npos) << text;
}

TEST(OptionTable, ACli11ParserLeavingARowOutIsCaught) {
  CLI::App app{"kache report", "kache report"};
  bool all = false;
  cmd::set_help_row(app, "report");
  cmd::add_row(app, "report", "--all", all);
  EXPECT_THROW(cmd::require_every_row(app, "report"), std::logic_error);
}

TEST(OptionTable, CompletionsHoldEverySpellingSubcommandAndCompiler) {
  for (const char* shell : {"bash", "zsh"}) {
    const std::string script = cmd::completion_script(shell);
    for (const cmd::OptionRow& row : cmd::option_rows()) {
      for (const std::string_view name : cmd::spellings_of(row))
        EXPECT_NE(script.find(std::string(name)), std::string::npos) << shell << ": " << name;
    }
    for (const std::string_view word : cmd::kSubcommands) EXPECT_NE(script.find(word), std::string::npos) << word;
    for (const std::string_view word : cmd::kCompilerNames) EXPECT_NE(script.find(word), std::string::npos) << word;
  }
  EXPECT_EQ(cmd::completion_script("fish"), "");
}

TEST(OptionTable, ZshDescriptionsAreQuoted) {
  // doctor's -ccbin: "nvcc's own choice" in a single-quoted spec.
  EXPECT_NE(cmd::completion_script("zsh").find("nvcc'\\''s own choice"), std::string::npos);
}

}  // namespace
