/*
 * spd — the broker daemon.  Start-up order matters: directories and the
 * pid-file lock first (so two spds never share a runtime dir), then the
 * operator token, the journal, the sandbox spawner and last the socket, so
 * that nothing is accepted before everything it needs is up.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "common/trace.h"
#include "daemon/transport/auth.h"
#include "daemon/config.h"
#include "daemon/methods/m_config.h"
#include "daemon/journal/journal.h"
#include "daemon/log.h"
#include "daemon/methods/m_attest.h"
#include "daemon/keys/attest.h"
#include "proto/rpc.h"
#include "daemon/proxy/proxy.h"
#include "daemon/modules.h"
#include "daemon/transport/quota.h"
#include "daemon/keys/secrets.h"
#include "daemon/transport/server.h"
#include "daemon/transport/service.h"
#include "daemon/spd.h"
#include "common/paths.h"
#include "common/util.h"

/* How often spd looks whether its socket file is still its own: a
 * runtime directory removed under it (a logout's cleanup, rm -rf) leaves
 * spd listening where no client can reach it and holding the journal
 * that a new spd would need; once a second finds that soon enough for a
 * person, and costs one lstat. */
#define SPD_SOCKET_CHECK_MS 1000
/* How long a new spd waits for the journal held by an spd whose socket
 * is gone: that one stops within SPD_SOCKET_CHECK_MS and its shutdown
 * (runs ended, the journal's last rows written). */
#define SPD_HANDOVER_WAIT_MS 5000
#define SPD_HANDOVER_POLL_MS 50

static struct spd spd;
static uv_signal_t sig_term, sig_int, sig_hup;
static uv_timer_t sock_check;
/* The socket file spd bound (device and inode), for sock_check. */
static dev_t sock_dev;
static ino_t sock_ino;
static int ready_fd = -1;
static int exit_code;
/* The listening socket came from a service manager: it owns the socket
 * file, which must outlive this spd for the next activation. */
static bool socket_passed;
/* stderr is the journal (JOURNAL_STREAM): messages carry a priority. */
static bool stderr_journal;

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: spd [--foreground] [--sandboxd PATH]\n"
	    "       spd --verify-journal | --version | --help\n"
	    "       spd --attest-verify PARAMS\n"
	    "\n"
	    "The spd broker daemon: owns provider keys, policy, sessions and\n"
	    "the journal, and runs every command an agent asks for in the\n"
	    "sandbox.  Clients (spctl) talk to it over a Unix socket.\n"
	    "\n"
	    "  --foreground   stay attached; log to stderr (systemd, tests)\n"
	    "                 otherwise spd detaches once it is ready and\n"
	    "                 logs to $SPD_STATE_DIR/spd.log\n"
	    "  --sandboxd P   the sandboxd binary (default: next to spd)\n"
	    "  --verify-journal  check the journal's hash chain without\n"
	    "                 starting (exit 1 when broken)\n"
	    "  --attest-verify PARAMS  attest.verify's work without a\n"
	    "                 running spd (spctl attest verify runs it):\n"
	    "                 PARAMS is the call's JSON, the answer a\n"
	    "                 JSON-RPC result or error on stdout\n"
	    "\n"
	    "Directories (environment): SPD_CONFIG_DIR, SPD_STATE_DIR,\n"
	    "SPD_RUNTIME_DIR; defaults under XDG_CONFIG_HOME, XDG_STATE_HOME,\n"
	    "XDG_RUNTIME_DIR (else /tmp/spd-$UID).\n");
}

static void die(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, stderr_journal ? "<3>spd: " : "spd: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (ready_fd >= 0) {
		/* Tell a waiting parent we failed; it prints nothing more. */
		ssize_t w = write(ready_fd, "F", 1);
		(void)w;
	}
	exit(1);
}

static void dir_or_die(const char *what, const char *dir)
{
	char why[PATH_MAX * 2 + 128];
	int r = paths_ensure_private_dir(dir);

	if (r < 0)
		die("%s directory: %s", what,
		    paths_private_dir_why(dir, r, why, sizeof(why)));
}

/* The pid-file lock: held for spd's lifetime.  flock() is released by
 * the kernel when spd dies however it dies, so a crash never leaves a
 * lock that blocks the next start. */
