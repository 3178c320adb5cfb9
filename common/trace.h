/*
 * The run path's step trace (issue 16): CLOCK_MONOTONIC stamps taken by
 * spctl, spd and sandboxd at each step of a run, appended as lines
 * "<ns> <who> <step>" to one file, so that bench/trace can line the three
 * processes up (the clock is the same for all of them) and say what each
 * step costs.  Off unless SPD_TRACE names a file; when off, each stamp is
 * one predictable branch.
 *
 * Unlike the rest of common/, this module keeps process-wide state (the
 * descriptor and a line buffer): a stamp must be taken from anywhere on
 * the run path without threading a handle through every call, and the
 * state is written only from the thread that opened it.
 */
#ifndef SPD_COMMON_TRACE_H
#define SPD_COMMON_TRACE_H

#include <stdbool.h>
#include <stdint.h>

/* Environment variable naming the trace file (appended to, made 0600). */
#define TRACE_ENV "SPD_TRACE"

/*
 * Starts tracing to the file named by $SPD_TRACE, if set, labelling every
 * stamp with who (a static string, e.g. "spctl").  Returns 0 when tracing
 * is on or was not asked for, -errno when the file cannot be opened (the
 * caller goes on without a trace).
 */
int trace_open_env(const char *who);

/*
 * Starts tracing to fd, which the caller hands over (made close-on-exec;
 * closed by trace_close).  For sandboxd, which gets no environment and is
 * passed the descriptor by spd.  Returns 0 or -errno.
 */
int trace_adopt(int fd, const char *who);

/* The trace file's descriptor, or -1 when tracing is off. */
int trace_fd(void);

/* Whether stamps are recorded. */
bool trace_on(void);

/* The CLOCK_MONOTONIC time in nanoseconds. */
uint64_t trace_now_ns(void);

/*
 * Records step (a static string without spaces) at the current time, or
 * at ns for trace_stamp_at (a time taken earlier, e.g. by a child that
 * shares no buffer with us).  Buffered: nothing is written until
 * trace_flush or the buffer fills.
 */
void trace_stamp(const char *step);
void trace_stamp_at(const char *step, uint64_t ns);

/* Writes the buffered stamps out (one write). */
void trace_flush(void);

/* Flushes and stops tracing. */
void trace_close(void);

#endif
