// The seam between the commands and the compilers (compiler/adapter.hpp, compiler/registry.hpp):
// doctor and the worker reach the adapters only through it, iterating the families instead of naming
// adapters, so adding a compiler needs no edit in engine/ or commands/.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "compiler/registry.hpp"

namespace {

namespace compiler = kache::compiler;

TEST(CompilerSeam, FamiliesInDoctorsOrder) {
  std::vector<std::string> names;
  for (const auto& family : compiler::families()) names.push_back(family->name());
  EXPECT_EQ(names, (std::vector<std::string>{"gcc", "nvcc", "hipcc"}));
  for (const auto& name : names) {
    const auto adapter = compiler::family(name);
    ASSERT_NE(adapter, nullptr) << name;
    EXPECT_EQ(adapter->name(), name);
  }
  EXPECT_EQ(compiler::family("fortran"), nullptr);
}

// A family without a toolchain id of its own says so; a question no family knows has no answer.
TEST(CompilerSeam, WhatAFamilyDoesNotKnow) {
  const auto hipcc = compiler::family("hipcc");
  ASSERT_NE(hipcc, nullptr);
  EXPECT_THROW(hipcc->toolchain_id("/usr/bin/hipcc", {}), std::runtime_error);
  EXPECT_EQ(compiler::doctor_child_answer("--no-such-question"), std::nullopt);
  EXPECT_EQ(compiler::doctor_child_answer("--json"), std::nullopt);
}

// A section a family has no rows for adds none (gcc's rows are all toolchain rows).
TEST(CompilerSeam, SectionsWithoutRowsAddNone) {
  const auto gcc = compiler::family("gcc");
  ASSERT_NE(gcc, nullptr);
  kache::core::DoctorRows rows;
  compiler::DoctorQuery query;
  gcc->doctor_rows(rows, compiler::DoctorSection::machine, query);
  gcc->doctor_rows(rows, compiler::DoctorSection::config, query);
  EXPECT_TRUE(rows.rows.empty());
}

// That src/commands/ includes from compiler/ only the seam and the registry: tests/unit/test_floors.cpp.

}  // namespace
