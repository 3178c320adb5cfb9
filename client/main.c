/*
 * spctl — the thin command-line client of spd.  It parses arguments,
 * speaks the protocol and prints results; it holds no policy logic.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/client.h"
#include "client/cmds.h"
#include "common/trace.h"
#include "common/util.h"

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: spctl [--json] COMMAND [ARGS]\n"
	    "\n"
	    "commands:\n"
	    "  ping                         check that spd answers\n"
	    "  status                       spd's version, uptime, journal, "
	    "sandbox\n"
	    "  journal [--follow] [--since ID] [--kind K] [--limit N]\n"
	    "                               show journal events\n"
	    "  journal verify               check the journal's hash chain\n"
	    "  doctor                       which sandbox layers this host "
	    "offers\n"
	    "  run [--workspace DIR] [--net none|loopback|host] [--timeout S]\n"
	    "      [--writable PATH]... [--env NAME=VALUE]... [--best-effort]\n"
	    "      [--yes]  (approve an ask; without it spctl asks y/N on a "
	    "tty)\n"
	    "      -- ARGV...               run a command in the sandbox\n"
	    "  session start FEATURE [--repo DIR] [--in-place]\n"
	    "  session list | show ID | end ID | status [ID]\n"
	    "  session heldout ID DIR | verify ID | diff ID\n"
	    "  policy check [--session ID] [--workspace DIR] -- ARGV...\n"
	    "  policy check --read PATH | --write PATH\n"
	    "  approvals [--follow]         pending asks (operator)\n"
	    "  approve ID | deny ID [--why TEXT]\n"
	    "  secrets [reload]             names, sources, fingerprints "
	    "(never values)\n"
	    "\n"
	    "options:\n"
	    "  --json      print machine-readable JSON (one object per line)\n"
	    "\n"
	    "environment:\n"
	    "  SPD_SESSION_TOKEN   act as the agent of that session\n"
	    "  SPD_NO_AUTOSTART=1  never start spd on demand\n"
	    "  SPD_CONFIG_DIR, SPD_STATE_DIR, SPD_RUNTIME_DIR  as for spd\n"
	    "\n"
	    "exit codes:\n"
	    "  0    success\n"
	    "  1    a check failed (journal verify found tampering, doctor\n"
	    "       found a missing layer, a verification gate failed)\n"
	    "  2    usage error\n"
	    "  run: the command's own exit code; 128+N when killed by signal "
	    "N;\n"
	    "  124  the run hit its deadline\n"
	    "  125  spctl or spd failed (unreachable, unauthorized, internal)\n"
	    "  126  refused: by policy, or the sandbox is unavailable\n"
	    "  127  command not found\n");
}

static const struct {
	const char *name;
	int (*fn)(struct cmd_ctx *ctx, int argc, char **argv);
} commands[] = {
    {"ping", cmd_ping},	      {"status", cmd_status},
    {"journal", cmd_journal}, {"doctor", cmd_doctor},
    {"run", cmd_run},	      {"session", cmd_session},
    {"policy", cmd_policy},   {"approvals", cmd_approvals},
    {"approve", cmd_approve}, {"deny", cmd_deny},
    {"secrets", cmd_secrets},
};

int main(int argc, char **argv)
{
	struct cmd_ctx ctx = {0};
	int i = 1, ex;

	/* A trace that cannot be opened is no reason to refuse a command. */
	(void)trace_open_env("spctl");
	trace_stamp("main");

	while (i < argc && argv[i][0] == '-') {
		if (strcmp(argv[i], "--json") == 0) {
			ctx.json = true;
		} else if (strcmp(argv[i], "--help") == 0 ||
			   strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("spctl %s\n", SPD_VERSION);
			return 0;
		} else {
			usage(stderr);
			return CMD_EXIT_USAGE;
		}
		i++;
	}
	if (i >= argc) {
		usage(stderr);
		return CMD_EXIT_USAGE;
	}
	for (size_t k = 0; k < ARRAY_SIZE(commands); k++) {
		if (strcmp(argv[i], commands[k].name) != 0)
			continue;
		ex = commands[k].fn(&ctx, argc - i, argv + i);
		trace_stamp("exit");
		trace_close();
		return ex;
	}
	fprintf(stderr, "spctl: unknown command \"%s\" (see spctl --help)\n",
		argv[i]);
	return CMD_EXIT_USAGE;
}
