/*
 * spd's side of sandboxd (daemon/sandbox/sbx.h): starting the spawner with
 * no environment, typed messages over the socketpair, a run's output
 * pipes, its end, and sandboxd restarted when it dies.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/trace.h"
#include "common/util.h"
#include "daemon/log.h"
#include "daemon/sandbox/sbx.h"

/* One message waiting for the socket to drain. */
struct sbx_msg {
	struct sbx_msg *next;
	uint32_t type, id;
	void *body;
	size_t len;
	int fds[SBXP_RUN_FDS];
	size_t nfds;
};

/* One incarnation of sandboxd: freed once its process has exited and its
 * poll handle is closed. */
struct sbxd {
	struct sbx *s;
	uv_process_t proc;
	uv_poll_t poll;
	int sock;
	bool exited;
	bool lost;
	int handles;
	uint64_t started_ms;
};

struct sbx_probe_req {
	struct sbx_probe_req *next;
	uint32_t id;
	void (*cb)(void *data, const struct sbx_layers *l);
	void *data;
};

struct sbx {
	uv_loop_t *loop;
	char *path;
	struct sbxd *d; /* NULL while sandboxd is being restarted */
	int incarnations;
	uv_timer_t restart;
	bool restart_open;
	struct sbx_run *runs;
	int runs_alive; /* including finished ones whose handles close */
	struct sbx_probe_req *probes;
	struct sbx_msg *qhead, **qtail;
	uint32_t next_id;
	bool closing;
	void (*close_cb)(void *data);
	void *close_data;
	_Alignas(16) char msg[SBXP_MSG_MAX];
	/* A RUN is encoded here, then copied at its size: a fresh
	 * SBXP_MSG_MAX buffer per run cost its pages' faults every time. */
	_Alignas(16) char enc[SBXP_MSG_MAX];
	char rbuf[64 * 1024];
};

struct sbx_run {
	struct sbx *s;
	struct sbx_run *next, **pprev;
	uint32_t id;
	struct sbx_cbs cbs;
	void *data;
	uv_pipe_t out[2];
	bool eof[2];
	/* The command's stdin (spec.stdin_pipe): spd's write end, open
	 * until sbx_run_input_close or the run's end. */
	uv_pipe_t in;
	bool in_open;
	size_t in_queued; /* bytes written but not yet taken by the pipe */
	uv_timer_t drain;
	bool drain_started;
	int handles;
	size_t cap;
	size_t kept[2];
	uint64_t dropped[2];
	bool marked[2];
	bool exited, done, cancelled, sent_cancel;
	uint32_t kill_grace_ms;
	struct sbxp_exited ex;
	uint32_t nwarn;
	char warn[SBXP_WARN_MAX][SBXP_WARN_LEN];
};

static int sbxd_spawn(struct sbx *s);
static void sbxd_lost(struct sbxd *d, const char *why);
static void run_complete(struct sbx_run *r);
static void on_sbxd_io(uv_poll_t *h, int status, int events);

static void maybe_finish_close(struct sbx *s)
{
	if (!s->closing || s->d || s->incarnations || s->runs_alive ||
	    s->restart_open)
		return;
	void (*cb)(void *) = s->close_cb;
	void *data = s->close_data;

	free(s->path);
	free(s);
	if (cb)
		cb(data);
}

/* ---- the socket ---------------------------------------------------------- */

static void update_poll(struct sbx *s)
{
	if (!s->d || s->d->lost)
		return;
	uv_poll_start(&s->d->poll, UV_READABLE | (s->qhead ? UV_WRITABLE : 0),
		      on_sbxd_io);
}

static void msg_free(struct sbx_msg *m)
{
	for (size_t i = 0; i < m->nfds; i++)
		close(m->fds[i]);
	free(m->body);
	free(m);
}

