#pragma once
// What this kache was built with, as `kache --version` lists it (as ccache and sccache do): the remote
// backends, the TLS, compression and resolver libraries and their versions, and whether the program is
// linked statically.
#include <string>

namespace kache::core {

// Lines of "name: value", each ending in '\n'.
std::string build_features();

}  // namespace kache::core
