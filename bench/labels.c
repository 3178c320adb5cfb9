/*
 * Benchmark: the provenance labels of a model call's conversation at the
 * broker (issue 41, daemon/broker/gw_labels.c), in process.  A session
 * holds SESSION_SERVED_MAX results spd served; a conversation of
 * BENCH_RESULTS tool results of BENCH_RESULT_BYTES each, a quarter of
 * them holding a served output, is classified:
 *   - cold: every result matched against every served result (the first
 *     call that holds them, or every call without the cache);
 *   - warm: the same conversation again, each result found by its digest;
 * beside the baseline every call pays already: json_loadb of the body.
 *
 *   build/bench/labels [results] [bytes]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/paths.h"
#include "daemon/broker/gateway_priv.h"
#include "daemon/session/labels.h"
#include "daemon/session/session.h"
#include "daemon/spd.h"
#include "tests/lib/benchutil.h"

#define BENCH_RESULTS 200
#define BENCH_RESULT_BYTES 4096
#define BENCH_RUNS 9

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Text of n bytes, different for each seed, JSON-safe. */
static void filler(struct buf *b, unsigned seed, size_t n)
{
	static const char words[] = "abcdefghijklmnopqrstuvwxyz0123456789 ";

	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		buf_append(b, &words[(seed >> 16) % (sizeof(words) - 1)], 1);
	}
}

static double median(double *v, int n)
{
	return bench_median(v, n);
}

int main(int argc, char **argv)
{
	int results = argc > 1 ? atoi(argv[1]) : BENCH_RESULTS;
	size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : BENCH_RESULT_BYTES;
	char root[] = "/tmp/spd-bench-labels-XXXXXX", cmd[8192];
	char *repo, *state, token[SESSION_TOKEN_LEN + 1];
	struct session_info *info = NULL;
	struct spd spd = {0};
	struct gateway g = {0};
	struct buf body = BUF_INIT, served[SESSION_SERVED_MAX];
	json_t *o, *labels, *tools, *cmdl = json_pack("[s]", "command");
	double cold[BENCH_RUNS], warm[BENCH_RUNS], parse[BENCH_RUNS];

	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1);
	if (!mkdtemp(root))
		return 1;
	repo = paths_join(root, "repo");
	state = paths_join(root, "state");
	snprintf(cmd, sizeof(cmd),
		 "git init -q -b main %s && cd %s && echo x > README && "
		 "git add README && git -c user.name=b -c "
		 "user.email=b@example.org commit -qm base",
		 repo, repo);
	if (system(cmd) != 0 || session_store_open(state, &spd.sessions) < 0 ||
	    session_start(spd.sessions, repo, "bench", false, &info, token) <
		0) {
		fprintf(stderr, "labels: no session\n");
		return 1;
	}
	g.spd = &spd;
	for (int i = 0; i < SESSION_SERVED_MAX; i++) {
		served[i] = (struct buf)BUF_INIT;
		filler(&served[i], 7000u + (unsigned)i, 2048);
		session_served_add(spd.sessions, info->id, served[i].data,
				   served[i].len, cmdl);
	}
	/* Anthropic's shape: one assistant turn of tool uses, one user turn
	 * of their results. */
	buf_puts(&body, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
			"\"content\":\"go\"},{\"role\":\"assistant\","
			"\"content\":[");
	for (int i = 0; i < results; i++)
		buf_printf(&body,
			   "%s{\"type\":\"tool_use\",\"id\":\"t%d\",\"name\":"
			   "\"Bash\",\"input\":{\"command\":\"step %d\"}}",
			   i ? "," : "", i, i);
	buf_puts(&body, "]},{\"role\":\"user\",\"content\":[");
	for (int i = 0; i < results; i++) {
		buf_printf(&body,
			   "%s{\"type\":\"tool_result\",\"tool_use_id\":"
			   "\"t%d\",\"content\":\"",
			   i ? "," : "", i);
		if (i % 4 == 0)
			buf_append(&body, served[i % SESSION_SERVED_MAX].data,
				   served[i % SESSION_SERVED_MAX].len);
		filler(&body, (unsigned)i, bytes);
		buf_puts(&body, "\"}");
	}
	buf_puts(&body, "]}]}");
	for (int r = 0; r < BENCH_RUNS; r++) {
		double t = now_ms();

		o = json_loadb(body.data, body.len, JSON_REJECT_DUPLICATES,
			       NULL);
		parse[r] = now_ms() - t;
		json_decref(g.label_cache);
		g.label_cache = NULL;
		t = now_ms();
		if (gw_labels_classify(&g, info->id, BROKER_API_ANTHROPIC,
				       "/v1/messages", "m", o, &labels,
				       &tools) < 0)
			return 1;
		cold[r] = now_ms() - t;
		if (r == 0)
			printf("labels of the conversation: %s; agent_tools: "
			       "%zu\n",
			       json_dumps(gw_labels_names(labels), 0),
			       json_array_size(tools));
		json_decref(labels);
		json_decref(tools);
		t = now_ms();
		gw_labels_classify(&g, info->id, BROKER_API_ANTHROPIC,
				   "/v1/messages", "m", o, &labels, &tools);
		warm[r] = now_ms() - t;
		json_decref(labels);
		json_decref(tools);
		json_decref(o);
	}
	printf("conversation: %d tool results of %zu bytes (%.1f MiB body), "
	       "%d served results of 2 KiB remembered\n",
	       results, bytes, body.len / 1048576.0, SESSION_SERVED_MAX);
	printf("json_loadb of the body (paid already): median %.2f ms\n",
	       median(parse, BENCH_RUNS));
	printf("labels, cold (no cache: every result matched): median %.2f "
	       "ms\n",
	       median(cold, BENCH_RUNS));
	printf("labels, warm (results found by digest): median %.2f ms; "
	       "hits %llu, misses %llu\n",
	       median(warm, BENCH_RUNS), (unsigned long long)g.label_hits,
	       (unsigned long long)g.label_misses);
	json_decref(g.label_cache);
	session_info_free(info);
	session_store_free(spd.sessions);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	if (system(cmd) != 0)
		return 1;
	return 0;
}