static void flush_queue(struct sbx *s)
{
	while (s->qhead && s->d && !s->d->lost) {
		struct sbx_msg *m = s->qhead;
		int r;

		/* Stamped before the send: once sent, sandboxd may stamp its
		 * receipt before this process runs again. */
		if (m->type == SBXP_RUN)
			trace_stamp("sent");
		r = sbxp_send(s->d->sock, m->type, m->id, m->body, m->len,
			      m->fds, m->nfds);

		if (r == -EAGAIN)
			break;
		if (r < 0) {
			sbxd_lost(s->d, "sandboxd died (cannot write to it)");
			return;
		}
		s->qhead = m->next;
		if (!s->qhead)
			s->qtail = &s->qhead;
		msg_free(m);
	}
	update_poll(s);
}

static int enqueue(struct sbx *s, uint32_t type, uint32_t id, void *body,
		   size_t len, const int *fds, size_t nfds)
{
	struct sbx_msg *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->type = type;
	m->id = id;
	m->body = body;
	m->len = len;
	if (nfds)
		memcpy(m->fds, fds, nfds * sizeof(int));
	m->nfds = nfds;
	*s->qtail = m;
	s->qtail = &m->next;
	flush_queue(s);
	return 0;
}

static struct sbx_run *find_run(struct sbx *s, uint32_t id)
{
	for (struct sbx_run *r = s->runs; r; r = r->next)
		if (r->id == id)
			return r;
	return NULL;
}

static void copy_str(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src);
}

/* End a run that sandboxd will not report on (it died, or spd closes). */
static void run_fail(struct sbx_run *r, enum sbxp_err code, const char *msg)
{
	if (r->done)
		return;
	if (!r->exited) {
		memset(&r->ex, 0, sizeof(r->ex));
		r->ex.exit_code = -1;
		r->ex.error = code;
		copy_str(r->ex.error_msg, sizeof(r->ex.error_msg), msg);
		r->exited = true;
	}
	for (int i = 0; i < 2; i++) {
		if (!r->eof[i]) {
			r->eof[i] = true;
			uv_read_stop((uv_stream_t *)&r->out[i]);
		}
	}
	run_complete(r);
}

static void on_sbxd_handle_closed(uv_handle_t *h)
{
	struct sbxd *d = h->data;
	struct sbx *s = d->s;

	if (h == (uv_handle_t *)&d->poll)
		close(d->sock);
	if (--d->handles > 0)
		return;
	free(d);
	s->incarnations--;
	maybe_finish_close(s);
}

static void sbxd_lost(struct sbxd *d, const char *why)
{
	struct sbx *s = d->s;

	if (d->lost)
		return;
	d->lost = true;
	uv_poll_stop(&d->poll);
	uv_close((uv_handle_t *)&d->poll, on_sbxd_handle_closed);
	if (!d->exited)
		uv_process_kill(&d->proc, SIGKILL);
	if (s->d == d)
		s->d = NULL;
	while (s->qhead) {
		struct sbx_msg *m = s->qhead;

		s->qhead = m->next;
		msg_free(m);
	}
	s->qtail = &s->qhead;
	/* Every run sent to this sandboxd ended with it (its init had
	 * PR_SET_PDEATHSIG): say so. */
	for (struct sbx_run *r = s->runs, *next; r; r = next) {
		next = r->next;
		run_fail(r, SBXP_ERR_INTERNAL, why);
	}
	while (s->probes) {
		struct sbx_probe_req *p = s->probes;

		s->probes = p->next;
		p->cb(p->data, NULL);
		free(p);
	}
}

static void on_restart_timer(uv_timer_t *t)
{
	struct sbx *s = t->data;

	if (s->closing || s->d)
		return;
	if (sbxd_spawn(s) < 0)
		uv_timer_start(&s->restart, on_restart_timer,
			       SBX_RESTART_DELAY_MS, 0);
}

static void on_sbxd_exit(uv_process_t *p, int64_t status, int sig)
{
	struct sbxd *d = p->data;
	struct sbx *s = d->s;
	char why[96];
	uint64_t up = uv_now(s->loop) - d->started_ms;

	d->exited = true;
	if (sig)
		snprintf(why, sizeof(why), "sandboxd died (signal %d)", sig);
	else
		snprintf(why, sizeof(why), "sandboxd died (exit status %d)",
			 (int)status);
	sbxd_lost(d, why);
	uv_close((uv_handle_t *)p, on_sbxd_handle_closed);
	if (!s->closing && !s->d)
		uv_timer_start(
		    &s->restart, on_restart_timer,
		    up < SBX_RESTART_DELAY_MS ? SBX_RESTART_DELAY_MS : 0, 0);
}

