# Sourced by scripts/setup.sh and scripts/setup-tests.sh.
#   install_missing LABEL [APT-OPTION...] PACKAGE...   installs the packages not installed yet (one apt call)
# Nothing is done, apt-get update included, when every package is installed already.

install_missing() {
  local label=$1
  shift
  local options=() packages=() missing=() pkg
  for pkg in "$@"; do
    if [[ "$pkg" == -* ]]; then options+=("$pkg"); else packages+=("$pkg"); fi
  done
  for pkg in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if ((${#missing[@]} == 0)); then
    echo "$label: all ${#packages[@]} packages are already installed"
    return 0
  fi
  echo "$label: installing ${missing[*]}"
  local sudo=()
  if [[ "$(id -u)" != 0 ]]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update
  # env inside sudo: sudo drops the caller's environment.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${options[@]}" "${missing[@]}"
}
