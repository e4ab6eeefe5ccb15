#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "compiler/env_table.hpp"

using kache::compiler::EnvEffect;
using kache::compiler::EnvReader;
using kache::compiler::EnvRoute;
namespace kc = kache::compiler;

namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Fields key_fields(const kache::util::Environment& env, EnvRoute route) {
  Fields out;
  kc::add_env_key_fields(env, route, out);
  return out;
}

std::string field(const Fields& fields, const std::string& name) {
  for (const auto& [k, v] : fields) {
    if (k == "env:" + name) return v;
  }
  return "absent";
}

bool probes(EnvRoute route, std::string_view name) {
  const auto vars = kc::probe_variables(route);
  return std::find(vars.begin(), vars.end(), name) != vars.end();
}

}  // namespace

TEST(EnvTable, OneRowPerNameAndReaderAndOnlyRefusedRowsHaveAReason) {
  std::set<std::pair<std::string_view, EnvReader>> seen;
  for (const auto& r : kc::env_rules()) {
    EXPECT_TRUE(seen.insert({r.name, r.reader}).second) << r.name;
    const bool refused = r.effect == EnvEffect::Refused || r.effect == EnvEffect::RefusedNonEmpty;
    EXPECT_EQ(refused, !r.reason.empty()) << r.name;
  }
}

TEST(EnvTable, HipRowsDecideOnTheHipRoutesOnly) {
  // ROCM_PATH: inert for a host compile (its probe runs without it), keyed and probed for HIP.
  EXPECT_EQ(field(key_fields({"ROCM_PATH=/r"}, EnvRoute::host), "ROCM_PATH"), "absent");
  EXPECT_FALSE(probes(EnvRoute::host, "ROCM_PATH"));
  for (EnvRoute route : {EnvRoute::clang_hip, EnvRoute::hipcc}) {
    EXPECT_EQ(field(key_fields({"ROCM_PATH=/r"}, route), "ROCM_PATH"), "=/r");
    EXPECT_TRUE(probes(route, "ROCM_PATH"));
    EXPECT_EQ(kc::find_env_rule("ROCM_PATH", route)->reader, EnvReader::hip);
    // Host rows still apply.
    EXPECT_EQ(field(key_fields({"CPATH=/i"}, route), "CPATH"), "=/i");
  }
  EXPECT_EQ(kc::find_env_rule("ROCM_PATH", EnvRoute::nvcc)->reader, EnvReader::host);
  // hipcc's and Perl's rows: hipcc only.
  EXPECT_EQ(field(key_fields({"HIP_PLATFORM=amd"}, EnvRoute::hipcc), "HIP_PLATFORM"), "=amd");
  EXPECT_EQ(field(key_fields({"HIP_PLATFORM=amd"}, EnvRoute::clang_hip), "HIP_PLATFORM"), "absent");
  EXPECT_EQ(field(key_fields({}, EnvRoute::nvcc), "HIP_PLATFORM"), "absent");
  EXPECT_TRUE(probes(EnvRoute::hipcc, "HIP_CLANG_PATH"));
  EXPECT_FALSE(probes(EnvRoute::clang_hip, "HIP_CLANG_PATH"));
  ASSERT_TRUE(kc::env_refusal({"PERL5LIB=/p"}, EnvRoute::hipcc));
  EXPECT_EQ(kc::env_refusal({"PERL5LIB=/p"}, EnvRoute::hipcc)->reason, "env_unmodeled");
  EXPECT_FALSE(kc::env_refusal({"PERL5LIB=/p"}, EnvRoute::clang_hip));
  EXPECT_FALSE(kc::env_refusal({"PERL5LIB=/p"}, EnvRoute::host));
  EXPECT_EQ(kc::env_refusal({"HCC_AMDGPU_TARGET="}, EnvRoute::hipcc)->reason, "offload-target-machine");
  EXPECT_EQ(kc::env_refusal({"LLD_REPRODUCE=r.tar"}, EnvRoute::clang_hip)->reason, "env_side_output");
}