static void on_started(struct sbx *s, const struct sbxp_hdr *h,
		       const struct sbxp_started *m)
{
	struct sbx_run *r = find_run(s, h->id);

	if (!r || r->exited)
		return;
	trace_stamp("started");
	r->nwarn = m->nwarn < SBXP_WARN_MAX ? m->nwarn : SBXP_WARN_MAX;
	for (uint32_t i = 0; i < r->nwarn; i++)
		copy_str(r->warn[i], SBXP_WARN_LEN, m->warn[i]);
}

static void on_listener(struct sbx *s, const struct sbxp_hdr *h,
			const struct sbxp_listener *m, int fd)
{
	struct sbx_run *r = find_run(s, h->id);

	(void)m;
	if (!r || r->exited || !r->cbs.on_listener) {
		close(fd);
		return;
	}
	r->cbs.on_listener(r->data, fd);
}

static void on_drain_timer(uv_timer_t *t)
{
	struct sbx_run *r = t->data;

	run_fail(r, SBXP_ERR_INTERNAL, "output still open after the run");
}

static void on_exited(struct sbx *s, const struct sbxp_hdr *h,
		      const struct sbxp_exited *m)
{
	struct sbx_run *r = find_run(s, h->id);

	if (!r || r->exited)
		return;
	trace_stamp("exited");
	r->ex = *m;
	r->ex.error_msg[SBXP_ERRMSG_LEN - 1] = '\0';
	r->exited = true;
	if (!r->eof[0] || !r->eof[1]) {
		r->drain_started = true;
		uv_timer_start(&r->drain, on_drain_timer, SBX_DRAIN_MS, 0);
	}
	run_complete(r);
}

/*
 * A PROBE_RESULT's body as spd may use it: each flag's byte 0 or 1, the
 * reserved bytes zero, each sentence ending within its field.  sandboxd is trusted, but spd reads
 * nothing off a socket it has not checked.  Returns 0, or -EPROTO.
 */
static int probe_result_check(const void *body, struct sbx_layers *ret)
{
	static const size_t flags[] = {
	    offsetof(struct sbx_layers, userns),
	    offsetof(struct sbx_layers, seccomp),
	    offsetof(struct sbx_layers, cgroup2),
	    offsetof(struct sbx_layers, tiocsti_disabled),
	    offsetof(struct sbx_layers, idmap_mounts),
	    offsetof(struct sbx_layers, run_init),
	};
	static const size_t whys[] = {
	    offsetof(struct sbx_layers, userns_why),
	    offsetof(struct sbx_layers, landlock_why),
	    offsetof(struct sbx_layers, seccomp_why),
	    offsetof(struct sbx_layers, cgroup2_why),
	    offsetof(struct sbx_layers, tiocsti_why),
	    offsetof(struct sbx_layers, idmap_why),
	    offsetof(struct sbx_layers, run_init_why),
	};
	const unsigned char *b = body;
	int abi;

	for (size_t i = 0; i < ARRAY_SIZE(flags); i++)
		if (b[flags[i]] > 1)
			return -EPROTO;
	for (size_t i = 0; i < sizeof(((struct sbx_layers *)0)->reserved); i++)
		if (b[offsetof(struct sbx_layers, reserved) + i])
			return -EPROTO;
	for (size_t i = 0; i < ARRAY_SIZE(whys); i++)
		if (!memchr(b + whys[i], '\0', SBX_WHY_MAX))
			return -EPROTO;
	memcpy(&abi, b + offsetof(struct sbx_layers, landlock_abi),
	       sizeof(abi));
	if (abi < 0 || abi > 1000)
		return -EPROTO;
	memcpy(ret, body, sizeof(*ret));
	return 0;
}

