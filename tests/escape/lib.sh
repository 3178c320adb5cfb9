# Helpers for tests/escape/run, sourced. Results go through pass/fail/skip,
# which print exactly one line each and keep the counts.

ESC_PASSED=0 ESC_FAILED=0 ESC_SKIPPED=0

pass() { echo "PASS $HALF/$1"; ESC_PASSED=$((ESC_PASSED + 1)); }
fail() { echo "FAIL $HALF/$1: $2"; ESC_FAILED=$((ESC_FAILED + 1)); }
skip() { echo "SKIP $HALF/$1: $2"; ESC_SKIPPED=$((ESC_SKIPPED + 1)); }

rand() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# as CMD...: run CMD as the half's user, with the half's environment.
as() {
	local x=
	[ -n "${exec_as:-}" ] && x=exec
	if [ "$RUN_AS_UID" = "$(id -u)" ]; then
		$x env -i "${HALF_ENV[@]}" "$@"
	else
		$x setpriv --reuid="$RUN_AS_UID" --regid="$RUN_AS_UID" \
			--clear-groups --inh-caps=-all env -i "${HALF_ENV[@]}" "$@"
	fi
}

# as_victim CMD...: run CMD as the uid runs get (nobody), on the host.
as_victim() {
	local x=
	[ -n "${exec_as:-}" ] && x=exec
	if [ "$(id -u)" = 0 ]; then
		$x setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
	else
		$x "$@"
	fi
}

# ran TEST: fail TEST (and return 1) when the last run printed no attack
# result at all: an attack that never ran must not count as blocked.
ran() {
	grep -q '^R ' "$LAST" && return 0
	fail "$1" "the attack did not run (rc $RC): $(head -c 200 "$LAST" | tr '\n' ' ')"
	return 1
}

# sp NAME [spctl run options] -- ARGV...: one sandboxed run. Its stdout and
# stderr land in $OUT/NAME.out, its exit code in RC. A run that outlives the
# outer guard is killed and shows as RC=137.
sp() {
	local name=$1
	shift
	RC=0
	local t0=$(( $(date +%s%N) / 1000000 ))
	as timeout -s KILL "$SP_GUARD" "$H/bin/spctl" run --workspace "$WS" \
		--yes "$@" >"$OUT/$name.out" 2>&1 </dev/null || RC=$?
	LAST=$OUT/$name.out
	[ -n "${ESCAPE_TIMES:-}" ] && echo "$(( $(date +%s%N) / 1000000 - t0 )) ms $name" >>"$ESCAPE_TIMES"
	return 0
}

# leaks FILE...: print the name of every canary or secret found in FILE(s),
# raw or as spd's redaction marker (a redacted secret was still handed over).
leaks() {
	# One grep for all canaries (cheap on a loaded machine), then names.
	local found
	found=$(cut -d= -f2- "$H/canaries" | grep -v '^$' |
		grep -ahoF -f - "$@" 2>/dev/null | sort -u |
		awk -F= 'NR == FNR { name[$0] = 1; next }
			 { v = substr($0, index($0, "=") + 1); if (v in name) printf "%s ", $1 }' - "$H/canaries")
	# spd also redacts its own directories' paths: those are not secrets.
	if grep -aohE '\[redacted:[A-Za-z0-9_]+\]' "$@" 2>/dev/null | grep -qvE 'redacted:SPD_[A-Z]+_DIR\]'; then
		found+="redacted-marker "
	fi
	echo "$found"
}

# no_leak TEST FILE...: pass when nothing secret is in FILE(s).
no_leak() {
	local t=$1 l
	shift
	l=$(leaks "$@")
	if [ -n "$l" ]; then
		fail "$t" "leaked: $l(see $*)"
	else
		pass "$t"
	fi
}

# result FILE NAME: the status word (OK/ERR) of the attack line "R NAME ..."
result() { awk -v n="$2" '$1 == "R" && $2 == n { print $3; exit }' "$1"; }
detail() { awk -v n="$2" '$1 == "R" && $2 == n { $1 = $2 = ""; print; exit }' "$1"; }

# judge PREFIX SANDBOX_OUT [CONTROL_OUT]: one line per attempt in the
# sandbox's output. OK inside is an escape. Refused inside passes when the
# control shows the same attempt works outside the sandbox; when it fails
# there too the attack proves nothing here and is skipped.
judge() {
	local prefix=$1 sb=$2 ctl=${3:-} name st cst
	local names
	names=$(awk '$1 == "R" { print $2 }' "$sb" "${ctl:-/dev/null}" | sort -u)
	if [ -z "$names" ]; then
		fail "$prefix" "the attack printed nothing (rc $RC): $(head -c 300 "$sb")"
		return
	fi
	for name in $names; do
		st=$(result "$sb" "$name")
		cst=
		[ -n "$ctl" ] && cst=$(result "$ctl" "$name")
		if [ "$st" = OK ]; then
			fail "$prefix/$name" "succeeded in the sandboxed run:$(detail "$sb" "$name")"
		elif [ -z "$st" ]; then
			fail "$prefix/$name" "no result from the sandboxed run (rc $RC)"
		elif [ -n "$ctl" ] && [ "$cst" != OK ]; then
			skip "$prefix/$name" "fails outside the sandbox too ($(detail "$ctl" "$name" | xargs)), proves nothing"
		else
			pass "$prefix/$name"
		fi
	done
}

# tree_hash DIR...: one hash over names, modes, owners and contents; spd's
# own state dir ($STATE, which spd itself writes on every run, under HOME
# in a user's layout) and the workspace are left out.
tree_hash() {
	find "$@" -xdev \( -name .cache -o -path "$STATE" -o -path "$WS" \) -prune -o -printf '%p %m %U %y %l\n' 2>/dev/null | sort | sha256sum | cut -c1-16
	find "$@" -xdev \( -name .cache -o -path "$STATE" -o -path "$WS" \) -prune -o -type f -print0 2>/dev/null | sort -z | xargs -0r sha256sum | sha256sum | cut -c1-16
}
