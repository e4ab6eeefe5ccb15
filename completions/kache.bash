# bash completion for kache, generated from kache's option table (src/commands/options.cpp)
# by `kache --print-completion bash`: change the table, then regenerate this file (tests/integration/
# test_house.py fails while the two differ).
_kache_command_at() {
  if declare -F _command_offset >/dev/null; then
    _command_offset "$1"
  else
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
  fi
}
_kache() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} command=${COMP_WORDS[1]}
  local options="-s --show-stats --json -z --zero-stats -C --clear -M --max-size -p --show-config -k --get-config -o --set-config -c --cleanup --evict-older-than -X --recompress -x --show-compression -v --verbose --print-stats --reasons -V --version -h --help"
  local subcommands="doctor explain report worker"
  local compilers="nvcc gcc g++ cc c++ clang clang++ hipcc"
  local words
  case $command in
    doctor) words="--json --nvcc -ccbin --compiler-bindir --ccbin --hipcc --probe-timeout -h --help" ;;
    explain) words="--json --last --closure -- -h --help" ;;
    report) words="-h --help --build --since --all --since-mark --json --markdown --html --trace --fail-under --mark --label" ;;
    worker) words="-h --help --server --instance --ca-file --toolchain-id --nvcc --compiler --property --work-dir --bot-id --max-actions" ;;
    *) words=$options ;;
  esac
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$options $subcommands $compilers" -- "$cur")
    return
  fi
  if [[ $command != -* && " $subcommands " != *" $command "* ]]; then
    _kache_command_at 1
    return
  fi
  if [[ $command == explain ]]; then
    local i
    for ((i = 2; i < COMP_CWORD; i++)); do
      if [[ ${COMP_WORDS[i]} == -- ]]; then
        _kache_command_at $((i + 1))
        return
      fi
    done
  fi
  case "$command $prev" in
    "doctor --nvcc" |\
    "doctor -ccbin" |\
    "doctor --compiler-bindir" |\
    "doctor --ccbin" |\
    "doctor --hipcc" |\
    "report --html" |\
    "report --trace" |\
    "worker --ca-file" |\
    "worker --nvcc" |\
    "worker --compiler" |\
    "worker --work-dir") mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
    -*" -M" |\
    -*" --max-size" |\
    -*" -k" |\
    -*" --get-config" |\
    -*" -o" |\
    -*" --set-config" |\
    -*" --evict-older-than" |\
    -*" -X" |\
    -*" --recompress" |\
    "doctor --probe-timeout" |\
    "report --build" |\
    "report --since" |\
    "report --fail-under" |\
    "report --label" |\
    "worker --server" |\
    "worker --instance" |\
    "worker --toolchain-id" |\
    "worker --property" |\
    "worker --bot-id" |\
    "worker --max-actions") ;;
    *) mapfile -t COMPREPLY < <(compgen -W "$words" -- "$cur") ;;
  esac
}
complete -F _kache kache