static int take_pid_lock(const char *path)
{
	char buf[32];
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	ssize_t n;

	if (fd < 0)
		die("cannot open pid file %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		_cleanup_free_ char *pid = paths_read_line(path);

		die("another spd (pid %s) is already running on %s",
		    pid ? pid : "?", spd.paths.runtime_dir);
	}
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)n, 0) != n)
		die("cannot write pid file %s: %s", path, strerror(errno));
	return fd;
}

static char *find_sandboxd(void)
{
	char self[PATH_MAX], *slash, *p;
	const char *env = getenv("SPD_SANDBOXD");
	ssize_t n;

	if (env && env[0] == '/')
		return strdup(env);
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			p = paths_join(self, "sandboxd");
			if (p && access(p, X_OK) == 0)
				return p;
			free(p);
			/* Installed layout: PREFIX/bin/spd and
			 * PREFIX/libexec/spd/sandboxd. */
			p = paths_join(self, "../libexec/spd/sandboxd");
			if (p && access(p, X_OK) == 0)
				return p;
			free(p);
		}
	}
	return NULL;
}

static void on_journal_committed(void *data, const struct journal_event *evs,
				 size_t n)
{
	struct spd *s = data;

	server_journal_committed(s->server, evs, n);
}

/* Tell the service manager (NOTIFY_SOCKET) where spd is; failing to is
 * worth a line in the log, never a reason to stop. */
static void notify(const char *state)
{
	int r = service_notify(state);

	if (r < 0)
		log_warn("cannot notify the service manager (%s): %s", state,
			 strerror(-r));
}

/* ---- shutdown: server, then modules, then the journal --------------- */

static void on_signal_closed(uv_handle_t *h)
{
	(void)h;
}

static void on_journal_closed(void *data, int err)
{
	if (err < 0) {
		log_error("journal: rows could not be written: %s",
			  strerror(-err));
		exit_code = 1;
	}
	spd.journal = NULL;
	uv_close((uv_handle_t *)&sig_term, on_signal_closed);
	uv_close((uv_handle_t *)&sig_int, on_signal_closed);
	uv_close((uv_handle_t *)&sig_hup, on_signal_closed);
	uv_close((uv_handle_t *)&sock_check, on_signal_closed);
}

static void on_modules_closed(void *data)
{
	journal_close(spd.journal, on_journal_closed, NULL);
}

/* Whether path is still the file (dev, ino) spd made: after its runtime
 * directory was removed, the name may be the next spd's. */
