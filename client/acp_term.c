/*
 * spctl acp's terminals: ACP's terminal/create, output, wait_for_exit,
 * kill and release, each terminal a run in the session's sandbox (cmd.run
 * on a connection of its own, with a stdin pipe closed at once so that
 * spd says when it started, and one pipe for its stdout and stderr, so
 * that their order is kept).  terminal/create is answered as soon as the
 * run has started; its output is kept as it comes, the last outputByteLimit
 * bytes of it.  Killing a terminal closes its connection: spd kills the
 * run's whole pid namespace and journals it.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/acp.h"
#include "client/b64.h"
#include "common/utf8.h"
#include "proto/rpc.h"

/* The output as a JSON string: bytes that are not UTF-8 become U+FFFD. */
static json_t *out_json(const struct buf *b)
{
	const char *p = b->data ? b->data : "";
	struct buf o = {0};
	json_t *s;

	if (utf8_valid(p, b->len))
		return json_stringn(p, b->len);
	for (size_t i = 0; i < b->len;) {
		size_t k = 1;
		while (k <= 4 && i + k <= b->len && !utf8_valid(p + i, k))
			k++;
		if (k <= 4 && i + k <= b->len) {
			buf_append(&o, p + i, k);
			i += k;
		} else {
			buf_append(&o, "\xef\xbf\xbd", 3);
			i++;
		}
	}
	s = json_stringn(o.data ? o.data : "", o.len);
	buf_free(&o);
	return s;
}

/* Keep the last limit bytes, cut at the start of a character. */
static void out_add(struct acp_term *t, const char *d, size_t n)
{
	size_t cut;

	buf_append(&t->out, d, n);
	if (t->out.len <= t->limit)
		return;
	cut = t->out.len - t->limit;
	while (cut < t->out.len &&
	       ((unsigned char)t->out.data[cut] & 0xc0) == 0x80)
		cut++;
	buf_consume(&t->out, cut);
	t->truncated = true;
}

static void answer_waiters(struct acp_term *t)
{
	json_t *w;
	size_t i;

	json_array_foreach(t->waiters, i, w)
	    acp_result(t->a, w, json_deep_copy(t->exit));
	json_array_clear(t->waiters);
}

static void set_exit(struct acp_term *t, json_t *code, const char *signame)
{
	json_decref(t->exit);
	t->exit = json_pack("{s:O, s:s?}", "exitCode",
			    code ? code : json_null(), "signal", signame);
	if (!signame)
		json_object_set_new(t->exit, "signal", json_null());
	answer_waiters(t);
}

/*
 * A signal's name without "SIG" (glibc's sigabbrev_np, which musl lacks:
 * spctl is linked against either, Makefile), or NULL.
 */
