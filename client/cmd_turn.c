/*
 * spctl turn begin|end and spctl turns: the model broker's turns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/rpc.h"
#include "client/cmds.h"
#include "client/termsafe.h"

static void print_obj(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);

	if (s)
		puts(s);
	free(s);
}

static int turn_usage(void)
{
	fprintf(stderr, "usage: spctl turn begin [--session ID] [--cap USD]\n"
			"       spctl turn end ID\n"
			"       spctl turns [--session ID]\n");
	return CMD_EXIT_USAGE;
}

int cmd_turn(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *params = json_object(), *res;
	int ex = 0;

	if (argc >= 2 && strcmp(argv[1], "begin") == 0) {
		for (int i = 2; i < argc; i++) {
			if (strcmp(argv[i], "--session") == 0 && i + 1 < argc) {
				json_object_set_new(params, "session",
						    json_string(argv[++i]));
			} else if (strcmp(argv[i], "--cap") == 0 &&
				   i + 1 < argc) {
				char *end;
				double d = strtod(argv[++i], &end);

				if (*end || d <= 0) {
					json_decref(params);
					return turn_usage();
				}
				json_object_set_new(params, "cap_usd",
						    json_real(d));
			} else {
				json_decref(params);
				return turn_usage();
			}
		}
		res = cmd_call(RPC_M_TURN_BEGIN, params, &ex);
		if (!res)
			return ex;
		if (ctx->json) {
			print_obj(res);
		} else {
			/* The key is shown once: it is the agent's to use. */
			printf(
			    "turn %s, cap %.6f USD\n",
			    json_string_value(json_object_get(res, "turn")),
			    json_number_value(json_object_get(res, "cap_usd")));
			printf("key: %s\n",
			       json_string_value(json_object_get(res, "key")));
			/* Gemini's base URL is the Anthropic one: its
			 * paths (/v1beta/models/…) start at the root. */
			printf("ANTHROPIC_BASE_URL=%s\nOPENAI_BASE_URL=%s\n"
			       "GOOGLE_GEMINI_BASE_URL=%s\n",
			       json_string_value(
				   json_object_get(res, "anthropic_base_url"))
				   ?: "",
			       json_string_value(
				   json_object_get(res, "openai_base_url"))
				   ?: "",
			       json_string_value(
				   json_object_get(res, "anthropic_base_url"))
				   ?: "");
		}
		json_decref(res);
		return 0;
	}
	if (argc == 3 && strcmp(argv[1], "end") == 0) {
		json_object_set_new(params, "turn", json_string(argv[2]));
		res = cmd_call(RPC_M_TURN_END, params, &ex);
		if (!res)
			return ex;
		if (ctx->json)
			print_obj(res);
		else
			printf(
			    "turn %s ended: spent %.6f of %.6f USD in %lld "
			    "calls\n",
			    argv[2],
			    json_number_value(
				json_object_get(res, "spent_usd")),
			    json_number_value(json_object_get(res, "cap_usd")),
			    (long long)json_integer_value(
				json_object_get(res, "calls")));
		json_decref(res);
		return 0;
	}
	json_decref(params);
	return turn_usage();
}

int cmd_turns(struct cmd_ctx *ctx, int argc, char **argv)
{
	json_t *params = json_object(), *res, *a;
	int ex = 0;

	if (argc == 3 && strcmp(argv[1], "--session") == 0)
		json_object_set_new(params, "session", json_string(argv[2]));
	else if (argc != 1) {
		json_decref(params);
		return turn_usage();
	}
	res = cmd_call(RPC_M_TURN_LIST, params, &ex);
	if (!res)
		return ex;
	a = json_object_get(res, "turns");
	if (ctx->json) {
		print_obj(res);
	} else {
		printf("%-22s %-18s %12s %12s %12s %6s  %s\n", "TURN",
		       "SESSION", "SPENT", "RESERVED", "CAP", "CALLS", "STATE");
		for (size_t i = 0; i < json_array_size(a); i++) {
			json_t *t = json_array_get(a, i);
			const char *s =
			    json_string_value(json_object_get(t, "session"));

			printf("%-22s ",
			       json_string_value(json_object_get(t, "turn")));
			ts_fputs(stdout, s ? s : "-");
			printf(
			    " %12.6f %12.6f %12.6f %6lld  %s\n",
			    json_number_value(json_object_get(t, "spent_usd")),
			    json_number_value(
				json_object_get(t, "reserved_usd")),
			    json_number_value(json_object_get(t, "cap_usd")),
			    (long long)json_integer_value(
				json_object_get(t, "calls")),
			    json_is_true(json_object_get(t, "ended"))
				? json_string_value(
				      json_object_get(t, "end_reason"))
				: "live");
		}
	}
	json_decref(res);
	return 0;
}
