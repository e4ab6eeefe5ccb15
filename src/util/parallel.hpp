#pragma once
// Splitting independent per-item work (stat calls, file hashing) over a few threads.
#include <cstddef>
#include <functional>

namespace kache::util {

// How many contiguous slices `count` items make: at most max_threads and the number of cores, and
// none smaller than min_per_slice items (below that a thread costs more than it saves); at least 1.
std::size_t slice_count(std::size_t count, std::size_t max_threads, std::size_t min_per_slice);

// Calls fn(slice, begin, end) for each of `slices` contiguous slices of [0, count): slice 0 on the
// calling thread, the others on threads of their own; a slice whose thread cannot start (resource
// limits) runs on the calling thread instead. Returns when all are done.
void for_each_slice(std::size_t count, std::size_t slices,
                    const std::function<void(std::size_t slice, std::size_t begin, std::size_t end)>& fn);

}  // namespace kache::util
