# bash completion for kache: its own options and subcommands, and after a compiler's name
# (kache g++ ...) whatever completes for that compiler. The words below are `kache --help`'s,
# `kache doctor --help`'s and `kache explain --help`'s options and install.cmake's compiler names
# (tests/integration/test_house.py compares them both ways).
_kache() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local options="-s --show-stats --json -z --zero-stats -C --clear -M --max-size -p --show-config
    -k --get-config -o --set-config -c --cleanup --evict-older-than -X --recompress -x --show-compression
    -v --verbose --print-stats --reasons -V --version -h --help"
  local subcommands="doctor explain report"
  local compilers="nvcc gcc g++ cc c++ clang clang++ hipcc"
  local doctor_options="--json --nvcc -ccbin --hipcc --probe-timeout -h --help"
  local explain_options="--json --last --closure -- -h --help"
  local report_options="--build --since --all --json --markdown --html --trace --mark --label -h --help"
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$options $subcommands $compilers" -- "$cur")
    return
  fi
  case ${COMP_WORDS[1]} in
    doctor) mapfile -t COMPREPLY < <(compgen -W "$doctor_options" -- "$cur") ;;
    explain) mapfile -t COMPREPLY < <(compgen -W "$explain_options" -- "$cur") ;;
    report)
      case ${COMP_WORDS[COMP_CWORD - 1]} in
        --html | --trace) mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
        *) mapfile -t COMPREPLY < <(compgen -W "$report_options" -- "$cur") ;;
      esac
      ;;
    -M | --max-size | -k | --get-config | -o | --set-config | --evict-older-than | -X | --recompress) ;;
    -*) mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur") ;;
    *)
      if declare -F _command_offset >/dev/null; then
        _command_offset 1
      else
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      fi
      ;;
  esac
}
complete -F _kache kache
