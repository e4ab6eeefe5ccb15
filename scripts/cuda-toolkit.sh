# Sourced by scripts/demo.sh: finds nvcc where NVIDIA's installers leave it, which is often not on PATH.
#   find_nvcc   prints the path of the nvcc to use and returns 0, or returns 1 when there is none.
# Order: nvcc on PATH, then $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, /usr/local/cuda-*/bin
# (newest version first), /opt/cuda/bin. KACHE_CUDA_SEARCH (directories separated by ':') replaces that
# list after PATH; the tests set it, since the machine that runs them has /usr/local/cuda. kache's own
# masquerade link named nvcc (the README puts /usr/lib/kache first on PATH) is never taken for the toolkit.

cuda_search_dirs() {
  if [[ -n "${KACHE_CUDA_SEARCH+set}" ]]; then
    tr ':' '\n' <<<"$KACHE_CUDA_SEARCH"
    return
  fi
  if [[ -n "${CUDA_HOME:-}" ]]; then echo "$CUDA_HOME/bin"; fi
  if [[ -n "${CUDA_PATH:-}" ]]; then echo "$CUDA_PATH/bin"; fi
  echo /usr/local/cuda/bin
  local versioned=(/usr/local/cuda-*/bin)
  if [[ -d "${versioned[0]}" ]]; then printf '%s\n' "${versioned[@]}" | sort -rV; fi
  echo /opt/cuda/bin
}

# Whether $1 is NVIDIA's nvcc and not kache's masquerade link (/usr/lib/kache/nvcc -> kache), which the
# README puts first on PATH: a link to kache would have CMake run kache as the toolkit.
real_nvcc() {
  [[ -x "$1" && -f "$1" && "$(basename "$(readlink -f "$1")")" != kache ]]
}

find_nvcc() {
  local dir candidate
  while IFS= read -r dir; do
    candidate="$dir/nvcc"
    if [[ -n "$dir" ]] && real_nvcc "$candidate"; then
      echo "$candidate"
      return 0
    fi
  done < <(tr ':' '\n' <<<"${PATH:-}"; cuda_search_dirs)
  return 1
}