static bool still_ours(const char *path, dev_t dev, ino_t ino)
{
	struct stat st;

	return lstat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

static void on_server_closed(void *data)
{
	spd.server = NULL;
	if (!socket_passed &&
	    still_ours(spd.paths.socket_path, sock_dev, sock_ino))
		unlink(spd.paths.socket_path);
	modules_close(&spd, on_modules_closed, NULL);
}

/* SIGHUP: read spd.conf again (m_config.h: refused whole, the old one
 * in force, when it does not read), then the secrets; on failure the
 * old ones stay in force. */
static void on_hup(uv_signal_t *h, int signum)
{
	char err[512] = "";
	json_t *report = NULL;

	if (conf_reload(&spd, "SIGHUP", &report, err, sizeof(err)) < 0)
		log_error("SIGHUP: spd.conf not reloaded: %s", err);
	json_decref(report);
	err[0] = '\0';
	if (secrets_load(&spd, err, sizeof(err)) < 0) {
		log_error("SIGHUP: secrets not reloaded: %s", err);
		journal_append(
		    spd.journal, NULL, "spd", "secrets.reload",
		    "reload refused; the previous secrets stay in force", NULL);
		return;
	}
	log_set_redact(spd.redact);
	log_info("SIGHUP: secrets reloaded");
	journal_append(spd.journal, NULL, "spd", "secrets.reload",
		       "secrets reloaded", NULL);
}

/* The one way spd stops: a signal, daemon.stop, or its socket gone. */
static void stop(struct spd *s, const char *why)
{
	if (s->stopping)
		return;
	s->stopping = true;
	log_info("%s", why);
	notify("STOPPING=1");
	uv_timer_stop(&sock_check);
	journal_append(s->journal, NULL, "spd", "daemon.stop", why, NULL);
	server_close(s->server, on_server_closed, NULL);
}

static void on_signal(uv_signal_t *h, int signum)
{
	stop(&spd,
	     signum == SIGTERM ? "stopping on SIGTERM" : "stopping on SIGINT");
}

/* The socket file removed or replaced (its runtime directory deleted):
 * no client reaches this spd any more, and the next `spctl` starts
 * another, which needs the journal this one holds.  Stopping cleanly
 * hands it over. */
static void on_sock_check(uv_timer_t *h)
{
	if (still_ours(spd.paths.socket_path, sock_dev, sock_ino))
		return;
	log_warn("socket %s is gone (its runtime directory removed?)",
		 spd.paths.socket_path);
	stop(&spd, "stopping: the socket file was removed");
}

/* Watch the socket file spd bound; a socket a service manager passed is
 * the manager's to keep. */
static void sock_check_start(uv_loop_t *loop)
{
	struct stat st;

	uv_timer_init(loop, &sock_check);
	if (socket_passed || lstat(spd.paths.socket_path, &st) < 0)
		return;
	sock_dev = st.st_dev;
	sock_ino = st.st_ino;
	uv_timer_start(&sock_check, on_sock_check, SPD_SOCKET_CHECK_MS,
		       SPD_SOCKET_CHECK_MS);
}

/* Point fd at /dev/null (best effort: a missing /dev/null leaves it). */
static void devnull_onto(int fd)
{
	int n = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (n < 0)
		return;
	if (n != fd) {
		dup2(n, fd);
		close(n);
	} else {
		fcntl(fd, F_SETFD, 0);
	}
}

/*
 * A daemon started by a script, an editor or a test harness must not keep
 * what its caller happened to leave open: a pipe held by spd (or by
 * sandboxd, which inherits from spd) keeps the caller waiting for
 * end-of-file forever.  Everything above stderr goes, except the socket
 * a service manager passed (keep, or -1).
 */
static void close_inherited(int keep)
{
	unsigned int first = 3;

	if (keep >= 3) {
		if (keep > 3 && close_range(3, (unsigned int)keep - 1, 0) < 0)
			for (int fd = 3; fd < keep; fd++)
				close(fd);
		first = (unsigned int)keep + 1;
	}
	if (close_range(first, ~0U, 0) == 0)
		return;
	for (int fd = (int)first; fd < 1024; fd++)
		close(fd);
}

/* Detach: the parent waits until the child is listening (or failed), so
 * `spd` returning 0 means the daemon answers. */
static void daemonize(void)
{
	int p[2];
	pid_t pid;
	char c = 0;

	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1 || c != 'R')
			_exit(1);
		_exit(0);
	}
	close(p[0]);
	ready_fd = p[1];
	if (setsid() < 0)
		die("setsid: %s", strerror(errno));
	/* The caller's stdin and stdout are not spd's to keep; stderr
	 * stays until spd listens, so that a refusal reaches the caller. */
	devnull_onto(STDIN_FILENO);
	devnull_onto(STDOUT_FILENO);
}

/* Verify the journal file without starting spd: for a journal spd refuses
 * to open (its head was cut off) and for audits.  Read-only. */
static int verify_journal_offline(void)
{
	struct journal_verify_result res;
	int r;

	if (paths_resolve(&spd.paths) < 0)
		die("cannot resolve spd's directories");
	r = journal_verify_path(spd.paths.journal_path, &res);
	if (r < 0)
		die("cannot read journal %s: %s", spd.paths.journal_path,
		    strerror(-r));
	if (res.ok) {
		printf("journal intact: %lld events checked\n",
		       (long long)res.checked);
		return 0;
	}
	printf("journal BROKEN at event %lld (%s): %s\n",
	       (long long)res.first_bad_id, res.reason, res.detail);
	return 1;
}

/*
 * attest.verify without a running spd (spctl attest verify when spd is
 * not running, or --offline): reads spd.conf's [attest] trust and spd's
 * own key when they exist, makes nothing of spd's, and reads the
 * checked repository as spd does (objects and notes only, nothing of it
 * runs).  The shadow git dir goes into the state directory when it
 * exists, else into a private directory of its own.  Prints one JSON
 * object, {"result": ...} or {"error": {code, message, data}}; exits 0
 * when the check ran (its verdict is in the result), 1 when it could
 * not.
 */
