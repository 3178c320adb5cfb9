/*
 * spd's log (daemon/log.h): stderr in the foreground (with syslog
 * priorities when it is the journal), else spd.log; every line redacted.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "daemon/log.h"
#include "common/redact.h"

static int log_fd = 2;
/* A reference of its own (redact_set_ref): the set in force may be
 * replaced, and the old one freed, while the log still points at it. */
static struct redact_set *log_redact;
/* stderr is the journal's stream: lines carry a syslog priority, no
 * timestamp or pid of their own (the journal records both). */
static bool log_journal;

bool log_stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char tail;

	/* "DEV:INO" of the stream systemd connected; stderr may since have
	 * been redirected elsewhere (a shell started by the unit), so it
	 * must be that very stream. */
	if (!e || sscanf(e, "%llu:%llu%c", &dev, &ino, &tail) != 2)
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void log_set_journal(bool on)
{
	log_journal = on;
}

int log_open(const char *path)
{
	int fd;

	if (!path) {
		log_fd = 2;
		return 0;
	}
	/* A file is not the journal. */
	log_journal = false;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		return -errno;
	log_fd = fd;
	return 0;
}

int log_output_fd(void)
{
	return log_fd;
}

void log_set_redact(struct redact_set *set)
{
	struct redact_set *old = log_redact;

	log_redact = redact_set_ref(set);
	redact_set_free(old);
}

static void vlog(int prio, const char *level, const char *fmt, va_list ap)
{
	char msg[2048], line[2300], stamp[32];
	struct timeval tv;
	struct tm tm;
	char *red = NULL;
	size_t redlen = 0;
	int n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (log_redact) {
		if (redact_buf(log_redact, msg, strlen(msg), &red, &redlen) >=
		    0)
			snprintf(msg, sizeof(msg), "%s", red);
		else /* never log what could not be checked */
			snprintf(msg, sizeof(msg),
				 "[withheld: redaction failed]");
		free(red);
	}
	if (log_journal) {
		n = snprintf(line, sizeof(line), "<%d>%s\n", prio, msg);
	} else {
		gettimeofday(&tv, NULL);
		gmtime_r(&tv.tv_sec, &tm);
		strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
		n = snprintf(line, sizeof(line), "%s.%03ldZ spd[%d] %s: %s\n",
			     stamp, (long)(tv.tv_usec / 1000), (int)getpid(),
			     level, msg);
	}
	if (n > 0) {
		ssize_t w = write(log_fd, line,
				  (size_t)n < sizeof(line) ? (size_t)n
							   : sizeof(line) - 1);
		(void)w;
	}
}

void log_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_PRIO_INFO, "info", fmt, ap);
	va_end(ap);
}

void log_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_PRIO_WARNING, "warning", fmt, ap);
	va_end(ap);
}

void log_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog(LOG_PRIO_ERR, "error", fmt, ap);
	va_end(ap);
}
