#pragma once
// Wall-clock time and the file-time granularity rule of the spec: a file whose timestamp lies within
// one granule before a moment may have been modified after that moment.
#include <cstdint>
#include <string>

namespace kache::util {

std::int64_t now_ns();  // CLOCK_REALTIME, nanoseconds since the epoch

// How far a file time on the filesystem holding `path` can trail the clock: the kernel's coarse clock
// tick on Linux (file times come from it), 2 s on filesystems that keep whole/even seconds
// (FAT, exFAT, HFS+), 1 ms on macOS and Windows, 20 ms elsewhere.
std::int64_t file_time_margin_ns(const std::string& path);

}  // namespace kache::util
