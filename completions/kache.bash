# bash completion for kache: its own options and subcommands, and after a compiler's name
# (kache g++ ...) whatever completes for that compiler.
_kache() {
  local cur=${COMP_WORDS[COMP_CWORD]}
  local options="-s --show-stats --json -z --zero-stats -C --clear -M --max-size --show-config --reasons
    -V --version -h --help doctor explain"
  if ((COMP_CWORD == 1)); then
    mapfile -t COMPREPLY < <(compgen -W "$options nvcc gcc g++ cc c++ clang clang++" -- "$cur")
    return
  fi
  case ${COMP_WORDS[1]} in
    doctor) mapfile -t COMPREPLY < <(compgen -W "--json" -- "$cur") ;;
    explain) mapfile -t COMPREPLY < <(compgen -W "--last --" -- "$cur") ;;
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
