/*
 * spctl's side of the socket (client/client.h): finding and starting spd
 * on demand (it detaches and lets go of the caller's descriptors), the
 * token, and one call with its notifications and its answer.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "common/paths.h"
#include "common/trace.h"
#include "common/util.h"
#include "proto/rpc.h"

/* How long spctl waits for an auto-started spd to answer. */
#define CLIENT_AUTOSTART_WAIT_MS 10000
/* How often spctl looks for the operator token a socket-activated spd
 * is still making: short against spd's start-up, long against a busy
 * loop. */
#define CLIENT_TOKEN_POLL_MS 20

static int try_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

char *client_find_spd(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0) {
		char *slash, *p;

		self[n] = '\0';
		slash = strrchr(self, '/');
		if (slash) {
			*slash = '\0';
			p = paths_join(self, "spd");
			if (p && access(p, X_OK) == 0)
				return p;
			free(p);
		}
	}
	return strdup("spd");
}

/* Run spd (it detaches once it listens) and wait for it to answer. */
static int autostart(const char *sock, char *errbuf, size_t errlen)
{
	char *spd = client_find_spd();
	pid_t pid;
	int status, fd;
	struct timespec ts = {0, 20 * 1000 * 1000};

	if (!spd)
		return -ENOMEM;
	pid = fork();
	if (pid < 0) {
		free(spd);
		return -errno;
	}
	if (pid == 0) {
		execlp(spd, spd, (char *)NULL);
		fprintf(stderr, "spctl: cannot run %s: %s\n", spd,
			strerror(errno));
		_exit(127);
	}
	free(spd);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(errbuf, errlen,
			 "spd could not be started (see its message above)");
		return -ECONNREFUSED;
	}
	for (int waited = 0; waited < CLIENT_AUTOSTART_WAIT_MS; waited += 20) {
		fd = try_connect(sock);
		if (fd >= 0)
			return fd;
		nanosleep(&ts, NULL);
	}
	snprintf(errbuf, errlen, "spd started but does not answer on %s", sock);
	return -ETIMEDOUT;
}

static char *load_token(const struct spd_paths *p, bool *ret_session)
{
	const char *s = getenv("SPD_SESSION_TOKEN");

	*ret_session = false;
	if (s && *s) {
		*ret_session = true;
		return strdup(s);
	}
	return paths_read_line(p->token_path);
}

static int open_impl(struct client *c, bool may_start, char *errbuf,
		     size_t errlen)
{
	struct spd_paths p;
	const char *no = getenv("SPD_NO_AUTOSTART");
	int fd, r;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->next_id = 1;
	r = paths_resolve(&p);
	if (r < 0) {
		snprintf(errbuf, errlen, "cannot resolve spd's directories");
		return r;
	}
	fd = try_connect(p.socket_path);
	if (fd < 0 && (fd == -ENOENT || fd == -ECONNREFUSED) && may_start &&
	    !(no && strcmp(no, "1") == 0)) {
		char sub[256] = "";
		fd = autostart(p.socket_path, sub, sizeof(sub));
		if (fd < 0 && sub[0]) {
			snprintf(errbuf, errlen, "%s", sub);
			paths_free(&p);
			return fd;
		}
	}
	if (fd < 0) {
		snprintf(errbuf, errlen, "cannot connect to spd at %s: %s",
			 p.socket_path, strerror(-fd));
		paths_free(&p);
		return fd;
	}
	trace_stamp("connected");
	c->fd = fd;
	c->token = load_token(&p, &c->session_token);
	/* Socket activation: this connection is what started spd, and spd
	 * makes the operator token only as it starts.  Wait for it (spd
	 * answers nothing before it exists). */
	for (int waited = 0; !c->token && waited < CLIENT_AUTOSTART_WAIT_MS;
	     waited += CLIENT_TOKEN_POLL_MS) {
		nanosleep(
		    &(struct timespec){0, CLIENT_TOKEN_POLL_MS * 1000000L},
		    NULL);
		c->token = load_token(&p, &c->session_token);
	}
	if (!c->token) {
		/* spd would close the connection unanswered (it takes no
		 * call without a token): say why instead. */
		snprintf(errbuf, errlen,
			 "spd answers at %s, but there is no operator token "
			 "at %s to call it with (an spd started with another "
			 "HOME or SPD_CONFIG_DIR?); a session's token goes in "
			 "SPD_SESSION_TOKEN",
			 p.socket_path, p.token_path);
		close(fd);
		c->fd = -1;
		paths_free(&p);
		return -EACCES;
	}
	paths_free(&p);
	return 0;
}

