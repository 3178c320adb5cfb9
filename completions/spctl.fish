# fish completion for spctl, the client of spd.  Session and approval IDs
# come from a running spd (never started for a completion).
function __spctl_sessions
    env SPD_NO_AUTOSTART=1 spctl session list 2>/dev/null | awk '{ print $1 }'
end
function __spctl_approvals
    env SPD_NO_AUTOSTART=1 spctl approvals 2>/dev/null | awk '$1 == "approval" { print $2 }'
end
set -l cmds ping status stop journal doctor reload run agent session policy approvals approve deny secrets turn turns mcp acp attest
complete -c spctl -f
complete -c spctl -l json -d 'print one JSON object per line'
complete -c spctl -l help -d 'print usage'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -l version -d 'print the version'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'ping' -d 'check that spd answers'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'status' -d 'version, uptime, journal, sandbox'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'stop' -d 'stop spd and wait until it has exited'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'journal' -d 'journal events'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'doctor' -d 'sandbox layers of this host'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'reload' -d 'read spd.conf again'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'run' -d 'run a command in the sandbox'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'session' -d 'agent sessions'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'policy' -d 'classify a call'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'approvals' -d 'pending asks'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'approve' -d 'grant an ask'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'deny' -d 'refuse an ask'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'secrets' -d 'secret names and fingerprints'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'agent' -d 'an agent CLI with a fresh model-broker turn'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'turn' -d 'begin or end a model-broker turn'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'turns' -d 'what each turn spent'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'mcp' -d 'an MCP server on stdio'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'acp' -d 'drive an ACP agent in the sandbox'
complete -c spctl -n "not __fish_seen_subcommand_from $cmds" -a 'attest' -d 'signing key; show and verify attestations'
complete -c spctl -n "__fish_seen_subcommand_from attest; and not __fish_seen_subcommand_from key show verify" -a 'key show verify'
complete -c spctl -n "__fish_seen_subcommand_from attest; and __fish_seen_subcommand_from show verify" -l repo -r -F -d 'the repository'
complete -c spctl -n "__fish_seen_subcommand_from attest; and __fish_seen_subcommand_from verify" -l branch -x -a '(git for-each-ref --format="%(refname:short)" refs/heads 2>/dev/null)' -d 'the branch to check'
complete -c spctl -n "__fish_seen_subcommand_from attest; and __fish_seen_subcommand_from verify" -l base -x -a '(git for-each-ref --format="%(refname:short)" refs/heads 2>/dev/null)' -d 'the base (default HEAD)'
complete -c spctl -n "__fish_seen_subcommand_from attest; and __fish_seen_subcommand_from verify" -l trust -r -d 'a trusted key, ed25519:BASE64'
complete -c spctl -n "__fish_seen_subcommand_from turn; and not __fish_seen_subcommand_from begin end" -a 'begin end'
complete -c spctl -n "__fish_seen_subcommand_from turn turns mcp acp" -l session -x -a '(__spctl_sessions)' -d 'the session'
complete -c spctl -n "__fish_seen_subcommand_from turn acp" -l cap -r -d 'the turn cap in USD'
complete -c spctl -n "__fish_seen_subcommand_from acp" -l prompt -r -d 'the prompt'
complete -c spctl -n "__fish_seen_subcommand_from acp" -l yes
complete -c spctl -n "__fish_seen_subcommand_from agent" -l session -r -d 'the session'
complete -c spctl -n "__fish_seen_subcommand_from agent" -l cap -r -d 'the turn cap in USD'
complete -c spctl -n "__fish_seen_subcommand_from journal" -a verify
complete -c spctl -n "__fish_seen_subcommand_from journal" -l follow
complete -c spctl -n "__fish_seen_subcommand_from journal" -l since -r
complete -c spctl -n "__fish_seen_subcommand_from journal" -l kind -r
complete -c spctl -n "__fish_seen_subcommand_from journal" -l limit -r
complete -c spctl -n "__fish_seen_subcommand_from run" -l workspace -r -F
complete -c spctl -n "__fish_seen_subcommand_from run" -l net -x -a 'none loopback host proxy'
complete -c spctl -n "__fish_seen_subcommand_from run" -l timeout -r
complete -c spctl -n "__fish_seen_subcommand_from run" -l writable -r -F
complete -c spctl -n "__fish_seen_subcommand_from run" -l env -r
complete -c spctl -n "__fish_seen_subcommand_from run" -l best-effort
complete -c spctl -n "__fish_seen_subcommand_from run" -l yes
complete -c spctl -n "__fish_seen_subcommand_from session; and not __fish_seen_subcommand_from start list show end status heldout verify diff log restore merge" -a 'start list show end status heldout verify diff log restore merge'
complete -c spctl -n "__fish_seen_subcommand_from session; and __fish_seen_subcommand_from show end status heldout verify diff log restore merge" -a '(__spctl_sessions)'
complete -c spctl -n "__fish_seen_subcommand_from session; and __fish_seen_subcommand_from end" -l discard -d 'drop uncommitted work, listing it'
complete -c spctl -n "__fish_seen_subcommand_from session; and __fish_seen_subcommand_from diff" -l stat -d 'a per-file summary'
complete -c spctl -n "__fish_seen_subcommand_from session; and __fish_seen_subcommand_from merge" -l into -x -a '(git for-each-ref --format="%(refname:short)" refs/heads 2>/dev/null)' -d 'the branch to merge into'
complete -c spctl -n "__fish_seen_subcommand_from session; and __fish_seen_subcommand_from merge" -l squash -d 'one commit on top of the target'
complete -c spctl -n "__fish_seen_subcommand_from session; and __fish_seen_subcommand_from merge" -l force -d 'merge past failing checks'
complete -c spctl -n "__fish_seen_subcommand_from start" -l repo -r -F
complete -c spctl -n "__fish_seen_subcommand_from start" -l in-place
complete -c spctl -n "__fish_seen_subcommand_from policy" -a check
complete -c spctl -n "__fish_seen_subcommand_from policy" -l session -x -a '(__spctl_sessions)'
complete -c spctl -n "__fish_seen_subcommand_from policy" -l workspace -r -F
complete -c spctl -n "__fish_seen_subcommand_from policy" -l read -r -F
complete -c spctl -n "__fish_seen_subcommand_from policy" -l write -r -F
complete -c spctl -n "__fish_seen_subcommand_from approvals" -l follow
complete -c spctl -n "__fish_seen_subcommand_from approve deny" -a '(__spctl_approvals)'
complete -c spctl -n "__fish_seen_subcommand_from deny" -l why -r
complete -c spctl -n "__fish_seen_subcommand_from secrets" -a reload
