/*
 * sandboxd: the only process that starts untrusted commands (docs/design.md,
 * "Processes").  spd starts it with an empty environment and one end of
 * a SOCK_SEQPACKET socketpair on descriptor 3, and speaks proto/sandbox.h
 * over it.  Single-threaded: one blocking poll over the socket, each
 * run's pidfd and report pipe, with the nearest deadline as timeout.  A
 * message of unknown type or wrong length means spd is broken or not spd:
 * sandboxd kills every run and exits.  So it does when the socket closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/trace.h"
#include "common/util.h"
#include "proto/sandbox.h"
#include "sandboxd/linux/spawn.h"

/* The socket to spd, by convention. */
#define SBXD_SOCK_FD 3
/* The step trace's file when started with --trace (common/trace.h). */
#define SBXD_TRACE_FD 4
/* Runs at once (proto/sandbox.h); spd queues nothing and keeps below it,
 * so beyond this a RUN is refused with INTERNAL. */
#define SBXD_RUNS_MAX SBXP_RUNS_MAX
/* How long after a run's EXITED the next spare is made (spawn.h): its
 * namespaces, mounts and sandboxd-init's exec, a millisecond of CPU here,
 * would otherwise run while spd answers the client and the client exits,
 * on the same two CPUs (bench/README.md, twelfth pass).  An empty run's
 * init is let go as long after its EXITED, and the run's namespaces come
 * down then (release_inits; init.h, INIT_LINGER_MS). */
#define SBXD_SPARE_DELAY_NS 1000000ull

static struct spawn_ctx ctx;
static struct spawn_run runs[SBXD_RUNS_MAX];
/* Inits whose run is over (EXITED sent) but which have not exited yet:
 * reaped when their pidfd says they have (spawn_release).  status_fd,
 * until closed at release_ns (release_inits), keeps an empty run's init
 * waiting (init.h, INIT_LINGER_MS). */
static struct exiting {
	int pidfd, status_fd;
	uint64_t release_ns;
} exiting[SBXD_RUNS_MAX];
static size_t nexiting;
static size_t nruns;
/* When to make the spare (spawn_spare), or 0: not due. */
static uint64_t spare_due_ns;
static _Alignas(16) char msgbuf[SBXP_MSG_MAX];

static void die(const char *why) __attribute__((noreturn));

static void send_or_die(uint32_t type, uint32_t id, const void *body,
			size_t len)
{
	if (sbxp_send(SBXD_SOCK_FD, type, id, body, len, NULL, 0) < 0)
		die("cannot write to spd");
}

static struct spawn_run *find_run(uint32_t id)
{
	for (size_t i = 0; i < nruns; i++)
		if (runs[i].id == id)
			return &runs[i];
	return NULL;
}

/* Let the inits of runs that are over exit once their time has come
 * (UINT64_MAX: every one): their runs' namespaces come down now (init.h,
 * INIT_LINGER_MS). */
static void release_inits(uint64_t now)
{
	for (size_t k = 0; k < nexiting; k++) {
		if (exiting[k].status_fd < 0 || exiting[k].release_ns > now)
			continue;
		close(exiting[k].status_fd);
		exiting[k].status_fd = -1;
	}
}

/* Reap exiting[k], which has exited or is let go now, and forget it. */
static void reap_exiting(size_t k)
{
	if (exiting[k].status_fd >= 0)
		close(exiting[k].status_fd);
	spawn_reap_pidfd(exiting[k].pidfd);
	exiting[k] = exiting[--nexiting];
}

/* End every run: kill each pid namespace and reap its init. */
static void kill_all(void)
{
	struct sbxp_exited e;

	for (size_t i = 0; i < nruns; i++)
		spawn_kill(&runs[i]);
	for (size_t i = 0; i < nruns; i++) {
		int pidfd, status_fd;

		spawn_finish(&runs[i], &e);
		pidfd = spawn_release(&runs[i], &status_fd);
		if (status_fd >= 0)
			close(status_fd);
		if (pidfd >= 0)
			spawn_reap_pidfd(pidfd);
	}
	nruns = 0;
	release_inits(UINT64_MAX);
	while (nexiting > 0)
		reap_exiting(nexiting - 1);
}

static void die(const char *why)
{
	/* No log of our own: spd sees the exit status and journals it. */
	kill_all();
	(void)why;
	_exit(2);
}

