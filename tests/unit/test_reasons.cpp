// The reason table (core/reasons.cpp) against the sources that produce reasons: every reason a user
// can see counted in `kache -s` has a row with a sentence, and every row is produced somewhere.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "compiler/env_table.hpp"
#include "compiler/nvcc/flag_table.hpp"
#include "core/reasons.hpp"
#include "core/stats.hpp"
#include "core/watch.hpp"

namespace core = kache::core;
using core::ReasonCategory;

namespace {

using Found = std::map<std::string, std::set<std::string>>;  // reason name -> where it was found

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The reason names written as literals where the sources make a reason: the planner's and flag
// table's refuse(...), Passthrough{...}, FlagRefusal{...}, the forwarded-flag rules {"-x", Match::.., "r"}
// and the environment table's Refused rows. A line's literals that look like names (lowercase, '-' and
// '_') are taken; details such as "no -o" or "(empty argument)" do not look like names.
Found reasons_in_sources() {
  const std::regex context(R"((\brefuse\(|\bPassthrough\{|\bFlagRefusal\{|Match::\w+, "|E::Refused, "))");
  const std::regex literal(R"re("([a-z][a-z0-9_-]*)")re");
  const std::regex forward_rule(R"re(Match::\w+, "([^"]+)")re");
  const std::regex env_refused(R"re(E::Refused, "([^"]+)")re");
  Found found;
  const std::filesystem::path src = std::filesystem::path(KACHE_SOURCE_DIR) / "src";
  for (const auto& e : std::filesystem::recursive_directory_iterator(src)) {
    const auto ext = e.path().extension();
    if (ext != ".cpp" && ext != ".hpp") continue;
    std::istringstream lines(read_text(e.path()));
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      const std::string code = line.substr(0, line.find("//"));
      if (!std::regex_search(code, context)) continue;
      const std::string where = e.path().lexically_relative(src).string() + ":" + std::to_string(n);
      std::smatch m;
      if (std::regex_search(code, m, forward_rule) || std::regex_search(code, m, env_refused)) {
        found[m[1]].insert(where);
        continue;
      }
      for (std::sregex_iterator it(code.begin(), code.end(), literal), end; it != end; ++it) {
        found[(*it)[1]].insert(where);
      }
    }
  }
  return found;
}

// Every passthrough reason kache's sources can produce, each with where it comes from.
Found produced_passthrough_reasons() {
  Found found = reasons_in_sources();
  for (const auto& spec : kache::compiler::nvcc::flag_table()) {
    if (spec.effect == kache::compiler::nvcc::Effect::Refuse) found[std::string(spec.reason)].insert("flag_table()");
  }
  for (const auto& r : kache::compiler::env_rules()) {
    if (!r.reason.empty()) found[std::string(r.reason)].insert("env_rules()");
  }
  for (std::string_view name :
       {core::reason::kDisabled, core::reason::kUnsupportedCompiler, core::reason::kOutputDirMissing,
        core::reason::kOutputDirUnwritable, core::reason::kCacheWorldWritable, core::reason::kOutputSpecial,
        core::reason::kCompressedDebug, core::reason::kSourceSpecial, core::reason::kOutputPathThroughLink,
        core::reason::kCacheDirRefused, core::reason::kLtoObject, core::reason::kWrapperScript}) {
    found[std::string(name)].insert("core::reason");
  }
  return found;
}

Found produced_not_stored_reasons() {
  Found found;
  for (std::string_view r : core::hidden_input_reasons()) found[std::string(r)].insert("hidden_input_reasons()");
  for (std::string_view name :
       {core::reason::kClosureUnreadable, core::reason::kInputChanged, core::reason::kPathInObject,
        core::reason::kDepfileTarget, core::reason::kLockTimeout, core::reason::kPrecompiledHeader,
        core::reason::kAssemblerInputs, core::reason::kUnpinnedTime, core::reason::kTimeMacro,
        core::reason::kCompressedFatbin, core::reason::kPathExpanded}) {
    found[std::string(name)].insert("core::reason");
  }
  return found;
}

const std::set<std::string> kProducedErrors = {"storage-read", "storage-write", "remote-failed", "internal"};

}  // namespace

TEST(NamedReasons, EveryRowHasAUniqueNameAndASentence) {
  std::set<std::pair<ReasonCategory, std::string_view>> seen;
  for (const core::Reason& r : core::all_reasons()) {
    EXPECT_TRUE(seen.insert({r.category, r.name}).second) << "duplicate " << r.name;
    EXPECT_FALSE(r.name.empty());
    // A stats counter name: one word of the journal's "name value" records.
    EXPECT_EQ(r.name.find_first_of(" \t\r\n."), std::string_view::npos) << r.name;
    EXPECT_GE(r.sentence.size(), 16u) << r.name << ": a sentence that explains it";
    EXPECT_TRUE(r.sentence.ends_with(".")) << r.name << ": " << r.sentence;
    EXPECT_EQ(r.sentence.find('\n'), std::string_view::npos) << r.name;
  }
}

TEST(NamedReasons, EveryUsedReasonIsInTheTable) {
  const Found passthrough = produced_passthrough_reasons();
  // The scan must keep finding the planner's reasons: if its patterns rot, this test must not pass
  // on an empty list.
  ASSERT_GE(passthrough.size(), 25u);
  for (const auto& [name, where] : passthrough) {
    EXPECT_NE(core::find_reason(ReasonCategory::Passthrough, name), nullptr)
        << "passthrough reason '" << name << "' (" << *where.begin() << ") has no row in src/core/reasons.cpp";
  }
  for (const auto& [name, where] : produced_not_stored_reasons()) {
    EXPECT_NE(core::find_reason(ReasonCategory::NotStored, name), nullptr)
        << "not-stored reason '" << name << "' (" << *where.begin() << ") has no row in src/core/reasons.cpp";
  }
  for (const auto& name : kProducedErrors) {
    EXPECT_NE(core::find_reason(ReasonCategory::Error, name), nullptr) << name;
  }
  EXPECT_NE(core::find_reason(ReasonCategory::CompileFailed, core::reason::kCompileFailed), nullptr);
}

TEST(NamedReasons, EveryRowIsProducedSomewhere) {
  const Found passthrough = produced_passthrough_reasons();
  const Found not_stored = produced_not_stored_reasons();
  for (const core::Reason& r : core::all_reasons()) {
    const std::string name(r.name);
    switch (r.category) {
      case ReasonCategory::Passthrough:
        EXPECT_TRUE(passthrough.count(name)) << name << ": a row no source produces";
        break;
      case ReasonCategory::NotStored:
        EXPECT_TRUE(not_stored.count(name)) << name << ": a row no source produces";
        break;
      case ReasonCategory::Error:
        EXPECT_TRUE(kProducedErrors.count(name)) << name << ": a row no source produces";
        break;
      case ReasonCategory::CompileFailed:
        EXPECT_EQ(r.name, core::reason::kCompileFailed);
        break;
    }
  }
}

TEST(NamedReasons, CountedUnderTheNamesStatsShow) {
  std::map<std::string, std::uint64_t> counts;
  core::count_reason(counts, ReasonCategory::Passthrough, "link");
  core::count_reason(counts, ReasonCategory::Error, "storage-write");
  core::count_reason(counts, ReasonCategory::NotStored, "incbin");
  core::count_reason(counts, ReasonCategory::CompileFailed, "compile-failed");
  const std::map<std::string, std::uint64_t> want = {
      {"passthrough", 1},         {"passthrough.link", 1},  {"errors", 1},
      {"error.storage-write", 1}, {"not_stored.incbin", 1}, {"compile_failed", 1},
  };
  EXPECT_EQ(counts, want);
}

TEST(NamedReasons, UnknownNamesAreExplainedAsSuch) {
  EXPECT_EQ(core::find_reason(ReasonCategory::Passthrough, "no-such-reason"), nullptr);
  EXPECT_NE(core::reason_sentence(ReasonCategory::Passthrough, "no-such-reason").find("reason table"),
            std::string_view::npos);
  // A name is looked up within its category only.
  EXPECT_EQ(core::find_reason(ReasonCategory::Error, "link"), nullptr);
}
