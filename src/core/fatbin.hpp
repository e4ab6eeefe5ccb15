#pragma once
// nvcc's fat binaries (the .nv_fatbin section of a host object, a -fatbin output): the device code a
// scan for paths and times must see. nvcc compresses entries (--compress-mode; measured, CUDA 13.0:
// "size" compresses every entry, with zstd), which hides the -lineinfo/-G file names and device
// __FILE__ strings from a byte scan of the object (issue 35).
#include <functional>
#include <string_view>

namespace kache::core {

// Hands each compressed entry of every fat binary container in bytes (found by its magic anywhere, so
// .nv_fatbin, a relocatable fatbin and a whole -fatbin file alike) to `code`, decompressed, one at a
// time (uncompressed entries lie in the bytes as they are). False when a container or an entry cannot
// be read (truncated, another compression, larger than 1 GiB): what it holds cannot be proven free of
// a path.
bool read_compressed_device_code(std::string_view bytes, const std::function<void(std::string_view)>& code);

}  // namespace kache::core