static void on_run(const struct sbxp_hdr *h, const void *body, int *fds,
		   size_t nfds)
{
	struct sbxp_run_view v;
	struct sbxp_exited refusal;
	int r;

	if (nfds < 1 || find_run(h->id))
		die("bad RUN");
	r = sbxp_run_decode(body, h->len, &v);
	/* The descriptors must be exactly what the flags announce: a
	 * stray one would otherwise become some run's stdin or stderr. */
	if (r == 0 && nfds != sbxp_run_nfds(v.msg->flags))
		die("bad RUN descriptors");
	if (r == -ENOMEM) {
		memset(&refusal, 0, sizeof(refusal));
		refusal.exit_code = -1;
		refusal.error = SBXP_ERR_INTERNAL;
		snprintf(refusal.error_msg, sizeof(refusal.error_msg),
			 "out of memory");
		send_or_die(SBXP_EXITED, h->id, &refusal, sizeof(refusal));
		return;
	}
	if (r < 0)
		die("malformed RUN");
	if (nruns == SBXD_RUNS_MAX) {
		memset(&refusal, 0, sizeof(refusal));
		refusal.exit_code = -1;
		refusal.error = SBXP_ERR_INTERNAL;
		snprintf(refusal.error_msg, sizeof(refusal.error_msg),
			 "too many runs at once (%d)", SBXD_RUNS_MAX);
		send_or_die(SBXP_EXITED, h->id, &refusal, sizeof(refusal));
	} else if (spawn_start(
		       &ctx, h->id, &v, fds[0],
		       /* SBXP_RUN_MERGED: one pipe on 1 and 2. */
		       (v.msg->flags & SBXP_RUN_MERGED) ? fds[0] : fds[1],
		       (v.msg->flags & SBXP_RUN_STDIN) ? fds[nfds - 1] : -1,
		       &runs[nruns], &refusal) < 0) {
		send_or_die(SBXP_EXITED, h->id, &refusal, sizeof(refusal));
	} else {
		struct spawn_run *run = &runs[nruns++];

		/* The broker's listener goes to spd before STARTED can. */
		if (run->broker_fd >= 0) {
			struct sbxp_listener l = {
			    .port = v.msg->broker_port,
			    .service = v.msg->net == SBX_NET_PROXY
					   ? SBXP_SERVICE_PROXY
					   : SBXP_SERVICE_BROKER};

			if (sbxp_send(SBXD_SOCK_FD, SBXP_LISTENER, h->id, &l,
				      sizeof(l), &run->broker_fd, 1) < 0)
				die("cannot write to spd");
			close(run->broker_fd);
			run->broker_fd = -1;
		}
	}
	sbxp_run_view_free(&v);
}

static void on_cancel(const struct sbxp_hdr *h, const void *body, int *fds,
		      size_t nfds)
{
	const struct sbxp_cancel *m = body;
	struct spawn_run *run = find_run(h->id);

	if (m->grace_ms > SBXP_CANCEL_GRACE_MAX_MS)
		die("bad CANCEL");
	/* A CANCEL may cross the run's EXITED on the wire: not an error. */
	if (!run || run->cancelled)
		return;
	run->cancelled = true;
	/* SIGTERM first, so that the command can finish what it was
	 * writing; what is left after the grace is killed (main loop).
	 * Before the start, once it has started: its init handles SIGTERM
	 * from then on (init.h, FD_REPORT). */
	if (m->grace_ms && !run->killed) {
		if (run->started)
			spawn_term(run);
		else
			run->term_pending = true;
		run->kill_ns =
		    spawn_now_ns() + (uint64_t)m->grace_ms * 1000000ull;
	} else {
		spawn_kill(run);
	}
}

static void on_probe(const struct sbxp_hdr *h, const void *body, int *fds,
		     size_t nfds)
{
	const struct sbxp_probe *p = body;
	const struct sbx_layers *l = spawn_probe(&ctx);

	send_or_die(SBXP_PROBE_RESULT, h->id, l, sizeof(*l));
	/* spd probes once sandboxd starts: what the first run would make,
	 * now (its filters and namespaces), and its spare once idle. */
	spawn_prepare(&ctx, p->run_uid, p->run_gid);
	if (nruns == 0 && !spare_due_ns)
		spare_due_ns = spawn_now_ns();
}

static const struct {
	uint32_t type;
	bool fds; /* may carry descriptors */
	void (*handler)(const struct sbxp_hdr *h, const void *body, int *fds,
			size_t nfds);
} handlers[] = {
    {SBXP_RUN, true, on_run},
    {SBXP_CANCEL, false, on_cancel},
    {SBXP_PROBE, false, on_probe},
};

static void on_message(void)
{
	struct sbxp_hdr h;
	int fds[SBXP_RUN_FDS];
	size_t nfds = 0;
	long n;

	n = sbxp_recv(SBXD_SOCK_FD, msgbuf, &h, fds, &nfds);
	if (n == -EAGAIN)
		return;
	if (n == -EPIPE) {
		kill_all();
		_exit(0);
	}
	if (n < 0)
		die("bad message");
	for (size_t i = 0; i < ARRAY_SIZE(handlers); i++) {
		long want = sbxp_body_size(h.type);

		if (handlers[i].type != h.type)
			continue;
		/* RUN's exact length is checked by its decoder. */
		if ((h.type == SBXP_RUN ? n < want : n != want) ||
		    (nfds && !handlers[i].fds))
			die("wrong length");
		handlers[i].handler(&h, msgbuf, fds, nfds);
		for (size_t k = 0; k < nfds; k++)
			close(fds[k]);
		return;
	}
	die("unknown type");
}