static int attest_verify_offline(const char *text)
{
	char errbuf[512] = "", *why = NULL, *tmp = NULL, *out;
	const char *scratch;
	json_t *params = json_loads(text, 0, NULL), *res = NULL, *reply;
	enum rpc_error code = RPC_E_BAD_PARAMS;
	struct stat st;
	int r = -EINVAL;

	if (paths_resolve(&spd.paths) < 0) {
		why = strdup("cannot resolve spd's directories");
		code = RPC_E_INTERNAL;
		goto out;
	}
	if (!json_is_object(params)) {
		why = strdup("--attest-verify takes the call's parameters, a "
			     "JSON object");
		goto out;
	}
	if (config_load(spd.paths.conf_path, &spd.config, errbuf,
			sizeof(errbuf)) < 0) {
		why = strdup(errbuf);
		code = RPC_E_INTERNAL;
		goto out;
	}
	scratch = spd.paths.state_dir;
	if (stat(scratch, &st) < 0 || !S_ISDIR(st.st_mode) ||
	    st.st_uid != geteuid() || (st.st_mode & 077)) {
		const char *t = getenv("TMPDIR");

		if (asprintf(&tmp, "%s/spd-attest-XXXXXX",
			     t && *t ? t : "/tmp") < 0 ||
		    !mkdtemp(tmp)) {
			why = strdup("cannot make a private directory");
			code = RPC_E_INTERNAL;
			goto out;
		}
		scratch = tmp;
	} else {
		(void)attest_key_load(scratch, &spd.attest_key);
	}
	r = m_attest_verify_run(&spd, params, scratch, false, &res, &why);
	if (r < 0 && r != -EINVAL && r != -ENOENT && r != -E2BIG && r != -EPERM)
		code = RPC_E_INTERNAL;
out:
	if (res)
		reply = json_pack("{s:o}", "result", res);
	else
		reply = json_pack("{s:{s:i, s:s, s:{s:s}}}", "error", "code",
				  rpc_error_number(code), "message",
				  why ? why : strerror(-r), "data", "code",
				  rpc_error_code(code));
	out = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
	/* Flushed here: an answer lost in a buffer is no answer. */
	if (!out || puts(out) < 0 || fflush(stdout) != 0)
		r = res ? -EIO : r;
	free(out);
	json_decref(reply);
	json_decref(params);
	free(why);
	if (tmp) {
		rmdir(tmp);
		free(tmp);
	}
	attest_key_free(spd.attest_key);
	spd.attest_key = NULL;
	config_free(&spd.config);
	return res && r != -EIO ? 0 : 1;
}

/* Each client is a descriptor: take the hard limit so the connection
 * limit (SERVER_MAX_CONNS), not a low default soft limit, decides. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* The socket systemd passed (spd.socket), or -1: spd binds its own.  A
 * malformed hand-over is not fatal: spd says so and binds its own, so a
 * stray LISTEN_FDS in a user's shell never keeps spd from starting. */
static int listen_fd_from_systemd(void)
{
	char why[256];
	int fd, r = service_listen_socket(&fd, why, sizeof(why));

	if (r < 0) {
		log_warn("ignoring the sockets passed by the service manager: "
			 "%s; binding %s",
			 why, "spd's own socket");
		return -1;
	}
	return fd;
}

/* spd's directories (made private, or refused), spd.conf and the secrets
 * (which the log redacts from here on). */
static void load_config_or_die(void)
{
	char errbuf[512] = "";

	if (paths_resolve(&spd.paths) < 0)
		die("cannot find the home directory for default paths; set "
		    "SPD_CONFIG_DIR, SPD_STATE_DIR and SPD_RUNTIME_DIR");
	dir_or_die("config", spd.paths.config_dir);
	dir_or_die("state", spd.paths.state_dir);
	dir_or_die("runtime", spd.paths.runtime_dir);
	/* Before the read: a change made while it reads shows as changed. */
	spd_conf_stamp(&spd);
	if (config_load(spd.paths.conf_path, &spd.config, errbuf,
			sizeof(errbuf)) < 0)
		die("%s", errbuf);
	if (conf_remember(&spd) < 0)
		die("out of memory");
	if (secrets_load(&spd, errbuf, sizeof(errbuf)) < 0)
		die("%s", errbuf);
	log_set_redact(spd.redact);
}

/*
 * Whether the spd that holds the journal (its holder line "pid N, socket
 * PATH") listens on this spd's socket path and that socket is gone: its
 * runtime directory was removed, and it stops by itself (on_sock_check).
 */
