#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "compiler/env_table.hpp"

using kache::compiler::EnvEffect;
namespace kc = kache::compiler;

TEST(EnvTable, NamesAreUniqueAndOnlyRefusedRowsHaveAReason) {
  std::set<std::string_view> seen;
  for (const auto& r : kc::env_rules()) {
    EXPECT_TRUE(seen.insert(r.name).second) << r.name;
    EXPECT_EQ(r.effect == EnvEffect::Refused, !r.reason.empty()) << r.name;
    if (r.effect == EnvEffect::Refused) {
      EXPECT_TRUE(r.reason.starts_with("env_")) << r.name;
    }
  }
}

TEST(EnvTable, KeyFieldsTellUnsetFromEmpty) {
  std::vector<std::pair<std::string, std::string>> unset, empty;
  kc::add_env_key_fields({"HOME=/x"}, true, unset);
  kc::add_env_key_fields({"PTXAS_FLAGS="}, true, empty);
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
  kc::add_env_key_fields({}, true, nvcc);
  kc::add_env_key_fields({}, false, host);
  EXPECT_LT(host.size(), nvcc.size());
  for (const auto& [name, value] : host) EXPECT_NE(name, "env:PTXAS_FLAGS");
  EXPECT_TRUE(kc::env_refusal({"DUMP_KNOBS_TO_FILE=x"}, true));
  EXPECT_FALSE(kc::env_refusal({"DUMP_KNOBS_TO_FILE=x"}, false));
}

TEST(EnvTable, RefusalWhenSetEvenEmpty) {
  EXPECT_FALSE(kc::env_refusal({"PATH=/bin", "PTXAS_FLAGS=-O0"}, true));
  auto r = kc::env_refusal({"DEPENDENCIES_OUTPUT="}, true);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, "env_depfile");
  EXPECT_EQ(r->variable, "DEPENDENCIES_OUTPUT");
}

TEST(EnvTable, ProbeEnvironmentKeepsOnlyWhatTheProbeMemoIsKeyedBy) {
  auto env = kc::probe_environment({"PATH=/bin", "PTXAS_FLAGS=-O0", "CPATH=/i", "INCLUDES=-I/j", "HOME=/h",
                                    "NVCC_PREPEND_FLAGS=-O0", "GCC_EXEC_PREFIX=/g/"});
  EXPECT_EQ(env, (std::vector<std::string>{"PATH=/bin", "INCLUDES=-I/j", "HOME=/h", "GCC_EXEC_PREFIX=/g/"}));
  auto probe = kc::probe_variables(true);
  for (std::string_view v : {"PATH", "NVCC_CCBIN", "INCLUDES", "SYSTEM_INCLUDES", "GCC_EXEC_PREFIX", "TOP"}) {
    EXPECT_NE(std::find(probe.begin(), probe.end(), v), probe.end()) << v;
  }
}
