// Fuzzes the nvcc planner with arbitrary command lines and NVCC_PREPEND/APPEND_FLAGS.
// Input: "ARGS\x1ePREPEND\x1eAPPEND\x1eALLOWLIST", ARGS NUL-separated, ALLOWLIST comma-separated;
// missing sections are empty.
// Properties of a cacheable plan, checked by an independent walk over the effective command line
// with the flag table itself: no argument matches an entry the table refuses, no forwarded option
// (-Xcompiler, -Xptxas) holds a refused flag, no GPU architecture value is "native", no unknown flag
// resolves to the build machine (-march=native), no response file; the source and the object it
// names come from the command line and are not empty.
#include <algorithm>
#include <string>
#include <variant>

#include "compiler/nvcc/flag_table.hpp"
#include "compiler/nvcc/plan.hpp"
#include "fuzz_check.hpp"

using namespace kache::compiler::nvcc;

namespace {

// Whether a word of an -arch/-code/-gencode value is `word` (or, with prefix, starts with it).
bool gpu_word(std::string_view v, std::string_view word, bool prefix) {
  for (std::string_view tok : split_option_list(v)) {
    // "arch=compute_90,code=[native]" splits on '=' and brackets too.
    std::size_t i = 0;
    while (i <= tok.size()) {
      std::size_t j = tok.find_first_of("=[]", i);
      if (j == std::string_view::npos) j = tok.size();
      const std::string_view w = tok.substr(i, j - i);
      if (prefix ? w.starts_with(word) : w == word) return true;
      i = j + 1;
    }
  }
  return false;
}

bool gpu_native(std::string_view v) { return gpu_word(v, "native", false); }

// Whether `value` is an argument or the value part of one ("-o=x", "-ox" for attached forms).
bool from_command_line(const std::vector<std::string>& args, const std::string& value) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) { return a.ends_with(value); });
}

void check_cacheable(const CompilePlan& p, const std::vector<std::string>& args, const PlanOptions& opt) {
  const auto& table = flag_table();
  std::vector<std::string> all = split_env_flags(opt.prepend_flags);
  all.insert(all.end(), args.begin(), args.end());
  for (auto& a : split_env_flags(opt.append_flags)) all.push_back(a);

  for (std::size_t i = 0; i < all.size(); ++i) {
    const std::string& a = all[i];
    KACHE_FUZZ_CHECK(!a.starts_with('@'));
    if (a.empty() || a[0] != '-') continue;  // an input file
    auto m = find_flag(table, a);
    if (!m) {
      KACHE_FUZZ_CHECK(!is_machine_native(a));
      continue;
    }
    KACHE_FUZZ_CHECK(m->spec->effect != Effect::Refuse);
    // -dlto never caches (NVVM IR); a device output never comes with -c / -dc.
    KACHE_FUZZ_CHECK(m->spec->effect != Effect::LinkTimeOpt);
    if (p.device_output != DeviceOutput::None) {
      KACHE_FUZZ_CHECK(m->spec->effect != Effect::Compile && m->spec->effect != Effect::DeviceCompile);
    }
    std::optional<std::string_view> value = m->inline_value;
    // A built-in valued option written apart takes the next argument, whatever it looks like.
    if (m->spec->builtin && m->spec->arity == Arity::Value && m->form == kSeparate) {
      KACHE_FUZZ_CHECK(i + 1 < all.size());
      value = all[++i];
    }
    if (!value) continue;
    switch (m->spec->effect) {
      case Effect::GpuArch:
        KACHE_FUZZ_CHECK(!gpu_native(*value));
        KACHE_FUZZ_CHECK(!gpu_word(*value, "lto_", true));  // NVVM IR (device-ir)
        break;
      case Effect::HostOptions:
        // The allow-list admits host flags the gcc table does not know, never one it refuses.
        KACHE_FUZZ_CHECK(!check_host_options(*value, nullptr, &opt.extra_allowlist));
        break;
      case Effect::PtxasOptions:
        KACHE_FUZZ_CHECK(!check_ptxas_options(*value));
        break;
      case Effect::Rdc:
        KACHE_FUZZ_CHECK(*value == "true" || *value == "false");
        break;
      default:
        break;
    }
  }
  KACHE_FUZZ_CHECK(!p.source.empty() && !p.output.empty());
  KACHE_FUZZ_CHECK(std::find(args.begin(), args.end(), p.source) != args.end());
  KACHE_FUZZ_CHECK(from_command_line(args, p.output));
  if (p.depfile != Depfile::None) KACHE_FUZZ_CHECK(from_command_line(args, p.depfile_path));
  KACHE_FUZZ_CHECK(p.keyed_args.size() == p.args.size() && p.args == args);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto sections = kache::fuzz::split(kache::fuzz::as_view(data, size), '\x1e');
  std::vector<std::string> args = kache::fuzz::split(sections[0], '\0');
  if (!args.empty() && args.back().empty()) args.pop_back();  // a trailing NUL ends the last argument
  PlanOptions opt;
  if (sections.size() > 1) opt.prepend_flags = sections[1];
  if (sections.size() > 2) opt.append_flags = sections[2];
  if (sections.size() > 3) {
    for (auto& e : kache::fuzz::split(sections[3], ',')) opt.extra_allowlist.push_back(e);
  }
  const Plan plan_result = plan(args, opt);
  if (const auto* p = std::get_if<CompilePlan>(&plan_result)) {
    check_cacheable(*p, args, opt);
  } else {
    KACHE_FUZZ_CHECK(!std::get<Passthrough>(plan_result).reason.empty());
  }
  // Deterministic: the same command line always gets the same decision.
  const Plan again = plan(args, opt);
  KACHE_FUZZ_CHECK(again.index() == plan_result.index());
  return 0;
}