static bool holder_lost_our_socket(const char *holder)
{
	const char *sock = holder ? strstr(holder, ", socket ") : NULL;
	size_t n = strlen(spd.paths.socket_path);
	struct stat st;

	if (!sock)
		return false;
	sock += strlen(", socket ");
	return strncmp(sock, spd.paths.socket_path, n) == 0 &&
	       (sock[n] == '\n' || sock[n] == '\0') &&
	       lstat(spd.paths.socket_path, &st) < 0;
}

/* The journal (refusing one whose head does not match), its hooks, and
 * the per-session quotas that count its rows. */
static void open_journal_or_die(uv_loop_t *loop)
{
	int r = journal_open(loop, spd.paths.journal_path, &spd.journal);

	/* The spd before this one lost its socket and is stopping: wait
	 * for it to let go of the journal rather than refuse. */
	for (int waited = 0; r == -EBUSY && waited < SPD_HANDOVER_WAIT_MS;
	     waited += SPD_HANDOVER_POLL_MS) {
		_cleanup_free_ char *holder =
		    journal_read_holder(spd.paths.journal_path);

		if (!holder_lost_our_socket(holder))
			break;
		usleep(SPD_HANDOVER_POLL_MS * 1000);
		r = journal_open(loop, spd.paths.journal_path, &spd.journal);
	}

	if (r == -SPD_ECORRUPT)
		die("journal %s does not match its recorded head (tampered or "
		    "truncated); run `spd --verify-journal` and move it aside",
		    spd.paths.journal_path);
	if (r == -EBUSY) {
		/* Most often the same user's spd, started with another
		 * runtime directory (XDG_RUNTIME_DIR unset in this shell):
		 * name it and where it listens. */
		_cleanup_free_ char *holder =
		    journal_read_holder(spd.paths.journal_path);

		if (holder_lost_our_socket(holder))
			die("another spd (%.*s) keeps the journal %s and has "
			    "not let go of it: its socket %s was removed (its "
			    "runtime directory deleted?), so no client reaches "
			    "it. It stops by itself; if it has not, end it "
			    "(kill its pid) and start spd again",
			    (int)strcspn(holder, ",\n"), holder,
			    spd.paths.journal_path, spd.paths.socket_path);
		die("another spd (%s) already keeps the journal %s; this one "
		    "would listen on %s. Use that spd: give spctl the same "
		    "XDG_RUNTIME_DIR (or SPD_RUNTIME_DIR) it was started with, "
		    "or stop it first",
		    holder ? holder : "its pid and socket unknown",
		    spd.paths.journal_path, spd.paths.socket_path);
	}
	if (r < 0)
		die("cannot open journal %s: %s", spd.paths.journal_path,
		    strerror(-r));
	{
		char holder[PATH_MAX + 64];

		snprintf(holder, sizeof(holder), "pid %d, socket %s\n",
			 (int)getpid(), spd.paths.socket_path);
		(void)journal_set_holder(spd.journal, holder);
	}
	if (spd.config.journal_queue_max)
		journal_set_queue_max(spd.journal,
				      spd.config.journal_queue_max);
	journal_set_commit_cb(spd.journal, on_journal_committed, &spd);
	/* Every journal row passes the redactor before it is hashed. */
	journal_set_filter(spd.journal, secrets_journal_filter, &spd);
	r = quota_new(spd.journal,
		      &(struct quota_limits){
			  .max = {[QUOTA_CONNS] = spd.config.session_conns,
				  [QUOTA_RUNS] = spd.config.session_runs,
				  [QUOTA_JOURNAL_RATE] =
				      spd.config.session_journal_rate}},
		      &spd.quota);
	if (r < 0)
		die("cannot make the quota table: %s", strerror(-r));
}

/* What every spd process is before it reads anything: files it makes
 * private, no SIGPIPE, descriptors enough, and no core dump or ptrace
 * of a process that holds provider keys. */
