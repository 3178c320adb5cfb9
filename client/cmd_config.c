/*
 * spctl reload (daemon.reload) and the configuration part of spctl
 * doctor (daemon.config): spd.conf's keys from spd's own table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cmds.h"

static void print_names(const char *label, json_t *a)
{
	size_t i;
	json_t *v;

	if (!json_array_size(a))
		return;
	printf("%s", label);
	json_array_foreach(a, i, v)
	    printf("%s%s", i ? ", " : " ", json_string_value(v));
	fputc('\n', stdout);
}

int cmd_reload(struct cmd_ctx *ctx, int argc, char **argv)
{
	int ex = 0;
	json_t *res;

	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: spctl reload [--json]\n");
		return CMD_EXIT_USAGE;
	}
	res = cmd_call(RPC_M_DAEMON_RELOAD, NULL, &ex);
	if (!res)
		return ex;
	if (ctx->json) {
		char *s = json_dumps(res, JSON_COMPACT | JSON_SORT_KEYS);

		puts(s ? s : "null");
		free(s);
	} else {
		printf("spd.conf reloaded (sha256 %.12s, was %.12s): %zu "
		       "entries changed\n",
		       json_string_value(json_object_get(res, "new_sha256")),
		       json_string_value(json_object_get(res, "old_sha256")),
		       json_array_size(json_object_get(res, "changed")));
		print_names("  changed:", json_object_get(res, "changed"));
		print_names("  needs restart (old value kept):",
			    json_object_get(res, "needs_restart"));
	}
	json_decref(res);
	return 0;
}

json_t *cmd_config_fetch(void)
{
	int ex = 0;

	/* The operator's alone: an agent's doctor lists the layers only. */
	if (getenv("SPD_SESSION_TOKEN"))
		return NULL;
	return cmd_call(RPC_M_DAEMON_CONFIG, NULL, &ex);
}

void cmd_config_print(json_t *cfg)
{
	json_t *keys = json_object_get(cfg, "keys"), *k;
	size_t i;

	if (!cfg)
		return;
	printf("\nspd.conf %s (sha256 %.12s): key, value in force, default, "
	       "what it is\n",
	       json_string_value(json_object_get(cfg, "file")),
	       json_string_value(json_object_get(cfg, "sha256")));
	json_array_foreach(keys, i, k)
	{
		json_t *vals = json_object_get(k, "value"), *v;
		const char *def =
		    json_string_value(json_object_get(k, "default"));
		const char *range =
		    json_string_value(json_object_get(k, "range"));
		size_t j;
		int n = 0;

		n += printf("  %s = ",
			    json_string_value(json_object_get(k, "key")));
		if (!json_array_size(vals) ||
		    json_is_null(json_array_get(vals, 0)))
			n += printf("-");
		json_array_foreach(vals, j, v)
		{
			if (json_is_string(v))
				n += printf("%s%s", j ? "; " : "",
					    json_string_value(v));
		}
		printf("%*s(default %s%s%s%s) %s\n", n < 40 ? 40 - n : 1, "",
		       def ? def : "none", range && range[0] ? ", " : "",
		       range ? range : "",
		       json_is_true(json_object_get(k, "restart")) ? ", restart"
								   : "",
		       json_string_value(json_object_get(k, "doc")));
	}
	print_names("changed in the file, waiting for a restart:",
		    json_object_get(cfg, "needs_restart"));
}
