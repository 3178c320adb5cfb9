/*
 * spctl — the thin command-line client of spd.  It parses arguments,
 * speaks the protocol and prints results; it holds no policy logic.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "client/cmds.h"
#include "common/paths.h"
#include "common/trace.h"
#include "common/util.h"

/*
 * spctl's own paths_passwd_home (common/paths.h), which keeps the one in
 * libcommon out of it: spctl is linked statically (it starts once per
 * command an agent runs; the loader's work was a fifth of that start), and
 * glibc's getpwuid there would load whatever name service modules the host
 * has at run time.  Without HOME, spctl reads /etc/passwd itself.
 */
const char *paths_passwd_home(void)
{
	static char home[PATH_MAX];
	struct passwd *pw;
	uid_t uid = geteuid();
	FILE *f = fopen("/etc/passwd", "re");

	if (!f)
		return NULL;
	home[0] = '\0';
	while ((pw = fgetpwent(f)))
		if (pw->pw_uid == uid && pw->pw_dir && pw->pw_dir[0] == '/') {
			snprintf(home, sizeof(home), "%s", pw->pw_dir);
			break;
		}
	fclose(f);
	return home[0] ? home : NULL;
}

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: spctl [--json] COMMAND [ARGS] [--json]\n"
	    "       spctl COMMAND --help   that command's usage\n"
	    "\n"
	    "commands:\n"
	    "  ping                         check that spd answers\n"
	    "  status                       spd's version, uptime, journal, "
	    "sandbox\n"
	    "  stop                         stop spd and wait until it has "
	    "exited\n"
	    "  journal [--follow|-f] [--since ID] [--kind K] [--limit N]\n"
	    "                               show journal events\n"
	    "  journal verify               check the journal's hash chain\n"
	    "  doctor                       which sandbox layers this host "
	    "offers\n"
	    "  run [--workspace DIR] [--net none|loopback|proxy|host] "
	    "[--timeout S]\n"
	    "      [--writable PATH]... [--env NAME=VALUE]... [--best-effort]\n"
	    "      [--yes|-y]  (approve an ask; without it spctl asks y/N on "
	    "a tty)\n"
	    "      -- ARGV...               run a command in the sandbox\n"
	    "  agent [--session ID] [--cap USD] [--timeout S] [--yes|-y] -- "
	    "CMD...\n"
	    "                               an agent CLI in the session's "
	    "worktree, its\n"
	    "                               model calls through a fresh "
	    "turn\n"
	    "  session start FEATURE [--repo DIR] [--in-place]\n"
	    "                               a worktree on spd/FEATURE and "
	    "the agent's token\n"
	    "  session list | show ID | status [ID]\n"
	    "  session diff ID [--stat]     the agent's commits, what is "
	    "uncommitted, the diff\n"
	    "  session log ID | restore ID N\n"
	    "                               checkpoints of the worktree; "
	    "put one back\n"
	    "  session merge ID [--into BRANCH] [--squash] [--force]\n"
	    "                               the checks, then the branch "
	    "into your checkout\n"
	    "  session end ID [--discard]   commit what is uncommitted "
	    "(or drop it), end\n"
	    "  session heldout ID DIR | verify ID\n"
	    "  attest key                   spd's public signing key and "
	    "its fingerprint\n"
	    "  attest show COMMIT [--repo DIR]\n"
	    "                               the attestation spd signed on "
	    "a commit\n"
	    "  attest verify --branch B [--repo DIR] [--base REF] "
	    "[--trust KEY]...\n"
	    "                               check a branch's attestations, "
	    "running nothing\n"
	    "  policy check [--session ID] [--workspace DIR] -- ARGV...\n"
	    "  policy check --read PATH | --write PATH\n"
	    "  policy propose HOST METHOD PATH\n"
	    "  approvals [--follow]         pending asks (operator); --follow "
	    "also\n"
	    "                               shows them granted, refused, "
	    "withdrawn\n"
	    "  approve ID [--always] | deny ID [--why TEXT]\n"
	    "  secrets [reload]             names, sources, fingerprints "
	    "(never values)\n"
	    "  turn begin [--session ID] [--cap USD] | turn end ID\n"
	    "                               a model-broker turn: its key, "
	    "base URLs\n"
	    "  turns [--session ID]         spent, reserved, cap, calls per "
	    "turn\n"
	    "  mcp [--session ID]           an MCP server on stdio: spd's "
	    "tools for an agent\n"
	    "  acp [--session ID] [--prompt TEXT] [--cap USD] [--yes|-y]\n"
	    "      -- AGENT...              drive an ACP agent in the "
	    "sandbox,\n"
	    "                               its asks decided by spd\n"
	    "\n"
	    "options:\n"
	    "  --json      print machine-readable JSON (one object per line),\n"
	    "              before or after the command\n"
	    "  --help      this text; after a command, that command's usage\n"
	    "  --version   spctl's version\n"
	    "\n"
	    "environment:\n"
	    "  SPD_SESSION_TOKEN   act as the agent of that session\n"
	    "  SPD_NO_AUTOSTART=1  never start spd on demand\n"
	    "  SPD_CONFIG_DIR, SPD_STATE_DIR, SPD_RUNTIME_DIR  as for spd\n"
	    "\n"
	    "exit codes:\n"
	    "  0    success\n"
	    "  1    a check failed (journal verify found tampering, doctor\n"
	    "       found a missing layer, a verification gate failed,\n"
	    "       attest verify found no valid attestation)\n"
	    "  2    usage error: an unknown option, a missing --, no such "
	    "session\n"
	    "  run: the command's own exit code; 128+N when killed by signal "
	    "N;\n"
	    "  124  the run hit its deadline\n"
	    "  125  spctl or spd failed (unreachable, unauthorized, internal)\n"
	    "  126  refused: by policy, or the sandbox is unavailable\n"
	    "  127  command not found\n");
}

