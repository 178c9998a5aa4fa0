# bash completion for sprofil(1): subcommands, their options and option values.
# Installed as share/bash-completion/completions/sprofil; plain bash (no bash-completion helpers).

# Completions, one a line (file names with spaces stay whole).
_sprofil_reply() {
  mapfile -t COMPREPLY < <(compgen "$@")
}

_sprofil() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=""
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
  local sub="" i
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      record | report | merge | diff | serve)
        sub=${COMP_WORDS[i]}
        break
        ;;
    esac
  done
  COMPREPLY=()
  if [[ -z $sub ]]; then
    _sprofil_reply -W "record report merge diff fetch gperf top list serve -h --help" -- "$cur"
    return 0
  fi
  case $sub in
    record)
      # The program (after the options or "--"), then its own arguments: files.
      local j program=0 dashdash=0
      for ((j = i + 1; j < COMP_CWORD; j++)); do
        if ((dashdash)); then
          program=1
          break
        fi
        case ${COMP_WORDS[j]} in
          --) dashdash=1 ;;
          -F | --frequency | --clock | --scratch | --checkpoint | -o | --output) ((j++)) ;;
          -*) ;;
          *)
            program=1
            break
            ;;
        esac
      done
      if ((program)); then
        _sprofil_reply -f -- "$cur"
        return 0
      fi
      if ((dashdash)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
        return 0
      fi
      case $prev in
        # auto, then the rows of SPROF_CLOCKS (src/format/sprof_format.h) in order, as
        # `sprofil record --help` lists them (test_completion.sh checks).
        --clock) _sprofil_reply -W "auto cpu itimer perf wall sampler" -- "$cur" ;;
        -F | --frequency | --checkpoint) ;;
        -o | --output) _sprofil_reply -f -- "$cur" ;;
        --scratch) _sprofil_reply -d -- "$cur" ;;
        *)
          if [[ $cur == -* ]]; then
            _sprofil_reply -W "-F --frequency --clock --agentless --agent --live -q --quiet -N --no-buildid-cache --scratch --checkpoint -o --output -h --help --" -- "$cur"
          else
            mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
          fi
          ;;
      esac
      ;;
    report)
      case $prev in
        --by) _sprofil_reply -W "function line object address" -- "$cur" ;;
        --format) _sprofil_reply -W "text json csv folded pprof gmon html" -- "$cur" ;;
        --limit | --min-percent | --object | --pid | --comm) ;;
        -o | --output) _sprofil_reply -f -- "$cur" ;;
        *)
          if [[ $cur == -* ]]; then
            _sprofil_reply -W "--by --inline --full-names --user-only --limit --min-percent --object
              --pid --comm --format -o --output -h --help" -- "$cur"
          else
            _sprofil_reply -f -- "$cur"
          fi
          ;;
      esac
      ;;
    diff)
      case $prev in
        --by) _sprofil_reply -W "function line object" -- "$cur" ;;
        --format) _sprofil_reply -W "text json csv html" -- "$cur" ;;
        --alpha | --limit) ;;
        -o | --output) _sprofil_reply -f -- "$cur" ;;
        *)
          if [[ $cur == -* ]]; then
            _sprofil_reply -W "--by --format --alpha --force --limit -o --output -h --help" -- "$cur"
          else
            _sprofil_reply -f -- "$cur"
          fi
          ;;
      esac
      ;;
    serve)
      case $prev in
        --listen) ;;
        --token-file) _sprofil_reply -f -- "$cur" ;;
        *)
          if [[ $cur == -* ]]; then
            _sprofil_reply -W "--listen --token-file -q --quiet -h --help" -- "$cur"
          fi
          ;;
      esac
      ;;
    merge)
      if [[ $cur == -* ]]; then
        _sprofil_reply -W "-o --output --force -h --help" -- "$cur"
      else
        _sprofil_reply -f -- "$cur"
      fi
      ;;
  esac
  return 0
}

complete -o filenames -F _sprofil sprofil