static const char *signal_abbrev(int sig)
{
	static const char *const names[] = {
	    [SIGHUP] = "HUP",	    [SIGINT] = "INT",	    [SIGQUIT] = "QUIT",
	    [SIGILL] = "ILL",	    [SIGTRAP] = "TRAP",	    [SIGABRT] = "ABRT",
	    [SIGBUS] = "BUS",	    [SIGFPE] = "FPE",	    [SIGKILL] = "KILL",
	    [SIGUSR1] = "USR1",	    [SIGSEGV] = "SEGV",	    [SIGUSR2] = "USR2",
	    [SIGPIPE] = "PIPE",	    [SIGALRM] = "ALRM",	    [SIGTERM] = "TERM",
	    [SIGSTKFLT] = "STKFLT", [SIGCHLD] = "CHLD",	    [SIGCONT] = "CONT",
	    [SIGSTOP] = "STOP",	    [SIGTSTP] = "TSTP",	    [SIGTTIN] = "TTIN",
	    [SIGTTOU] = "TTOU",	    [SIGURG] = "URG",	    [SIGXCPU] = "XCPU",
	    [SIGXFSZ] = "XFSZ",	    [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF",
	    [SIGWINCH] = "WINCH",   [SIGIO] = "IO",	    [SIGPWR] = "PWR",
	    [SIGSYS] = "SYS",
	};

	if (sig > 0 && (size_t)sig < sizeof(names) / sizeof(names[0]))
		return names[sig];
	return NULL;
}

static void on_run_result(struct acp_term *t, json_t *res, json_t *err)
{
	int sig = (int)json_integer_value(json_object_get(res, "signal"));
	char name[32];

	client_close(&t->spd);
	t->spd.fd = -1;
	if (err && t->create_id) {
		/* Refused before it started: no terminal. */
		acp_spd_error(t->a, t->create_id, err);
		acp_term_free(t);
		return;
	}
	if (err) {
		fprintf(stderr, "spctl acp: terminal %s: ", t->id);
		ts_fputs(stderr,
			 json_string_value(json_object_get(err, "message"))
			     ?: "?");
		fputc('\n', stderr);
		set_exit(t, NULL, "SIGKILL");
		return;
	}
	if (sig > 0) {
		const char *ab = signal_abbrev(sig);
		snprintf(name, sizeof(name), "SIG%s", ab ? ab : "UNKNOWN");
		set_exit(t, NULL, name);
	} else {
		set_exit(t, json_object_get(res, "exit_code"), NULL);
	}
}

static void on_run_msg(void *data, json_t *msg)
{
	struct acp_term *t = data;
	const char *m = json_string_value(json_object_get(msg, "method"));
	json_t *params = json_object_get(msg, "params");
	json_t *id = json_object_get(msg, "id"), *d;

	if (!t->id[0] || t->spd.fd < 0)
		return; /* freed or ended by an earlier message */
	if (m && !id) {
		if (strcmp(m, rpc_notify_name(RPC_N_RUN_STARTED)) == 0) {
			/* Nothing is written to its stdin: it reads end of
			 * file, as with no stdin at all. */
			client_send(&t->spd, RPC_M_RUN_INPUT,
				    json_pack("{s:b}", "close", 1));
			if (t->create_id)
				acp_result(
				    t->a, t->create_id,
				    json_pack("{s:s}", "terminalId", t->id));
			json_decref(t->create_id);
			t->create_id = NULL;
		} else if (strcmp(m, rpc_notify_name(RPC_N_RUN_OUTPUT)) == 0) {
			if (json_is_string(d = json_object_get(params, "data")))
				out_add(t, json_string_value(d),
					json_string_length(d));
			else if (json_is_string(
				     d = json_object_get(params, "data_b64"))) {
				size_t n = 0;
				unsigned char *bin =
				    b64_decode(json_string_value(d),
					       json_string_length(d), &n);
				if (bin)
					out_add(t, (const char *)bin, n);
				free(bin);
			}
		} else {
			acp_side_note(m, params);
		}
		return;
	}
	if (json_integer_value(id) == t->spd_id)
		on_run_result(t, json_object_get(msg, "result"),
			      json_object_get(msg, "error"));
}

void acp_term_readable(struct acp_term *t)
{
	if (acp_conn_read(&t->spd, on_run_msg, t) < 0 && t->id[0] &&
	    t->spd.fd >= 0) {
		/* spd went away under the run. */
		if (t->create_id) {
			acp_error(t->a, t->create_id, -32603,
				  "spd closed the connection");
			acp_term_free(t);
			return;
		}
		client_close(&t->spd);
		t->spd.fd = -1;
		set_exit(t, NULL, "SIGKILL");
	}
}

void acp_term_kill(struct acp_term *t)
{
	if (t->spd.fd < 0)
		return;
	client_close(&t->spd);
	t->spd.fd = -1;
	if (t->create_id) {
		acp_error(t->a, t->create_id, -32603,
			  "the terminal was killed before it started");
		json_decref(t->create_id);
		t->create_id = NULL;
	}
	set_exit(t, NULL, "SIGKILL");
}

void acp_term_free(struct acp_term *t)
{
	struct acp *a = t->a;

	acp_term_kill(t);
	buf_free(&t->out);
	json_decref(t->exit);
	json_decref(t->waiters);
	json_decref(t->create_id);
	memset(t, 0, sizeof(*t));
	t->a = a;
	t->spd.fd = -1;
}

/* terminal/create: the command as a run in the sandbox, answered once it
 * has started (after an approval, when spd's policy asks). */
static void term_create(struct acp *a, json_t *id, json_t *params)
{
	const char *cmd = json_string_value(json_object_get(params, "command"));
	const char *cwd = json_string_value(json_object_get(params, "cwd"));
	json_t *args = json_object_get(params, "args"), *argv, *v, *p;
	json_int_t lim =
	    json_integer_value(json_object_get(params, "outputByteLimit"));
	struct acp_term *t = NULL;
	char errbuf[256];
	size_t i;

	for (i = 0; i < ACP_TERMINALS_MAX && !t; i++)
		if (!a->terms[i].id[0])
			t = &a->terms[i];
	if (!cmd || !*cmd) {
		acp_error(a, id, -32602, "command must be a string");
		return;
	}
	if (!t) {
		acp_error(a, id, -32603, "too many terminals (%d); release one",
			  ACP_TERMINALS_MAX);
		return;
	}
	/* A command with no args is a command line, as agents send it
	 * ("echo hi > f"): a shell runs it, and the policy judges that
	 * shell's command (as a permission naming it was judged). */
	argv = json_array_size(args) ? json_pack("[s]", cmd)
				     : json_pack("[s, s, s]", "sh", "-c", cmd);
	json_array_foreach(args, i, v)
	{
		if (!json_is_string(v)) {
			json_decref(argv);
			acp_error(a, id, -32602, "args must be strings");
			return;
		}
		json_array_append(argv, v);
	}
	/* One pipe for stdout and stderr: the terminal's output is one
	 * buffer, in the order the command wrote it. */
	p = json_pack("{s:o, s:b, s:b, s:b}", "argv", argv, "wait", 1, "stdin",
		      1, "merge_stderr", 1);
	/* ACP's env, [{name, value}], as cmd.run's object (spd drops the
	 * secret-looking names, as for any run). */
	if (json_array_size(json_object_get(params, "env"))) {
		json_t *env = json_object();
		json_array_foreach(json_object_get(params, "env"), i, v)
		{
			const char *n =
			    json_string_value(json_object_get(v, "name"));
			json_t *val = json_object_get(v, "value");
			if (n && json_is_string(val))
				json_object_set(env, n, val);
		}
		json_object_set_new(p, "env", env);
	}
	if (cwd) {
		if (!acp_rel_path(a, cwd)) {
			json_decref(p);
			acp_refused(a, "path",
				    "terminal/create: cwd outside the "
				    "workspace");
			acp_error(a, id, -32602,
				  "PATH-ESCAPE: cwd must be inside the "
				  "workspace");
			return;
		}
		json_object_set_new(p, "cwd", json_string(cwd));
	}
	if (a->operator)
		json_object_set_new(p, "session", json_string(a->session));
	/* --yes answers a terminal's ask as it does the agent's own. */
	if (a->yes)
		json_object_set_new(p, "yes", json_true());
	if (client_open(&t->spd, errbuf, sizeof(errbuf)) < 0) {
		json_decref(p);
		t->spd.fd = -1;
		acp_error(a, id, -32603, "cannot reach spd: %s", errbuf);
		return;
	}
	t->a = a;
	t->spd_id = client_send(&t->spd, RPC_M_CMD_RUN, p);
	if (t->spd_id < 0) {
		client_close(&t->spd);
		t->spd.fd = -1;
		acp_error(a, id, -32603, "cannot reach spd");
		return;
	}
	snprintf(t->id, sizeof(t->id), "term-%u", ++a->next_term);
	t->turn = a->turn;
	t->limit = lim > 0 && lim < ACP_TERMINAL_OUTPUT_MAX
		       ? (size_t)lim
		       : ACP_TERMINAL_OUTPUT_MAX;
	t->create_id = json_incref(id);
	t->waiters = json_array();
}

static struct acp_term *term_find(struct acp *a, json_t *id, json_t *params)
{
	const char *t =
	    json_string_value(json_object_get(params, "terminalId"));

	for (unsigned i = 0; t && i < ACP_TERMINALS_MAX; i++)
		if (a->terms[i].id[0] && !a->terms[i].create_id &&
		    strcmp(a->terms[i].id, t) == 0)
			return &a->terms[i];
	acp_error(a, id, -32602, "unknown terminalId");
	return NULL;
}

/* One of the agent's terminal/ requests (its sessionId checked). */
void acp_term_request(struct acp *a, const char *m, json_t *id, json_t *params)
{
	struct acp_term *t;

	if (strcmp(m, "terminal/create") == 0) {
		term_create(a, id, params);
		return;
	}
	if (!(t = term_find(a, id, params)))
		return;
	if (strcmp(m, "terminal/output") == 0) {
		json_t *r = json_pack("{s:o, s:b}", "output", out_json(&t->out),
				      "truncated", t->truncated);
		if (t->exit)
			json_object_set(r, "exitStatus", t->exit);
		acp_result(a, id, r);
	} else if (strcmp(m, "terminal/wait_for_exit") == 0) {
		if (t->exit)
			acp_result(a, id, json_deep_copy(t->exit));
		else
			json_array_append(t->waiters, id);
	} else if (strcmp(m, "terminal/kill") == 0) {
		acp_term_kill(t);
		acp_result(a, id, json_object());
	} else {
		acp_term_free(t);
		acp_result(a, id, json_object());
	}
}
