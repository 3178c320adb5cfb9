/*
 * spd's log: stderr in the foreground, state_dir/spd.log otherwise.
 * Every line passes the redactor when one is set, so a key that reaches an
 * error message never reaches the log.
 */
#ifndef SPD_DAEMON_LOG_H
#define SPD_DAEMON_LOG_H

#include <stdbool.h>

struct redact_set;

/* syslog(3) priorities, as the journal reads a "<N>" line prefix. */
#define LOG_PRIO_ERR 3
#define LOG_PRIO_WARNING 4
#define LOG_PRIO_INFO 6

/* Log to stderr (path NULL) or append to path (0600).  Returns 0 or
 * -errno; on failure logging stays on stderr. */
int log_open(const char *path);
/* The descriptor log lines go to (2 or the log file), for the stderr of
 * a process spd starts: its messages land where spd's do, and it never
 * holds whatever stderr spd's own caller gave it. */
int log_output_fd(void);
/* True when stderr is the stream JOURNAL_STREAM ("DEV:INO") names, that
 * is systemd's journal reads it. */
bool log_stderr_is_journal(void);
/* Write lines to stderr as "<priority>message" (on) or with spd's own
 * timestamp, pid and level (off, the default).  log_open(path) turns it
 * off: a file is not the journal. */
void log_set_journal(bool on);
/* Redact log lines with this set from now on (the log holds a reference
 * until the next call; NULL disables). */
void log_set_redact(struct redact_set *set);
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