/* Each command's usage, for `spctl COMMAND --help` (stdout, exit 0). */
static const struct {
	const char *name;
	int (*fn)(struct cmd_ctx *ctx, int argc, char **argv);
	const char *usage;
} commands[] = {
    {"ping", cmd_ping,
     "usage: spctl ping [--json]\n"
     "Check that spd answers (starting it unless SPD_NO_AUTOSTART=1).\n"},
    {"status", cmd_status,
     "usage: spctl status [--json]\n"
     "spd's version, uptime, journal size and sandbox layers.\n"},
    {"stop", cmd_stop,
     "usage: spctl stop [--json]\n"
     "Ask spd to shut down (runs in flight end, the journal is closed) and\n"
     "wait until it has exited.  Never starts spd; exit 0 also when no spd\n"
     "runs (\"spd is not running\").\n"},
    {"journal", cmd_journal,
     "usage: spctl journal [--follow] [--since ID] [--kind KIND] "
     "[--limit N] [--json]\n"
     "       spctl journal verify [--json]\n"
     "Show journal events (--json: one event object per line), or check\n"
     "the journal's hash chain (exit 1 and the first bad row when "
     "broken).\n"},
    {"doctor", cmd_doctor,
     "usage: spctl doctor [--json]\n"
     "Which sandbox layers this host offers, and how to fix a missing one\n"
     "(exit 1 when a required layer is missing); for the operator, every\n"
     "spd.conf key with its value in force, default and meaning.\n"},
    {"reload", cmd_reload,
     "usage: spctl reload [--json]\n"
     "spd reads spd.conf again: what can change while it runs holds from\n"
     "the next call, a key that needs a restart is listed and keeps its\n"
     "value; a file with an error is refused whole (the old one stays).\n"},
    {"run", cmd_run,
     "usage: spctl run [--workspace DIR] [--net none|loopback|proxy|host] "
     "[--timeout S]\n"
     "                 [--writable PATH]... [--env NAME=VALUE]... "
     "[--best-effort]\n"
     "                 [--yes] [--json] -- ARGV...\n"
     "Run ARGV in the sandbox; the workspace is the git top-level of the\n"
     "current directory unless --workspace names one.  --yes approves an\n"
     "ask (without it spctl asks y/N on a tty).  Exit: the command's own,\n"
     "124 deadline, 125 spctl/spd error, 126 refused, 127 not found.\n"},
    {"agent", cmd_agent,
     "usage: spctl agent [--session ID] [--cap USD] [--timeout S] [--yes] "
     "[--json]\n"
     "                   -- CMD...\n"
     "Run an agent CLI in the session's worktree with a fresh turn: its\n"
     "environment gets ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY,\n"
     "ANTHROPIC_AUTH_TOKEN, OPENAI_BASE_URL and OPENAI_API_KEY for the\n"
     "broker and the turn's key, HOME is the session's own home, and\n"
     "its only network is 127.0.0.1:8377, the broker.  The turn ends\n"
     "when the command does; `spctl turns` shows its spend.\n"},
    {"session", cmd_session,
     "usage: spctl session start FEATURE [--repo DIR] [--in-place] "
     "[--json]\n"
     "       spctl session list | show ID | status [ID] [--json]\n"
     "       spctl session diff ID [--stat] [--json]\n"
     "       spctl session log ID | restore ID N [--json]\n"
     "       spctl session merge ID [--into BRANCH] [--squash] [--force] "
     "[--json]\n"
     "       spctl session end ID [--discard] [--json]\n"
     "       spctl session heldout ID DIR | verify ID [--json]\n"
     "Agent sessions: a worktree on branch spd/FEATURE and a token that\n"
     "acts only there (printed once by start).  The agent commits there\n"
     "with git; spd takes its commits onto spd/FEATURE in your repository\n"
     "and checkpoints the worktree after each run that changed it.\n"
     "status without ID: the one active session.  diff: the commits, the\n"
     "uncommitted paths and the diff from the base (--stat: per file).\n"
     "log: the checkpoints; restore ID N puts the worktree back as N had\n"
     "it.  merge: the project's checks, then the branch into the branch\n"
     "checked out in your repository (or --into BRANCH); --squash makes\n"
     "one commit; --force merges past failing checks; exit 1 when\n"
     "refused (checks failed, your checkout has changes, the target\n"
     "moved, conflicts).  end: commits what the agent left uncommitted\n"
     "(--discard drops it, listing the files), runs the project's checks\n"
     "on the branch's tip when it has any and signs their verdict (an end\n"
     "whose checks fail or cannot run says UNVERIFIED and why), removes\n"
     "the worktree and keeps the branch.\n"},
    {"attest", cmd_attest,
     "usage: spctl attest key [--json]\n"
     "       spctl attest show COMMIT [--repo DIR] [--trust KEY]...\n"
     "                         [--trust-from REF:PATH] [--json]\n"
     "       spctl attest verify --branch B [--repo DIR] [--base REF]\n"
     "                           [--trust KEY]... [--trust-from REF:PATH]\n"
     "                           [--offline] [--json]\n"
     "spd signs what session verify, merge and end checked (an in-toto\n"
     "statement in a DSSE envelope, Ed25519) as a git note under\n"
     "refs/notes/spd.  key prints spd's public key (ed25519:BASE64, for\n"
     "[attest] trust in spd.conf) and its fingerprint; show prints a\n"
     "commit's attestation (its checks, the session's journal rows and\n"
     "model calls: providers, models, tokens, spend); verify checks every "
     "commit of B since its merge\n"
     "base with --base (default HEAD), reading objects and notes only: the\n"
     "tip must carry a pass signed by a trusted key (spd.conf's [attest]\n"
     "trust and spd's own, or only the --trust keys and those of the file\n"
     "PATH in the commit REF, one the branch did not write) for its own\n"
     "tree, showing the checks and required commands of the merge base's\n"
     ".spd.conf.  Without a running spd (or with --offline) the spd\n"
     "binary verifies and exits; nothing of the repository runs.\n"
     "Exit 1 with the reasons when it does not.  Evidence, not a review.\n"},
    {"policy", cmd_policy,
     "usage: spctl policy check [--session ID] [--workspace DIR] [--json] "
     "-- ARGV...\n"
     "       spctl policy check [--session ID] [--workspace DIR] [--json]\n"
     "                          --read PATH | --write PATH\n"
     "       spctl policy propose HOST METHOD PATH [--json]\n"
     "How the policy classifies a call: allow, ask or deny, and the "
     "rule.\n"
     "propose (an agent, with SPD_SESSION_TOKEN) asks a person for a\n"
     "request rule of the session's proxy runs, allow = METHOD PATH for\n"
     "HOST, and prints the approval's id.\n"},
    {"approvals", cmd_approvals,
     "usage: spctl approvals [--follow] [--json]\n"
     "Pending asks (operator); --follow waits for new ones and shows each\n"
     "ask as it is granted, refused or withdrawn.  An ask nobody decides\n"
     "is refused after 10 minutes.\n"},
    {"approve", cmd_approve,
     "usage: spctl approve ID [--always] [--json]\n"
     "Grant the pending ask ID, once, for its session.  --always, for a\n"
     "request rule a session proposed, also writes it into spd.conf\n"
     "([network \"HOST\"] allow, for every session from spd's next start).\n"},
    {"deny", cmd_deny,
     "usage: spctl deny ID [--why TEXT] [--json]\n"
     "Refuse the pending ask ID; TEXT is what the agent is told.\n"},
    {"secrets", cmd_secrets,
     "usage: spctl secrets [reload] [--json]\n"
     "Secret names, sources and fingerprints (never values); reload\n"
     "rereads them.\n"},
    {"turn", cmd_turn,
     "usage: spctl turn begin [--session ID] [--cap USD] [--json]\n"
     "       spctl turn end ID [--json]\n"
     "A model-broker turn: a key for one turn and its hard cost cap.\n"},
    {"acp", cmd_acp,
     "usage: spctl acp [--session ID] [--prompt TEXT] [--cap USD] [--yes] "
     "-- AGENT [ARGS...]\n"
     "Run an ACP (Agent Client Protocol v1) agent in a session's sandbox, as\n"
     "spctl agent does, and be its client: prompts from --prompt or lines on\n"
     "stdin; its permission requests decided by spd's policy (allow once or\n"
     "reject once, never always), its files read and written and its\n"
     "terminals run by spd; its updates shown on stderr.\n"},
    {"mcp", cmd_mcp,
     "usage: spctl mcp [--session ID]\n"
     "An MCP server (Model Context Protocol, revision 2025-11-25) on stdin\n"
     "and stdout: run_command, read_file, write_file, edit_file, list_dir,\n"
     "search, policy_check, propose_rule, commit (git add and git commit on "
     "the\n"
     "session's branch) and session_status, each through spd's policy,\n"
     "sandbox, redactor and journal, in one session.  --session ID acts as\n"
     "the operator in that session; an agent sets SPD_SESSION_TOKEN.\n"},
    {"turns", cmd_turns,
     "usage: spctl turns [--session ID] [--json]\n"
     "Turns with what each spent, reserved, its cap and its calls.\n"},
};

