// Fuzzes the gcc/clang planner with arbitrary command lines and [cc] extra_allowlist_flags.
// Input: "ARGS\x1eALLOWLIST", ARGS NUL-separated, ALLOWLIST comma-separated; a missing section is empty.
// Properties of a cacheable plan, checked by an independent walk over the command line with the flag
// table itself: -c is there, no argument matches an entry the table refuses, no unknown flag outside
// the allow-list, anything resolved from the build machine (-march=native) listed in the plan's
// machine_native (the adapter keys its expansion), no response file or stdin;
// the source comes from the command line and has a language kache caches. Every position the adapter
// later rewrites or keys (the -o/-MF values a miss redirects, the path values it keys by root, the
// -MD/-MT arguments the closure command drops) lies inside the command line and holds what it says,
// and the command line with -o and -MF redirected the way a miss does plans to the same compile with
// the redirected paths.
#include <algorithm>
#include <string>
#include <variant>

#include "compiler/common.hpp"
#include "compiler/gcc/flag_table.hpp"
#include "compiler/gcc/host_rules.hpp"
#include "compiler/gcc/plan.hpp"
#include "fuzz_check.hpp"

using namespace kache::compiler::gcc;

namespace {

void check_walk(const std::vector<std::string>& args, const std::vector<std::string>& allowlist,
                const CompilePlan& plan) {
  bool compile = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    KACHE_FUZZ_CHECK(!a.starts_with('@') && a != "-");
    if (a.empty() || a[0] != '-') continue;  // an input file
    if (is_machine_native(a)) {
      KACHE_FUZZ_CHECK(std::find(plan.machine_native.begin(), plan.machine_native.end(), a) != plan.machine_native.end());
      continue;
    }
    auto m = find_flag(a);
    if (!m) {
      KACHE_FUZZ_CHECK(kache::compiler::allowlist_names(allowlist, a));
      continue;
    }
    KACHE_FUZZ_CHECK(m->flag->effect != Effect::Refuse);
    if (m->flag->effect == Effect::Compile) compile = true;
    if ((m->flag->shape == Shape::Value || m->flag->shape == Shape::Separate) && !m->attached) {
      KACHE_FUZZ_CHECK(i + 1 < args.size());
      ++i;  // the value, whatever it looks like
    }
  }
  KACHE_FUZZ_CHECK(compile);
}

// The value an ArgRef points at, as replace_value in adapter.cpp reads it.
const std::string* value_at(const std::vector<std::string>& args, const CompilePlan::ArgRef& ref) {
  KACHE_FUZZ_CHECK(ref.index < args.size());
  if (ref.attached) return &args[ref.index];
  KACHE_FUZZ_CHECK(ref.index + 1 < args.size());
  return &args[ref.index + 1];
}

// The miss's rewrite (adapter.cpp replace_value).
void redirect(std::vector<std::string>& args, const CompilePlan::ArgRef& ref, const std::string& name,
              const std::string& value) {
  if (ref.attached) {
    args[ref.index] = name + value;
  } else {
    args[ref.index + 1] = value;
  }
}

void check_cacheable(const CompilePlan& p, const std::vector<std::string>& args,
                     const std::vector<std::string>& allowlist) {
  check_walk(args, allowlist, p);
  KACHE_FUZZ_CHECK(!p.source.empty() && !p.output.empty());
  KACHE_FUZZ_CHECK(std::find(args.begin(), args.end(), p.source) != args.end());
  KACHE_FUZZ_CHECK(p.language == "c" || p.language == "c++" || p.language == "assembler-with-cpp");
  KACHE_FUZZ_CHECK(p.keyed_args.size() == args.size());
  KACHE_FUZZ_CHECK(std::count(p.keyed_args.begin(), p.keyed_args.end(), "<source>") >= 1);
  for (const auto& pv : p.path_values) {
    KACHE_FUZZ_CHECK(pv.index < p.keyed_args.size() && pv.offset <= p.keyed_args[pv.index].size());
  }
  KACHE_FUZZ_CHECK(p.output_implied == !p.output_arg.has_value());
  if (p.output_arg) {
    const std::string* v = value_at(args, *p.output_arg);
    KACHE_FUZZ_CHECK(v->ends_with(p.output));
    if (p.output_arg->attached) KACHE_FUZZ_CHECK(args[p.output_arg->index].starts_with("-o"));
    if (!p.output_arg->attached) KACHE_FUZZ_CHECK(args[p.output_arg->index] == "-o");
  }
  if (p.depfile_arg) {
    KACHE_FUZZ_CHECK(p.depfile != Depfile::None);
    KACHE_FUZZ_CHECK(value_at(args, *p.depfile_arg)->ends_with(p.depfile_path));
  }
  for (const auto& ref : p.dep_target_args) value_at(args, ref);
  for (std::size_t i : p.dep_flag_args) KACHE_FUZZ_CHECK(i < args.size() && args[i].starts_with("-M"));
  if (p.depfile != Depfile::None) KACHE_FUZZ_CHECK(!p.depfile_path.empty());

  // A miss redirects -o and -MF to the scratch directory: the same compile, writing there.
  std::vector<std::string> rewritten = args;
  const std::string object = "/kache-scratch/o.o", depfile = "/kache-scratch/d.d";
  if (p.output_arg) redirect(rewritten, *p.output_arg, "-o", object);
  if (p.depfile_arg) redirect(rewritten, *p.depfile_arg, "-MF", depfile);
  const Plan again = plan(rewritten, allowlist);
  const auto* q = std::get_if<CompilePlan>(&again);
  KACHE_FUZZ_CHECK(q != nullptr);
  KACHE_FUZZ_CHECK(q->source == p.source && q->language == p.language && q->depfile == p.depfile);
  if (p.output_arg) KACHE_FUZZ_CHECK(q->output == object);
  if (p.depfile_arg) KACHE_FUZZ_CHECK(q->depfile_path == depfile);
  KACHE_FUZZ_CHECK(q->include_dirs == p.include_dirs && q->forced_includes == p.forced_includes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto sections = kache::fuzz::split(kache::fuzz::as_view(data, size), '\x1e');
  std::vector<std::string> args = kache::fuzz::split(sections[0], '\0');
  if (!args.empty() && args.back().empty()) args.pop_back();  // a trailing NUL ends the last argument
  std::vector<std::string> allowlist;
  if (sections.size() > 1) {
    for (auto& e : kache::fuzz::split(sections[1], ',')) allowlist.push_back(e);
  }
  const Plan plan_result = plan(args, allowlist);
  if (const auto* p = std::get_if<CompilePlan>(&plan_result)) {
    check_cacheable(*p, args, allowlist);
  } else {
    KACHE_FUZZ_CHECK(!std::get<kache::compiler::Passthrough>(plan_result).reason.empty());
  }
  // Deterministic: the same command line always gets the same decision.
  const Plan again = plan(args, allowlist);
  KACHE_FUZZ_CHECK(again.index() == plan_result.index());
  (void)is_gcc_driver(args.empty() ? std::string() : args[0]);
  (void)language_of(args.empty() ? std::string() : args[0]);
  return 0;
}