static void harden_process(void)
{
	umask(077);
	signal(SIGPIPE, SIG_IGN);
	raise_nofile();
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	setrlimit(RLIMIT_CORE, &(struct rlimit){0, 0});
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"foreground", no_argument, NULL, 'f'},
	    {"sandboxd", required_argument, NULL, 's'},
	    {"version", no_argument, NULL, 'V'},
	    {"verify-journal", no_argument, NULL, 'J'},
	    {"attest-verify", required_argument, NULL, 'A'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char errbuf[512] = "";
	int c, r, pidfd, listen_fd;
	bool verify_only = false;
	const char *attest_params = NULL;
	uv_loop_t loop;

	while ((c = getopt_long(argc, argv, "fhV", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			spd.foreground = true;
			break;
		case 's':
			spd.sandboxd_path = strdup(optarg);
			break;
		case 'V':
			printf("spd %s\n", SPD_VERSION);
			return 0;
		case 'J':
			verify_only = true;
			break;
		case 'A':
			attest_params = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	harden_process();
	if (verify_only)
		return verify_journal_offline();
	if (attest_params)
		return attest_verify_offline(attest_params);
	stderr_journal = log_stderr_is_journal();
	log_set_journal(stderr_journal);
	listen_fd = listen_fd_from_systemd();
	socket_passed = listen_fd >= 0;
	close_inherited(listen_fd);
	if (service_notify_init() < 0)
		log_warn("ignoring NOTIFY_SOCKET: not an absolute path or "
			 "@abstract name that fits a socket address");
	/* The step trace (bench/trace) is a measurement aid: a file that
	 * cannot be opened leaves it off, nothing else. */
	(void)trace_open_env("spd");

	load_config_or_die();
	if (!spd.foreground)
		daemonize();
	pidfd = take_pid_lock(spd.paths.pid_path);
	r = auth_load_or_create_token(spd.paths.token_path, spd.operator_token);
	if (r == -EPERM)
		die("operator token %s must be a regular file owned by you "
		    "with "
		    "mode 0600",
		    spd.paths.token_path);
	if (r < 0)
		die("operator token %s: %s", spd.paths.token_path,
		    strerror(-r));
	if (!spd.sandboxd_path)
		spd.sandboxd_path = find_sandboxd();
	if (!spd.foreground) {
		r = log_open(spd.paths.log_path);
		if (r < 0)
			die("cannot open log %s: %s", spd.paths.log_path,
			    strerror(-r));
	}

	uv_loop_init(&loop);
	spd.loop = &loop;
	spd.started_us = uv_hrtime() / 1000;
	open_journal_or_die(&loop);
	r = modules_start(&spd, errbuf, sizeof(errbuf));
	if (r < 0)
		die("%s", errbuf);
	r = proxy_grants_load(&spd, errbuf, sizeof(errbuf));
	if (r < 0)
		die("%s", errbuf);
	r = server_start(&spd, spd.paths.socket_path, listen_fd, &spd.server);
	if (r < 0)
		die("cannot listen on %s: %s", spd.paths.socket_path,
		    uv_strerror(r));
	uv_signal_init(&loop, &sig_term);
	uv_signal_init(&loop, &sig_int);
	uv_signal_start(&sig_term, on_signal, SIGTERM);
	uv_signal_start(&sig_int, on_signal, SIGINT);
	uv_signal_init(&loop, &sig_hup);
	uv_signal_start(&sig_hup, on_hup, SIGHUP);
	spd.stop = stop;
	sock_check_start(&loop);
	journal_append(spd.journal, NULL, "spd", "daemon.start",
		       "spd " SPD_VERSION " started", NULL);
	log_info("spd %s listening on %s%s (pid %d)", SPD_VERSION,
		 spd.paths.socket_path,
		 socket_passed ? " (socket passed by the service manager)" : "",
		 (int)getpid());
	notify("READY=1");

	if (ready_fd >= 0) {
		ssize_t w = write(ready_fd, "R", 1);

		(void)w;
		close(ready_fd);
		ready_fd = -1;
		/* From here on spd's messages go to its log only. */
		devnull_onto(STDERR_FILENO);
	}

	uv_run(&loop, UV_RUN_DEFAULT);
	r = uv_loop_close(&loop);
	if (r != 0)
		log_warn("loop closed with handles open: %s", uv_strerror(r));
	{
		struct stat st;

		if (fstat(pidfd, &st) == 0 &&
		    still_ours(spd.paths.pid_path, st.st_dev, st.st_ino))
			unlink(spd.paths.pid_path);
	}
	close(pidfd);
	log_info("stopped");
	proxy_tls_free(&spd);
	proxy_grants_free(&spd);
	conf_forget(&spd);
	config_free(&spd.config);
	log_set_redact(NULL);
	secrets_free(&spd);
	quota_free(spd.quota);
	paths_free(&spd.paths);
	free(spd.sandboxd_path);
	return exit_code;
}
