// Fuzzes the reading of `nvcc --dryrun` (compiler/nvcc/stages.hpp), which the stage cache replays
// without a shell.
// Input: the dry run's text.
// Properties, when it reads as a plan:
//  - every command has a program word, and a dependency step names its file;
//  - each command's words, written back double-quoted (with $ ` " \ escaped) on a "#$ " line, read
//    back as the same words: quoting and expansion are consistent, so no word is split or joined.
#include <string>
#include <variant>

#include "compiler/nvcc/stages.hpp"
#include "fuzz_check.hpp"

using namespace kache;

namespace {

std::string quoted(const std::string& word) {
  std::string out = "\"";
  for (char c : word) {
    if (c == '$' || c == '`' || c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(fuzz::as_view(data, size));
  const auto parsed = compiler::nvcc::parse_dry_run(text, {"HOME_TOOLS=/opt/t"});
  const auto* plan = std::get_if<compiler::nvcc::StagePlan>(&parsed);
  if (plan == nullptr) return 0;
  for (const auto& stage : plan->stages) {
    using Kind = compiler::nvcc::Stage::Kind;
    if (stage.kind == Kind::filter_dependencies) {
      KACHE_FUZZ_CHECK(!stage.path.empty());
      continue;
    }
    KACHE_FUZZ_CHECK(!stage.words.empty());
    // A word holding a newline cannot come from one line; one holding a NUL cannot reach a process.
    std::string line = "#$";
    for (const auto& w : stage.words) {
      KACHE_FUZZ_CHECK(w.find('\n') == std::string::npos);
      line += " " + quoted(w);
    }
    const auto again = compiler::nvcc::parse_dry_run(line + "\n", {});
    const auto* replan = std::get_if<compiler::nvcc::StagePlan>(&again);
    KACHE_FUZZ_CHECK(replan != nullptr);
    KACHE_FUZZ_CHECK(replan->stages.size() == 1);
    KACHE_FUZZ_CHECK(replan->stages[0].words == stage.words);
  }
  return 0;
}