int client_open(struct client *c, char *errbuf, size_t errlen)
{
	return open_impl(c, true, errbuf, errlen);
}

int client_open_running(struct client *c, char *errbuf, size_t errlen)
{
	return open_impl(c, false, errbuf, errlen);
}

void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	buf_free(&c->in);
	if (c->token) {
		memset(c->token, 0, strlen(c->token));
		free(c->token);
	}
	c->token = NULL;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read one line (without '\n') into a new json value. */
static int read_message(struct client *c, json_t **ret)
{
	for (;;) {
		char *nl =
		    c->in.data ? memchr(c->in.data, '\n', c->in.len) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - c->in.data);
			json_error_t je;
			json_t *v = json_loadb(c->in.data, n, 0, &je);

			buf_consume(&c->in, n + 1);
			if (!v)
				return -EBADMSG;
			*ret = v;
			return 0;
		}
		if (c->in.len > 2 * RPC_FRAME_MAX)
			return -E2BIG;
		/* 16 KiB at least, and what the buffer holds: a usual
		 * reply fits a buffer of 32 KiB, which spctl's allocator
		 * keeps rather than maps (client/alloc.c). */
		if (buf_reserve(&c->in, 16384) < 0)
			return -ENOMEM;
		ssize_t r = read(c->fd, c->in.data + c->in.len,
				 c->in.cap - c->in.len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ECONNRESET;
		c->in.len += (size_t)r;
	}
}

/* The request id(method(params)) as one line with its newline in *ret_line
 * (*ret_n bytes, not NUL-terminated); ownership of params taken, the
 * token added.  Returns 0 or -ENOMEM. */
static int request_line(struct client *c, long id, enum rpc_method method,
			json_t *params, char **ret_line, size_t *ret_n)
{
	json_t *req;
	char *line;
	size_t n;

	if (!params)
		return -ENOMEM;
	if (c->token)
		json_object_set_new(params, "token", json_string(c->token));
	req = json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id",
			(json_int_t)id, "method", rpc_method_name(method),
			"params", params);
	line = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!line)
		return -ENOMEM;
	/* The newline goes in the same write (a second one would wake spd
	 * a second time for one byte), in the NUL's place: json_dumps'
	 * buffer is n+1. */
	n = strlen(line);
	line[n++] = '\n';
	*ret_line = line;
	*ret_n = n;
	return 0;
}

long client_send(struct client *c, enum rpc_method method, json_t *params)
{
	long id = c->next_id++;
	char *line;
	size_t n;
	int r = request_line(c, id, method, params, &line, &n);

	if (r < 0)
		return r;
	r = write_all(c->fd, line, n);
	free(line);
	return r < 0 ? r : id;
}

int client_call(struct client *c, enum rpc_method method, json_t *params,
		client_notify_cb cb, void *data, json_t **ret_result,
		json_t **ret_error)
{
	long id = c->next_id++;
	json_t *msg = NULL;
	char *line;
	size_t n;
	int r;

	r = request_line(c, id, method, params ? params : json_object(), &line,
			 &n);
	if (r < 0)
		return r;
	trace_stamp("request");
	r = write_all(c->fd, line, n);
	free(line);
	if (r < 0)
		return r;
	for (;;) {
		json_t *vid, *vm;

		r = read_message(c, &msg);
		if (r < 0)
			return r;
		vid = json_object_get(msg, "id");
		vm = json_object_get(msg, "method");
		if (json_is_string(vm) && !vid) {
			if (cb)
				cb(data, json_string_value(vm),
				   json_object_get(msg, "params"));
			json_decref(msg);
			continue;
		}
		if (json_object_get(msg, "error") &&
		    (json_is_null(vid) ||
		     (json_is_integer(vid) && json_integer_value(vid) == id))) {
			*ret_error = json_incref(json_object_get(msg, "error"));
			json_decref(msg);
			return -EPROTO;
		}
		if (json_is_integer(vid) && json_integer_value(vid) == id) {
			trace_stamp("reply");
			*ret_result =
			    json_incref(json_object_get(msg, "result"));
			json_decref(msg);
			return 0;
		}
		json_decref(msg);
	}
}