static void finish_run(size_t i)
{
	struct spawn_run *run = &runs[i];
	struct sbxp_exited e;
	int mntns_fd = run->mntns_fd, pidfd, status_fd;
	uint64_t due;

	spawn_finish(run, &e);
	/* A command that ran was announced first, even when its exec was
	 * seen together with its exit. */
	if (!run->failed && !run->started)
		send_or_die(SBXP_STARTED, run->id, &run->info,
			    sizeof(run->info));
	/* The stamps are written before spd can hear of the end, so that
	 * they are in the file by the time the client has its answer. */
	trace_stamp("exited");
	trace_flush();
	send_or_die(SBXP_EXITED, run->id, &e, sizeof(e));
	due = spawn_now_ns() + SBXD_SPARE_DELAY_NS;
	if ((pidfd = spawn_release(run, &status_fd)) >= 0) {
		/* Full only if inits outlast their runs by many: let the
		 * oldest go and wait for it rather than lose one. */
		if (nexiting == SBXD_RUNS_MAX)
			reap_exiting(0);
		exiting[nexiting++] = (struct exiting){pidfd, status_fd, due};
	}
	runs[i] = runs[--nruns];
	/* Idle until spd's next message: the time to clone the next run's
	 * init ahead (spawn.h, the spare), once spd has answered its client
	 * (SBXD_SPARE_DELAY_NS).  A run that comes first is cloned anew. */
	spare_due_ns = due;
	/* sandboxd's hold on the run's mounts; init's goes when it exits. */
	if (mntns_fd >= 0)
		close(mntns_fd);
}

/* Until the next deadline, the end of a cancelled run's grace or the
 * spare's time; NULL: none. */
static struct timespec *poll_timeout(struct timespec *ts)
{
	uint64_t now = spawn_now_ns(), next = spare_due_ns;

	for (size_t i = 0; i < nruns; i++) {
		uint64_t d = runs[i].deadline_ns, k = runs[i].kill_ns;

		if (d && !runs[i].timed_out && (!next || d < next))
			next = d;
		if (k && !runs[i].killed && (!next || k < next))
			next = k;
	}
	for (size_t k = 0; k < nexiting; k++) {
		uint64_t d = exiting[k].release_ns;

		if (exiting[k].status_fd >= 0 && (!next || d < next))
			next = d;
	}
	if (!next)
		return NULL;
	next = next > now ? next - now : 0;
	ts->tv_sec = (time_t)(next / 1000000000ull);
	ts->tv_nsec = (long)(next % 1000000000ull);
	return ts;
}

/*
 * An exec keeps ignored signals ignored: one that whoever started sandboxd
 * ignored would stay ignored in every command.  Each back to its default,
 * once (raw: glibc refuses its own real-time signals); handlers (a
 * sanitizer's) are left alone.  The blocked mask is emptied too.
 */
static void reset_ignored_signals(void)
{
	struct {
		void *handler;
		unsigned long flags;
		void *restorer;
		uint64_t mask;
	} old, dfl = {SIG_DFL, 0, NULL, 0};
	sigset_t none;

	for (int sig = 1; sig <= 64; sig++) {
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		memset(&old, 0, sizeof(old));
		if (syscall(SYS_rt_sigaction, sig, NULL, &old, 8) == 0 &&
		    old.handler == SIG_IGN)
			syscall(SYS_rt_sigaction, sig, &dfl, NULL, 8);
	}
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
}

