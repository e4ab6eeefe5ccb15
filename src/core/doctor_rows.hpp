#pragma once
// The rows `kache doctor` prints: one fact each, ok, warn or fail, with (for warn and fail) one sentence
// saying what is wrong and what to change. Every room that knows facts supplies its own rows (the
// adapters in compiler/, the stores in storage/); commands/doctor.cpp adds the cache's and the
// configuration's and prints them.
#include <string>
#include <utility>
#include <vector>

namespace kache::core {

enum class DoctorStatus { ok, warn, fail };

struct DoctorRow {
  std::string section;  // "toolchain", "rocm", "driver", "cache", "config", "remote"
  std::string name;     // stable id, e.g. "host-compiler-bound"
  DoctorStatus status = DoctorStatus::ok;
  std::string value;    // the fact
  std::string message;  // warn/fail: one sentence saying what is wrong
  std::string fix;      // warn/fail: what to change
};

struct DoctorRows {
  std::vector<DoctorRow> rows;
  DoctorRow& add(std::string section, std::string name, DoctorStatus status, std::string value,
                 std::string message = "", std::string fix = "") {
    rows.push_back({std::move(section), std::move(name), status, std::move(value), std::move(message), std::move(fix)});
    return rows.back();
  }
};

}  // namespace kache::core
