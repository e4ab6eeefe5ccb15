#include "core/invocation.hpp"

namespace kache::core {

std::vector<std::string> Invocation::argv() const {
  std::vector<std::string> v;
  v.reserve(args.size() + 1);
  v.push_back(compiler_arg);
  v.insert(v.end(), args.begin(), args.end());
  return v;
}

}  // namespace kache::core
