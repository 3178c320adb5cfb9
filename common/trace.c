/*
 * The step trace (common/trace.h): stamps appended to the file
 * SPD_TRACE names, one line each, for bench/trace.
 */
#include "common/trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Room for about 200 stamps: more than a run's steps in every process,
 * so a run's stamps leave in one write after it. */
#define TRACE_BUF_SIZE 8192
/* The longest line: 20 digits, two spaces, who and step, newline. */
#define TRACE_LINE_MAX 128

static int trace_fd_ = -1;
static const char *trace_who = "";
static char trace_buf[TRACE_BUF_SIZE];
static size_t trace_len;

int trace_adopt(int fd, const char *who)
{
	if (fd < 0)
		return -EBADF;
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	trace_close();
	trace_fd_ = fd;
	trace_who = who;
	return 0;
}

int trace_open_env(const char *who)
{
	const char *path = getenv(TRACE_ENV);
	int fd;

	if (!path || !*path)
		return 0;
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		return -errno;
	return trace_adopt(fd, who);
}

int trace_fd(void)
{
	return trace_fd_;
}

bool trace_on(void)
{
	return trace_fd_ >= 0;
}

uint64_t trace_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void trace_flush(void)
{
	size_t off = 0;

	while (trace_fd_ >= 0 && off < trace_len) {
		ssize_t n = write(trace_fd_, trace_buf + off, trace_len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	trace_len = 0;
}

void trace_stamp_at(const char *step, uint64_t ns)
{
	int n;

	if (trace_fd_ < 0)
		return;
	if (trace_len + TRACE_LINE_MAX > sizeof(trace_buf))
		trace_flush();
	n = snprintf(trace_buf + trace_len, TRACE_LINE_MAX, "%llu %s %s\n",
		     (unsigned long long)ns, trace_who, step);
	if (n > 0 && n < TRACE_LINE_MAX)
		trace_len += (size_t)n;
}

void trace_stamp(const char *step)
{
	if (trace_fd_ >= 0)
		trace_stamp_at(step, trace_now_ns());
}

void trace_close(void)
{
	trace_flush();
	if (trace_fd_ >= 0)
		close(trace_fd_);
	trace_fd_ = -1;
}
