#include <stdio.h>

#include "cmds.h"

/* Commands whose daemon side lands with later work answer clearly. */
static int not_yet(const char *what)
{
	fprintf(stderr, "spctl: %s is not available in this build\n", what);
	return CMD_EXIT_SPD;
}

int cmd_session(struct cmd_ctx *ctx, int argc, char **argv)
{
	return not_yet("session");
}

int cmd_policy(struct cmd_ctx *ctx, int argc, char **argv)
{
	return not_yet("policy");
}