TEST(EnvTable, RefusedNonEmptyRowsAreKeyedWhenEmpty) {
  auto r = kc::env_refusal({"HIPCC_COMPILE_FLAGS_APPEND=-O0"}, EnvRoute::hipcc);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, "env-flags-shell");
  EXPECT_EQ(r->variable, "HIPCC_COMPILE_FLAGS_APPEND");
  EXPECT_FALSE(kc::env_refusal({"HIPCC_COMPILE_FLAGS_APPEND="}, EnvRoute::hipcc));
  EXPECT_EQ(field(key_fields({"HIPCC_COMPILE_FLAGS_APPEND="}, EnvRoute::hipcc), "HIPCC_COMPILE_FLAGS_APPEND"), "=");
  EXPECT_EQ(field(key_fields({}, EnvRoute::hipcc), "HIPCC_COMPILE_FLAGS_APPEND"), "unset");
}

TEST(EnvTable, KeyFieldsTellUnsetFromEmpty) {
  std::vector<std::pair<std::string, std::string>> unset, empty;
  kc::add_env_key_fields({"HOME=/x"}, EnvRoute::nvcc, unset);
  kc::add_env_key_fields({"PTXAS_FLAGS="}, EnvRoute::nvcc, empty);
  ASSERT_EQ(unset.size(), empty.size());
  bool found = false;
  for (std::size_t i = 0; i < unset.size(); ++i) {
    if (unset[i].first != "env:PTXAS_FLAGS") continue;
    found = true;
    EXPECT_EQ(unset[i].second, "unset");
    EXPECT_EQ(empty[i].second, "=");
  }
  EXPECT_TRUE(found);
}

TEST(EnvTable, NvccOnlyRowsAreLeftOutForAHostCompiler) {
  std::vector<std::pair<std::string, std::string>> nvcc, host;
  kc::add_env_key_fields({}, EnvRoute::nvcc, nvcc);
  kc::add_env_key_fields({}, EnvRoute::host, host);
  EXPECT_LT(host.size(), nvcc.size());
  for (const auto& [name, value] : host) EXPECT_NE(name, "env:PTXAS_FLAGS");
  EXPECT_TRUE(kc::env_refusal({"DUMP_KNOBS_TO_FILE=x"}, EnvRoute::nvcc));
  EXPECT_FALSE(kc::env_refusal({"DUMP_KNOBS_TO_FILE=x"}, EnvRoute::host));
}

TEST(EnvTable, RefusalWhenSetEvenEmpty) {
  EXPECT_FALSE(kc::env_refusal({"PATH=/bin", "PTXAS_FLAGS=-O0"}, EnvRoute::nvcc));
  auto r = kc::env_refusal({"DEPENDENCIES_OUTPUT="}, EnvRoute::nvcc);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, "env_depfile");
  EXPECT_EQ(r->variable, "DEPENDENCIES_OUTPUT");
}

TEST(EnvTable, ProbeEnvironmentKeepsOnlyWhatTheProbeMemoIsKeyedBy) {
  auto env = kc::probe_environment({"PATH=/bin", "PTXAS_FLAGS=-O0", "CPATH=/i", "INCLUDES=-I/j", "HOME=/h",
                                    "NVCC_PREPEND_FLAGS=-O0", "GCC_EXEC_PREFIX=/g/"});
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "INCLUDES=-I/j", "HOME=/h", "GCC_EXEC_PREFIX=/g/"}));
  auto probe = kc::probe_variables(EnvRoute::nvcc);
  for (std::string_view v : {"PATH", "NVCC_CCBIN", "INCLUDES", "SYSTEM_INCLUDES", "GCC_EXEC_PREFIX", "TOP"}) {
    EXPECT_NE(std::find(probe.begin(), probe.end(), v), probe.end()) << v;
  }
}
