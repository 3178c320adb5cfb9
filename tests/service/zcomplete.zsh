#!/usr/bin/zsh -f
# zcomplete.zsh DIR WORDS...: the words zsh's completion (compinit, the
# completion function in DIR) offers for the last of WORDS, one per line.
# Drives an interactive zsh in a pseudo-terminal (zsh/zpty) and records
# every candidate compadd is given.
zmodload zsh/zpty || exit 2
dir=$1
shift
export ZDOTDIR=$(mktemp -d)
cat >$ZDOTDIR/.zshrc <<RC
PROMPT='> ' RPROMPT=
fpath=(${(q)dir} \$fpath)
autoload -Uz compinit
compinit -u -D
zstyle ':completion:*' list-grouped false
zstyle ':completion:*' insert-tab false
comppostfuncs=(__done)
__done() { print -r -- "<EOC>"; exit }
compadd() {
	if [[ \${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "\$@"; return \$?; fi
	typeset -a __hits
	builtin compadd -A __hits "\$@"
	local w; for w in \$__hits; do print -r -- "HIT:\$w"; done
	builtin compadd "\$@"
}
print -r -- "<READY>"
RC
zpty z zsh -d -i
zpty -r z out '*<READY>*' || exit 3
zpty -n -w z "$*"$'\t'
zpty -r z out '*<EOC>*'
zpty -d z
rm -rf $ZDOTDIR
local line
for line in ${(f)out}; do
	line=${line//$'\r'/}
	[[ $line == *HIT:* ]] && print -r -- ${line##*HIT:}
done
