# Sourced by scripts/demo.sh: finds nvcc where NVIDIA's installers leave it, which is often not on PATH.
#   find_nvcc   prints the path of the nvcc to use and returns 0, or returns 1 when there is none.
# Order: nvcc on PATH, then $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, /usr/local/cuda-*/bin
# (newest version first), /opt/cuda/bin. KACHE_CUDA_SEARCH (directories separated by ':') replaces that
# list after PATH; the tests set it, since the machine that runs them has /usr/local/cuda.

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

find_nvcc() {
  local dir
  if command -v nvcc 2>/dev/null; then return 0; fi
  while IFS= read -r dir; do
    if [[ -n "$dir" && -x "$dir/nvcc" && -f "$dir/nvcc" ]]; then
      echo "$dir/nvcc"
      return 0
    fi
  done < <(cuda_search_dirs)
  return 1
}
