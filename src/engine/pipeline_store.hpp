#pragma once
// What the pipeline asks of its storage, and no more: the seam through which the unit tests
// (tests/unit/test_pipeline.cpp) hand it memory instead of the stores of the configuration.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "core/config.hpp"
#include "storage/layered.hpp"
#include "storage/open.hpp"
#include "storage/storage.hpp"

namespace kache::engine {
// app/ speaks core's vocabulary (Config, Invocation, reasons, entries...) unqualified.
using namespace kache::core;

class PipelineStore {
 public:
  virtual ~PipelineStore() = default;
  // As storage::LayeredStorage's functions of the same names (storage/layered.hpp).
  virtual storage::StorageLookup get_record(std::string_view key) = 0;
  virtual storage::StorageStatus put_record(std::string_view key, std::string_view value) = 0;
  virtual storage::StorageStatus put_local_record(std::string_view key, std::string_view value) = 0;
  virtual storage::StorageResult<std::optional<storage::Parts>> get_parts(std::string_view key,
                                                                          const std::string& body_dir) = 0;
  virtual storage::StorageStatus put_parts(std::string_view key, std::string_view head, std::string_view body) = 0;
  virtual storage::StorageStatus put_local_parts(std::string_view key, std::string_view head, std::string_view body) = 0;
  virtual void remove(std::string_view key) = 0;
  // The `kache explain` record of an entry just stored, in the local store; returns the path written.
  virtual std::string put_explain_record(std::string_view key, std::string_view text) = 0;
  virtual int corrupt_found() const = 0;
  virtual void add_counts(std::map<std::string, std::uint64_t>& counts) const = 0;
};

// The stores the configuration names: the local store, then the remotes.
class LayeredPipelineStore final : public PipelineStore {
 public:
  explicit LayeredPipelineStore(const Config& cfg) : layered_(storage::open_storage(cfg)) {}
  explicit LayeredPipelineStore(storage::LayeredStorage layered) : layered_(std::move(layered)) {}

  storage::StorageLookup get_record(std::string_view key) override { return layered_.get_record(key); }
  storage::StorageStatus put_record(std::string_view key, std::string_view value) override {
    return layered_.put_record(key, value);
  }
  storage::StorageStatus put_local_record(std::string_view key, std::string_view value) override {
    return layered_.put_local_record(key, value);
  }
  storage::StorageResult<std::optional<storage::Parts>> get_parts(std::string_view key,
                                                                  const std::string& body_dir) override {
    return layered_.get_parts(key, body_dir);
  }
  storage::StorageStatus put_parts(std::string_view key, std::string_view head, std::string_view body) override {
    return layered_.put_parts(key, head, body);
  }
  storage::StorageStatus put_local_parts(std::string_view key, std::string_view head, std::string_view body) override {
    return layered_.put_local_parts(key, head, body);
  }
  void remove(std::string_view key) override { layered_.remove(key); }
  std::string put_explain_record(std::string_view key, std::string_view text) override {
    return layered_.local().put_explain_record(key, text);
  }
  int corrupt_found() const override { return layered_.corrupt_found(); }
  void add_counts(std::map<std::string, std::uint64_t>& counts) const override { layered_.add_counts(counts); }

 private:
  storage::LayeredStorage layered_;
};

}  // namespace kache::engine
