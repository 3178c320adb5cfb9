# bash completion for spctl, the client of spd.  Session and approval IDs
# come from a running spd (never started for a completion).
_spctl_ids() {
	# $1: sessions or approvals.
	local out
	case $1 in
	sessions)
		out=$(SPD_NO_AUTOSTART=1 spctl session list 2>/dev/null) || return
		awk '{ print $1 }' <<<"$out"
		;;
	approvals)
		out=$(SPD_NO_AUTOSTART=1 spctl approvals 2>/dev/null) || return
		awk '$1 == "approval" { print $2 }' <<<"$out"
		;;
	esac
}

_spctl() {
	local cur prev cmd sub i
	COMPREPLY=()
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD - 1]}
	local commands="ping status stop journal doctor reload run agent session policy approvals approve deny secrets turn turns mcp acp attest"
	local global="--json --help --version"

	# The command is the first word that is not an option; everything
	# after "--" is the argv of a run and completes as commands and files.
	cmd= sub=
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--) if [ "$cmd" = run ] || [ "$cmd" = policy ] ||
			   [ "$cmd" = agent ] || [ "$cmd" = acp ]; then
			    COMPREPLY=($(compgen -c -- "$cur") $(compgen -f -- "$cur"))
			    return
		    fi ;;
		-*) ;;
		*) if [ -z "$cmd" ]; then cmd=${COMP_WORDS[i]}
		   elif [ -z "$sub" ]; then sub=${COMP_WORDS[i]}; fi ;;
		esac
	done

	case $prev in
	--workspace | --repo | --writable | --read | --write)
		COMPREPLY=($(compgen -f -- "$cur"))
		return ;;
	--net)
		COMPREPLY=($(compgen -W "none loopback host proxy" -- "$cur"))
		return ;;
	--session)
		COMPREPLY=($(compgen -W "$(_spctl_ids sessions)" -- "$cur"))
		return ;;
	--into | --branch | --base)
		COMPREPLY=($(compgen -W "$(git for-each-ref --format='%(refname:short)' refs/heads 2>/dev/null)" -- "$cur"))
		return ;;
	--since | --kind | --limit | --timeout | --env | --why | --cap | --prompt | --trust | --trust-from)
		return ;;
	esac

	if [ -z "$cmd" ]; then
		COMPREPLY=($(compgen -W "$commands $global" -- "$cur"))
		return
	fi
	local opts=
	case $cmd in
	journal)
		[ -z "$sub" ] && opts="verify"
		opts="$opts --follow --since --kind --limit" ;;
	run)
		opts="--workspace --net --timeout --writable --env --best-effort --yes --" ;;
	session)
		case $sub in
		"") opts="start list show end status heldout verify diff log restore merge" ;;
		start) opts="--repo --in-place" ;;
		show | end | status | heldout | verify | diff | log | restore | merge)
			[ "$COMP_CWORD" -le 3 ] && opts=$(_spctl_ids sessions)
			case $sub in
			end) opts="$opts --discard" ;;
			diff) opts="$opts --stat" ;;
			merge) opts="$opts --into --squash --force" ;;
			esac ;;
		esac ;;
	policy)
		if [ -z "$sub" ]; then opts="check"
		else opts="--session --workspace --read --write --"; fi ;;
	agent) opts="--session --cap --timeout --yes --" ;;
	approvals) opts="--follow" ;;
	approve) [ -z "$sub" ] && opts=$(_spctl_ids approvals) ;;
	deny)
		if [ -z "$sub" ]; then opts=$(_spctl_ids approvals)
		else opts="--why"; fi ;;
	secrets) [ -z "$sub" ] && opts="reload" ;;
	turn)
		case $sub in
		"") opts="begin end" ;;
		begin) opts="--session --cap" ;;
		esac ;;
	turns | mcp) opts="--session" ;;
	acp) opts="--session --prompt --cap --yes --" ;;
	attest)
		case $sub in
		"") opts="key show verify" ;;
		show) opts="--repo" ;;
		verify) opts="--branch --repo --base --trust --trust-from --offline" ;;
		esac ;;
	esac
	COMPREPLY=($(compgen -W "$opts --json --help" -- "$cur"))
}
complete -F _spctl spctl
