# bash completion for kache: its own options and subcommands, and after a compiler's name
# (kache g++ ...) whatever completes for that compiler.
_kache() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local options="-s --show-stats --json -z --zero-stats -C --clear -M --max-size --show-config --reasons
    -V --version -h --help doctor explain report"
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$options nvcc gcc g++ cc c++ clang clang++" -- "$cur")
    return
  fi
  case ${COMP_WORDS[1]} in
    doctor) mapfile -t COMPREPLY < <(compgen -W "--json" -- "$cur") ;;
    explain) mapfile -t COMPREPLY < <(compgen -W "--last --" -- "$cur") ;;
    report)
      case ${COMP_WORDS[COMP_CWORD - 1]} in
        --html | --trace) mapfile -t COMPREPLY < <(compgen -f -- "$cur") ;;
        *) mapfile -t COMPREPLY < <(compgen -W "--build --since --all --json --markdown --html --trace --mark --label" -- "$cur") ;;
      esac
      ;;
    -M | --max-size) ;;
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
