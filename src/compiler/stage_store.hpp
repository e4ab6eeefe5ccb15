#pragma once
// Where a compiler's intermediate stages are kept between misses (nvcc's cicc and ptxas, one per
// architecture): the pipeline's stores behind a narrow seam, so that adapters never see storage.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kache::compiler {

class StageStore {
 public:
  virtual ~StageStore() = default;
  // The value stored under key; nullopt when there is none or it cannot be read (a stage miss).
  virtual std::optional<std::string> load(std::string_view key) = 0;
  // Stores value under key (local store, then the remotes); a failure costs only the store.
  virtual void save(std::string_view key, std::string_view value) = 0;
  // Adds n to a statistics counter ("stage_hits.ptx").
  virtual void count(const std::string& counter, std::uint64_t n = 1) = 0;
  // One line for `kache explain --last`: a stage reused or run.
  virtual void note(std::string line) = 0;
};

}  // namespace kache::compiler