static void on_probe_result(struct sbx *s, const struct sbxp_hdr *h,
			    const struct sbx_layers *l)
{
	for (struct sbx_probe_req **pp = &s->probes; *pp; pp = &(*pp)->next) {
		struct sbx_probe_req *p = *pp;

		if (p->id != h->id)
			continue;
		*pp = p->next;
		p->cb(p->data, l);
		free(p);
		return;
	}
}

static void on_sbxd_io(uv_poll_t *h, int status, int events)
{
	struct sbxd *d = h->data;
	struct sbx *s = d->s;

	if (status < 0) {
		sbxd_lost(d, "sandboxd died (socket error)");
		return;
	}
	if (events & UV_WRITABLE)
		flush_queue(s);
	while (!d->lost && (events & UV_READABLE)) {
		struct sbxp_hdr hdr;
		int fds[SBXP_RUN_FDS];
		size_t nfds = 0;
		long n = sbxp_recv(d->sock, s->msg, &hdr, fds, &nfds);
		const void *body = s->msg;

		if (n == -EAGAIN)
			break;
		if (n == -EPIPE) {
			sbxd_lost(d, "sandboxd died (closed its socket)");
			break;
		}
		/* sandboxd sends only these types, each of its exact size,
		 * and a descriptor only with LISTENER (exactly one); anything
		 * else is a broken sandboxd. */
		if (n < 0 || n != sbxp_body_size(hdr.type) ||
		    nfds != (hdr.type == SBXP_LISTENER ? 1u : 0u)) {
			for (size_t i = 0; i < nfds; i++)
				close(fds[i]);
			sbxd_lost(d, "sandboxd broke the protocol");
			break;
		}
		switch (hdr.type) {
		case SBXP_LISTENER:
			on_listener(s, &hdr, body, fds[0]);
			break;
		case SBXP_STARTED:
			on_started(s, &hdr, body);
			break;
		case SBXP_EXITED: {
			const struct sbxp_exited *m = body;

			if (m->error >= SBXP_ERR__COUNT ||
			    m->ended >= SBXP_ENDED__COUNT)
				sbxd_lost(d, "sandboxd broke the protocol");
			else
				on_exited(s, &hdr, m);
			break;
		}
		case SBXP_PROBE_RESULT: {
			struct sbx_layers l;

			/* d->lost ends the loop. */
			if (probe_result_check(body, &l) < 0)
				sbxd_lost(d, "sandboxd broke the protocol");
			else
				on_probe_result(s, &hdr, &l);
			break;
		}
		default:
			sbxd_lost(d, "sandboxd broke the protocol");
			break;
		}
	}
}

static int sbxd_spawn(struct sbx *s)
{
	struct sbxd *d;
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	d = calloc(1, sizeof(*d));
	if (!d) {
		close(sv[0]);
		close(sv[1]);
		return -ENOMEM;
	}
	d->s = s;
	d->sock = sv[0];
	d->started_ms = uv_now(s->loop);
	fcntl(d->sock, F_SETFL, O_NONBLOCK);

	char *args[] = {s->path, trace_on() ? "--trace" : NULL, NULL};
	/* sandboxd gets no environment at all: nothing of spd's (keys,
	 * tokens) can reach a run through it. */
	char *env[] = {NULL};
	uv_stdio_container_t stdio[5] = {
	    {.flags = UV_IGNORE},
	    {.flags = UV_IGNORE},
	    /* Not spd's own stderr: started on demand by a client whose
	     * output a script captures, spd lets go of it once it listens,
	     * and sandboxd, started before that, must not keep it. */
	    {.flags = UV_INHERIT_FD, .data.fd = log_output_fd()},
	    {.flags = UV_INHERIT_FD, .data.fd = sv[1]},
	    /* The step trace's file, written to only (SBXD_TRACE_FD). */
	    {.flags = UV_INHERIT_FD, .data.fd = trace_fd()},
	};
	uv_process_options_t o = {
	    .exit_cb = on_sbxd_exit,
	    .file = s->path,
	    .args = args,
	    .env = env,
	    .stdio_count = trace_on() ? 5 : 4,
	    .stdio = stdio,
	};
	d->proc.data = d;
	d->poll.data = d;
	s->incarnations++;
	r = uv_spawn(s->loop, &d->proc, &o);
	close(sv[1]);
	if (r < 0) {
		/* The handle is initialised even on failure and must be
		 * closed; the socket goes with the poll handle's close. */
		d->lost = d->exited = true;
		d->handles = 1;
		close(d->sock);
		d->sock = -1;
		uv_close((uv_handle_t *)&d->proc, on_sbxd_handle_closed);
		return r;
	}
	d->handles = 2;
	uv_poll_init(s->loop, &d->poll, d->sock);
	d->poll.data = d;
	uv_poll_start(&d->poll, UV_READABLE, on_sbxd_io);
	s->d = d;
	update_poll(s);
	if (s->qhead)
		flush_queue(s);
	return 0;
}

