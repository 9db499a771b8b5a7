"""``kubectl preempt-preview completion bash|zsh``: completion scripts for ``kubectl-preempt_preview`` run
directly, in the shape of the scripts ``kubectl completion`` prints: the shell asks the command itself
(``kubectl-preempt_preview __complete WORDS...``, Cobra's protocol, answered by ``kubectl_plugin.completion``)
and honours the directive (no space, no file completion, files of some extensions, directories).

Through kubectl (``kubectl preempt-preview <TAB>``), kubectl 1.26 and later run ``kubectl_complete-preempt_preview``
instead, with kubectl's own completion script; these scripts are not needed for that.
"""

from __future__ import annotations

BASH = r"""# bash completion for kubectl-preempt_preview                    -*- shell-script -*-
#
# Load it in this shell:    source <(kubectl preempt-preview completion bash)
# or in every new shell:    kubectl preempt-preview completion bash \
#                               > ~/.local/share/bash-completion/completions/kubectl-preempt_preview
#
# It completes kubectl-preempt_preview run directly. For "kubectl preempt-preview", kubectl 1.26 or later
# (with "source <(kubectl completion bash)") asks kubectl_complete-preempt_preview, which must be on PATH.

__kubectl_preempt_preview_complete() {
    local cur words cword
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref -n =: cur words cword   # bash-completion: --flag=value and a:b stay whole
    else
        # Without bash-completion: the line up to the cursor, split on blanks only.
        read -r -a words <<< "${COMP_LINE:0:COMP_POINT}"
        [[ ${COMP_LINE:0:COMP_POINT} =~ [[:space:]]$ ]] && words+=("")
        cword=$(( ${#words[@]} - 1 ))
        cur=${words[cword]}
    fi

    local out directive
    out=$("${words[0]}" __complete "${words[@]:1:cword}" 2>/dev/null) || return
    directive=${out##*:}
    out=${out%:*}
    [[ $directive =~ ^[0-9]+$ ]] || directive=0
    (( directive & 1 )) && return                    # an error: no completion at all

    local -a candidates=()
    local line
    while IFS= read -r line; do
        [[ -n $line ]] && candidates+=("${line%%$'\t'*}")   # the value; bash shows no descriptions
    done <<< "$out"
    [[ $cur == -*=* ]] && cur=${cur#*=}              # --flag=<TAB>: bash replaces only what follows "="

    COMPREPLY=()
    if (( directive & 8 )); then                     # the candidates are file extensions
        local restore pattern IFS='|'
        pattern="!*.@(${candidates[*]})"
        IFS=$' \t\n'
        restore=$(shopt -p extglob)
        shopt -s extglob
        mapfile -t COMPREPLY < <(compgen -f -X "$pattern" -- "$cur"; compgen -d -- "$cur")
        eval "$restore"
        compopt -o filenames
    elif (( directive & 16 )); then                  # directories only
        mapfile -t COMPREPLY < <(compgen -d -- "$cur")
        compopt -o filenames
    else
        local candidate
        for candidate in "${candidates[@]}"; do
            [[ $candidate == "$cur"* ]] && COMPREPLY+=("$candidate")
        done
        (( directive & 2 )) && compopt -o nospace
        (( directive & 4 )) && compopt +o default     # else, with no candidate, bash completes file names
    fi

    # bash replaces the word only from its last ":" (COMP_WORDBREAKS): drop what comes before it.
    if [[ $cur == *:* && $COMP_WORDBREAKS == *:* ]]; then
        local colon_prefix=${cur%"${cur##*:}"} i
        for i in "${!COMPREPLY[@]}"; do
            COMPREPLY[i]=${COMPREPLY[i]#"$colon_prefix"}
        done
    fi
}

complete -o default -F __kubectl_preempt_preview_complete kubectl-preempt_preview
"""

ZSH = r"""#compdef kubectl-preempt_preview
# zsh completion for kubectl-preempt_preview
#
# Load it in this shell:    source <(kubectl preempt-preview completion zsh)
# or in every new shell:    kubectl preempt-preview completion zsh > "${fpath[1]}/_kubectl-preempt_preview"
#
# It completes kubectl-preempt_preview run directly. For "kubectl preempt-preview", kubectl 1.26 or later
# (with "source <(kubectl completion zsh)") asks kubectl_complete-preempt_preview, which must be on PATH.

_kubectl_preempt_preview() {
    local cur=${words[CURRENT]} out directive line value flag_prefix=""
    local -a candidates described

    out=$("${words[1]}" __complete "${(@)words[2,CURRENT-1]}" "$cur" 2>/dev/null) || return 1
    directive=${out##*:}
    out=${out%:*}
    [[ $directive == <-> ]] || directive=0
    (( directive & 1 )) && return 1                   # an error: no completion at all

    for line in "${(@f)out}"; do
        [[ -n $line ]] || continue
        value=${line%%$'\t'*}
        candidates+=("$value")
        if [[ $line == *$'\t'* ]]; then
            described+=("${value//:/\\:}:${line#*$'\t'}")
        else
            described+=("${value//:/\\:}")
        fi
    done
    if [[ $cur == -*=* ]]; then                        # --flag=<TAB>: the values come without "--flag="
        flag_prefix=${cur%%=*}=
    fi

    if (( directive & 8 )); then                       # the candidates are file extensions
        _files -g "*.(${(j:|:)candidates})"
    elif (( directive & 16 )); then                    # directories only
        _files -/
    elif (( ${#described} )); then
        local -a options=()
        (( directive & 2 )) && options+=(-S '')
        [[ -n $flag_prefix ]] && options+=(-P "$flag_prefix")
        _describe -t values 'kubectl-preempt_preview' described "${options[@]}"
    elif (( ! (directive & 4) )); then
        _files                                        # no candidate, and file names are allowed
    else
        return 1
    fi
}

if [[ ${funcstack[1]} == _kubectl_preempt_preview || ${funcstack[1]} == _kubectl-preempt_preview ]]; then
    _kubectl_preempt_preview "$@"                     # autoloaded from fpath: complete now
else
    compdef _kubectl_preempt_preview kubectl-preempt_preview
fi
"""

SCRIPTS = {"bash": BASH, "zsh": ZSH}