/* Options of some command that take a value: their value is never a
 * global option (`spctl deny 3 --why --json` gives the reason
 * "--json"). */
static bool takes_value(const char *opt)
{
	static const char *const with_value[] = {
	    "--since",	 "--kind",     "--limit", "--workspace",  "--net",
	    "--timeout", "--writable", "--env",	  "--repo",	  "--session",
	    "--read",	 "--write",    "--why",	  "--cap",	  "--into",
	    "--branch",	 "--base",     "--trust", "--trust-from",
	};

	for (size_t k = 0; k < ARRAY_SIZE(with_value); k++)
		if (strcmp(opt, with_value[k]) == 0)
			return true;
	return false;
}

int main(int argc, char **argv)
{
	struct cmd_ctx ctx = {0};
	bool help = false;
	int i = 1, n = 1, cmd = -1, ex;

	/* A trace that cannot be opened is no reason to refuse a command. */
	(void)trace_open_env("spctl");
	trace_stamp("main");

	/* Global options before the command. */
	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--json") == 0) {
			ctx.json = true;
		} else if (strcmp(argv[i], "--help") == 0 ||
			   strcmp(argv[i], "-h") == 0) {
			help = true;
		} else if (strcmp(argv[i], "--version") == 0) {
			/* Which C library: the musl build starts 0.5 ms
			 * sooner on a VM (Makefile, SPCTL_LIBC). */
#ifdef __GLIBC__
			printf("spctl %s (glibc)\n", SPD_VERSION);
#else
			printf("spctl %s (musl)\n", SPD_VERSION);
#endif
			return 0;
		} else {
			usage(stderr);
			return CMD_EXIT_USAGE;
		}
		i++;
	}
	if (i >= argc) {
		usage(help ? stdout : stderr);
		return help ? 0 : CMD_EXIT_USAGE;
	}
	for (size_t k = 0; k < ARRAY_SIZE(commands); k++)
		if (strcmp(argv[i], commands[k].name) == 0)
			cmd = (int)k;
	if (cmd < 0) {
		fprintf(stderr,
			"spctl: unknown command \"%s\" (see spctl --help)\n",
			argv[i]);
		return CMD_EXIT_USAGE;
	}
	/* Global options after the command, up to "--" (what follows is a
	 * run's argv, never spctl's): taken out, the rest kept in order. */
	argv[n++] = argv[i++];
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			while (i < argc)
				argv[n++] = argv[i++];
			break;
		}
		if (strcmp(argv[i], "--json") == 0) {
			ctx.json = true;
			continue;
		}
		if (strcmp(argv[i], "--help") == 0 ||
		    strcmp(argv[i], "-h") == 0) {
			help = true;
			continue;
		}
		argv[n++] = argv[i];
		if (takes_value(argv[i]) && i + 1 < argc)
			argv[n++] = argv[++i];
	}
	argv[n] = NULL;
	if (help) {
		fputs(commands[cmd].usage, stdout);
		return 0;
	}
	ex = commands[cmd].fn(&ctx, n - 1, argv + 1);
	trace_stamp("exit");
	trace_close();
	return ex;
}