int sbx_start(uv_loop_t *loop, const char *sandboxd_path, struct sbx **ret)
{
	struct sbx *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->qtail = &s->qhead;
	s->path = strdup(sandboxd_path);
	if (!s->path) {
		free(s);
		return -ENOMEM;
	}
	uv_timer_init(loop, &s->restart);
	s->restart.data = s;
	s->restart_open = true;
	r = sbxd_spawn(s);
	if (r < 0) {
		sbx_close(s, NULL, NULL);
		return r;
	}
	*ret = s;
	return 0;
}

pid_t sbx_pid(const struct sbx *s)
{
	return s && s->d && !s->d->lost ? s->d->proc.pid : -1;
}

/* ---- runs ------------------------------------------------------------------ */

static void on_run_handle_closed(uv_handle_t *h)
{
	struct sbx_run *r = h->data;
	struct sbx *s = r->s;

	if (--r->handles > 0)
		return;
	free(r);
	s->runs_alive--;
	maybe_finish_close(s);
}

static void run_complete(struct sbx_run *r)
{
	struct sbx_result res;
	const char *warnings[SBXP_WARN_MAX + 1];

	if (r->done || !r->exited || !r->eof[0] || !r->eof[1])
		return;
	r->done = true;
	*r->pprev = r->next;
	if (r->next)
		r->next->pprev = r->pprev;

	memset(&res, 0, sizeof(res));
	res.exit_code = r->ex.exit_code;
	res.term_signal = r->ex.term_signal;
	res.timed_out = r->ex.timed_out;
	res.cancelled = r->ex.cancelled || r->cancelled;
	res.ended = (enum sbxp_ended)r->ex.ended;
	res.duration_us = r->ex.duration_us;
	res.bytes_dropped[0] = r->dropped[0];
	res.bytes_dropped[1] = r->dropped[1];
	res.error = (enum sbxp_err)r->ex.error;
	res.error_msg = r->ex.error_msg[0] ? r->ex.error_msg : NULL;
	for (uint32_t i = 0; i < r->nwarn; i++)
		warnings[i] = r->warn[i];
	warnings[r->nwarn] = NULL;
	res.warnings = warnings;
	if (r->cbs.on_done)
		r->cbs.on_done(r->data, &res);

	for (int i = 0; i < 2; i++)
		uv_close((uv_handle_t *)&r->out[i], on_run_handle_closed);
	uv_close((uv_handle_t *)&r->drain, on_run_handle_closed);
	sbx_run_input_close(r);
}

struct input_req {
	uv_write_t w;
	struct sbx_run *r;
	size_t len;
	char data[];
};

static void on_input_written(uv_write_t *w, int status)
{
	struct input_req *q = (struct input_req *)(void *)w;

	/* After uv_close the run may be freed only once this has run:
	 * libuv cancels pending writes before the close callback. */
	q->r->in_queued -= q->len;
	(void)status;
	free(q);
}