int main(int argc, char **argv)
{
	bool trace = argc == 2 && strcmp(argv[1], "--trace") == 0;

	struct pollfd pfd[2 + 4 * SBXD_RUNS_MAX];
	struct stat st;

	/* A person who found sandboxd in libexec: what it is, and that it
	 * is not theirs to start. */
	if (argc == 2 &&
	    (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("sandboxd: spd's sandbox spawner, the only process that "
		       "starts the\n"
		       "commands agents ask for, each in its own namespaces "
		       "under Landlock\n"
		       "and seccomp.  spd starts it (descriptor 3 is spd's "
		       "socket); it is\n"
		       "not run by hand.  See sandboxd(8) and spd(8).\n");
		return 0;
	}

	/* Descriptor 3 must be spd's socket; anything else we were given
	 * is closed, so no run can inherit it. */
	if (fstat(SBXD_SOCK_FD, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "sandboxd: descriptor 3 is not spd's socket; "
				"sandboxd is started by spd\n");
		return 2;
	}
	close_range(trace ? SBXD_TRACE_FD + 1 : SBXD_SOCK_FD + 1, ~0u, 0);
	if (trace && trace_adopt(SBXD_TRACE_FD, "sandboxd") < 0)
		close(SBXD_TRACE_FD);
	fcntl(SBXD_SOCK_FD, F_SETFD, FD_CLOEXEC);
	reset_ignored_signals();
	/* The one sandboxd ignores; each command gets it back (spawn.c). */
	signal(SIGPIPE, SIG_IGN);
	/* spd runs with umask 077 to keep its own files private; a run's
	 * mount points and files need the usual 022, or an unprivileged run
	 * uid cannot walk the directories made above its workspace. */
	umask(022);
	spawn_ctx_init(&ctx);

	for (;;) {
		struct timespec ts;
		size_t np = 0;
		int n;

		pfd[np++] = (struct pollfd){SBXD_SOCK_FD, POLLIN, 0};
		for (size_t i = 0; i < nruns; i++) {
			pfd[np++] = (struct pollfd){runs[i].pidfd, POLLIN, 0};
			pfd[np++] =
			    (struct pollfd){runs[i].report_fd, POLLIN, 0};
			/* Until init's status is read: it may say the run
			 * is over before init has exited. */
			pfd[np++] = (struct pollfd){runs[i].have_status ||
							    runs[i].status_eof
							? -1
							: runs[i].status_fd,
						    POLLIN, 0};
		}
		for (size_t k = 0; k < nexiting; k++)
			pfd[np++] =
			    (struct pollfd){exiting[k].pidfd, POLLIN, 0};
		/* The spare's 'r': the time to heat it (spawn.h). */
		size_t spare_i = np;
		int heat = spawn_spare_wants_heat(&ctx);
		if (heat >= 0)
			pfd[np++] =
			    (struct pollfd){ctx.spares[heat].sock, POLLIN, 0};
		n = ppoll(pfd, np, poll_timeout(&ts), NULL);
		if (n < 0 && errno != EINTR)
			die("poll");

		uint64_t now = spawn_now_ns();
		/* The spare, when due; not while spd's next message waits:
		 * that run would wait for the spare to be ready instead of
		 * being cloned. */
		if (spare_due_ns && spare_due_ns <= now &&
		    !(n > 0 && pfd[0].revents)) {
			spare_due_ns = 0;
			spawn_spare(&ctx);
		}
		/* After the spare, which the next run wants first; not held
		 * back by spd's messages as the spare is, nor by later runs'
		 * ends, which put the spare off. */
		release_inits(now);
		/* Deadlines, and cancelled runs whose grace after SIGTERM
		 * is over: kill the run; its EXITED follows its death. */
		for (size_t i = 0; i < nruns; i++) {
			if (runs[i].deadline_ns && !runs[i].timed_out &&
			    runs[i].deadline_ns <= now && !runs[i].cancelled) {
				runs[i].timed_out = true;
				spawn_kill(&runs[i]);
			}
			if (runs[i].kill_ns && !runs[i].killed &&
			    runs[i].kill_ns <= now)
				spawn_kill(&runs[i]);
		}
		if (n <= 0)
			continue;
		/* Not while spd's next message waits: that run would wait
		 * for the heat instead of taking the spare as it is. */
		if (spare_i < np && pfd[spare_i].revents && !pfd[0].revents)
			spawn_spare_heat(&ctx);

		/* Inits that have exited since their run's EXITED, first:
		 * their pfd entries follow the runs', and finishing a run
		 * below may add to them. */
		for (size_t k = nexiting; k-- > 0;) {
			if (!pfd[1 + 3 * nruns + k].revents)
				continue;
			reap_exiting(k);
		}
		/* Runs before new messages: pfd indexes stay valid while
		 * the runs array is unchanged, so walk it backwards. */
		for (size_t i = nruns; i-- > 0;) {
			struct pollfd *pp = &pfd[1 + 3 * i];
			struct pollfd *pr = &pfd[2 + 3 * i];
			struct pollfd *ps = &pfd[3 + 3 * i];

			if (pr->revents && runs[i].report_fd >= 0 &&
			    spawn_read_report(&runs[i]) == 1 &&
			    !runs[i].failed && !runs[i].started) {
				runs[i].started = true;
				trace_stamp("started");
				send_or_die(SBXP_STARTED, runs[i].id,
					    &runs[i].info,
					    sizeof(runs[i].info));
				if (runs[i].term_pending && !runs[i].killed)
					spawn_term(&runs[i]);
				runs[i].term_pending = false;
			}
			if (pp->revents ||
			    (ps->revents && spawn_read_status(&runs[i])))
				finish_run(i);
		}
		if (pfd[0].revents)
			on_message();
	}
}