int sbx_run_input(struct sbx_run *r, const char *buf, size_t len)
{
	struct input_req *q;
	uv_buf_t b;
	int rc;

	if (!r || !r->in_open)
		return -EPIPE;
	if (len > SBX_INPUT_QUEUE_MAX - r->in_queued)
		return -ENOBUFS;
	if (!(q = malloc(sizeof(*q) + len)))
		return -ENOMEM;
	q->r = r;
	q->len = len;
	memcpy(q->data, buf, len);
	b = uv_buf_init(q->data, (unsigned)len);
	rc = uv_write(&q->w, (uv_stream_t *)&r->in, &b, 1, on_input_written);
	if (rc < 0) {
		free(q);
		return rc;
	}
	r->in_queued += len;
	return 0;
}

void sbx_run_input_close(struct sbx_run *r)
{
	if (!r || !r->in_open)
		return;
	r->in_open = false;
	uv_close((uv_handle_t *)&r->in, on_run_handle_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct sbx_run *r = h->data;

	*buf = uv_buf_init(r->s->rbuf, sizeof(r->s->rbuf));
}

static void deliver(struct sbx_run *r, int i, const char *buf, size_t n)
{
	size_t room = r->cap - r->kept[i];
	size_t take = n < room ? n : room;

	if (take) {
		r->kept[i] += take;
		if (r->cbs.on_output)
			r->cbs.on_output(r->data, i + 1, buf, take);
	}
	if (n > take) {
		r->dropped[i] += n - take;
		if (!r->marked[i]) {
			char m[128];
			int k = snprintf(m, sizeof(m),
					 "\n[spd: output over %zu bytes; the "
					 "rest is dropped]\n",
					 r->cap);

			r->marked[i] = true;
			if (r->cbs.on_output)
				r->cbs.on_output(r->data, i + 1, m, (size_t)k);
		}
	}
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct sbx_run *r = st->data;
	int i = st == (uv_stream_t *)&r->out[0] ? 0 : 1;

	if (n > 0) {
		deliver(r, i, buf->base, (size_t)n);
		return;
	}
	if (n == 0)
		return;
	/* EOF or an error: this stream is over. */
	uv_read_stop(st);
	r->eof[i] = true;
	run_complete(r);
}

static char *const empty_list[] = {NULL};

/* The RUN message of spec into enc (at least SBXP_MSG_MAX bytes): its
 * length, or -errno. */
static long run_encode(struct sbxp_run *enc, const struct sbx_spec *spec,
		       const char *home)
{
	const char *const *lists[SBXP_L__COUNT];
	long len = -EINVAL;

#define L(x) ((const char *const *)((x) ? (x) : empty_list))
	lists[SBXP_L_ARGV] = L(spec->argv);
	lists[SBXP_L_ENV] = L(spec->envp);
	lists[SBXP_L_WRITABLE] = L(spec->writable);
	lists[SBXP_L_HIDDEN] = L(spec->hidden);
	lists[SBXP_L_READONLY] = L(spec->readonly);
	lists[SBXP_L_EMPTY] = L(spec->empty_files);
	lists[SBXP_L_RO_BINDS] = L(spec->ro_binds);
	lists[SBXP_L_LINKS] = (const char *const *)empty_list;
	lists[SBXP_L_LINK_RO_DIRS] = (const char *const *)empty_list;
#undef L
	memset(enc, 0, sizeof(*enc));
	enc->net = (uint32_t)spec->net;
	enc->broker_port = spec->broker_port;
	enc->timeout_ms = spec->timeout_ms;
	enc->flags = (spec->best_effort ? SBXP_RUN_BEST_EFFORT : 0) |
		     (spec->stdin_pipe ? SBXP_RUN_STDIN : 0) |
		     (spec->merge_stderr ? SBXP_RUN_MERGED : 0);
	enc->run_uid = spec->run_uid;
	enc->run_gid = spec->run_gid;
	memcpy(enc->rlimits, spec->rlimits, sizeof(enc->rlimits));
	if (spec->link_names) {
		enc->flags |= SBXP_RUN_LINKS_LISTED;
		lists[SBXP_L_LINKS] = (const char *const *)spec->link_names;
		if (spec->link_ro_dirs)
			lists[SBXP_L_LINK_RO_DIRS] = spec->link_ro_dirs;
		len = sbxp_run_encode(enc, spec->workspace, spec->cwd,
				      home && home[0] == '/' ? home : NULL,
				      lists);
		/* A list that does not fit leaves the check to the full
		 * walk: the list only ever saves time. */
		if (len < 0) {
			enc->flags &= ~SBXP_RUN_LINKS_LISTED;
			lists[SBXP_L_LINKS] = (const char *const *)empty_list;
			lists[SBXP_L_LINK_RO_DIRS] =
			    (const char *const *)empty_list;
		}
	}
	if (!(enc->flags & SBXP_RUN_LINKS_LISTED))
		len = sbxp_run_encode(enc, spec->workspace, spec->cwd,
				      home && home[0] == '/' ? home : NULL,
				      lists);
	return len;
}

int sbx_run(struct sbx *s, const struct sbx_spec *spec,
	    const struct sbx_cbs *cbs, void *data, struct sbx_run **ret)
{
	struct sbxp_run *enc = (struct sbxp_run *)(void *)s->enc, *m = NULL;
	struct sbx_run *r = NULL;
	uv_file p[3][2] = {{-1, -1}, {-1, -1}, {-1, -1}};
	const char *home = spec->home ? spec->home : getenv("HOME");
	long len;
	int fds[SBXP_RUN_FDS], rc;
	size_t nfds = 0;

	if (s->closing)
		return -ESHUTDOWN;
	if (!spec->argv || !spec->argv[0] || !spec->workspace ||
	    spec->net < SBX_NET_NONE || spec->net >= SBX_NET__COUNT ||
	    (spec->net == SBX_NET_BROKER || spec->net == SBX_NET_PROXY) !=
		(spec->broker_port != 0) ||
	    spec->kill_grace_ms > SBXP_CANCEL_GRACE_MAX_MS)
		return -EINVAL;
	/* Counted with runs whose handles are still closing: spd's count is
	 * never below sandboxd's, so sandboxd never refuses for want of a
	 * slot a reserve promised. */
	if ((unsigned)s->runs_alive >=
	    (spec->slots_max && spec->slots_max < SBXP_RUNS_MAX
		 ? spec->slots_max
		 : SBXP_RUNS_MAX))
		return -EAGAIN;
	len = run_encode(enc, spec, home);
	if (len < 0)
		return (int)len;
	r = calloc(1, sizeof(*r));
	if (!r) {
		rc = -ENOMEM;
		goto fail;
	}
	if (!(m = malloc((size_t)len))) {
		rc = -ENOMEM;
		goto fail;
	}
	memcpy(m, s->enc, (size_t)len);
	/* The command writes straight into these; spd keeps the read ends.
	 * Both ends are close-on-exec here; sandboxd receives its copies of
	 * the write ends over the socket.  Merged: one pipe, on the
	 * command's 1 and 2 both. */
	if ((rc = uv_pipe(p[0], UV_NONBLOCK_PIPE, 0)) < 0 ||
	    (!spec->merge_stderr &&
	     (rc = uv_pipe(p[1], UV_NONBLOCK_PIPE, 0)) < 0))
		goto fail;
	/* The stdin pipe the other way round: spd writes, the command
	 * reads from the end sandboxd passes on.  Only spd's end is
	 * non-blocking: the command sees an ordinary pipe. */
	if (spec->stdin_pipe && (rc = uv_pipe(p[2], 0, UV_NONBLOCK_PIPE)) < 0)
		goto fail;

	r->s = s;
	r->id = ++s->next_id ? s->next_id : ++s->next_id;
	r->cbs = *cbs;
	r->data = data;
	r->cap = spec->output_cap ? spec->output_cap : SBX_OUTPUT_CAP_DEFAULT;
	r->kill_grace_ms = spec->kill_grace_ms;
	for (int i = 0; i < 2; i++) {
		uv_pipe_init(s->loop, &r->out[i], 0);
		r->out[i].data = r;
		/* Merged: out[1] stays an unopened handle, at its end. */
		if (p[i][0] < 0) {
			r->eof[i] = true;
			continue;
		}
		uv_pipe_open(&r->out[i], p[i][0]);
		p[i][0] = -1;
		uv_read_start((uv_stream_t *)&r->out[i], on_alloc, on_read);
		fds[nfds++] = p[i][1];
	}
	uv_timer_init(s->loop, &r->drain);
	r->drain.data = r;
	r->handles = 3;
	if (spec->stdin_pipe) {
		uv_pipe_init(s->loop, &r->in, 0);
		r->in.data = r;
		uv_pipe_open(&r->in, p[2][1]);
		p[2][1] = -1;
		r->in_open = true;
		r->handles++;
		fds[nfds++] = p[2][0];
	}
	s->runs_alive++;
	r->next = s->runs;
	r->pprev = &s->runs;
	if (s->runs)
		s->runs->pprev = &r->next;
	s->runs = r;

	rc = enqueue(s, SBXP_RUN, r->id, m, (size_t)len, fds, nfds);
	if (rc < 0) {
		for (size_t i = 0; i < nfds; i++)
			close(fds[i]);
		free(m);
		/* Handles are open: end it through the normal path, later. */
		run_fail(r, SBXP_ERR_INTERNAL, "out of memory");
		return rc;
	}
	if (ret)
		*ret = r;
	return 0;
fail:
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 2; k++)
			if (p[i][k] >= 0)
				close(p[i][k]);
	free(m);
	free(r);
	return rc;
}

void sbx_run_cancel(struct sbx_run *r)
{
	struct sbxp_cancel *m;

	if (!r || r->done || r->cancelled)
		return;
	r->cancelled = true;
	if (r->exited)
		return;
	m = calloc(1, sizeof(*m));
	if (m)
		m->grace_ms = r->kill_grace_ms;
	if (!m ||
	    enqueue(r->s, SBXP_CANCEL, r->id, m, sizeof(*m), NULL, 0) < 0) {
		free(m);
		run_fail(r, SBXP_ERR_INTERNAL, "out of memory");
	}
}

int sbx_probe(struct sbx *s, uint32_t run_uid, uint32_t run_gid,
	      void (*cb)(void *data, const struct sbx_layers *l), void *data)
{
	struct sbx_probe_req *p;
	struct sbxp_probe *m;
	int r;

	if (s->closing)
		return -ESHUTDOWN;
	p = calloc(1, sizeof(*p));
	m = calloc(1, sizeof(*m));
	if (!p || !m) {
		free(p);
		free(m);
		return -ENOMEM;
	}
	p->id = ++s->next_id;
	p->cb = cb;
	p->data = data;
	m->run_uid = run_uid;
	m->run_gid = run_gid;
	r = enqueue(s, SBXP_PROBE, p->id, m, sizeof(*m), NULL, 0);
	if (r < 0) {
		free(p);
		free(m);
		return r;
	}
	p->next = s->probes;
	s->probes = p;
	return 0;
}

static void on_restart_closed(uv_handle_t *h)
{
	struct sbx *s = h->data;

	s->restart_open = false;
	maybe_finish_close(s);
}

void sbx_close(struct sbx *s, void (*cb)(void *data), void *data)
{
	if (!s) {
		if (cb)
			cb(data);
		return;
	}
	if (s->closing)
		return;
	s->closing = true;
	s->close_cb = cb;
	s->close_data = data;
	for (struct sbx_run *r = s->runs, *next; r; r = next) {
		next = r->next;
		run_fail(r, SBXP_ERR_INTERNAL, "spd is closing");
	}
	uv_timer_stop(&s->restart);
	uv_close((uv_handle_t *)&s->restart, on_restart_closed);
	/* Closing the socket is sandboxd's signal to kill every run and
	 * exit; the exit callback then closes the process handle. */
	if (s->d)
		sbxd_lost(s->d, "spd is closing");
	maybe_finish_close(s);
}
