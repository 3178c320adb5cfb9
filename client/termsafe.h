/*
 * Printing what spd relays from runs and agents where a person reads it.
 *
 * A run's output, an agent's argv, a journal summary: all are chosen by
 * the untrusted side and may hold escape sequences that make a terminal
 * act (write the clipboard with OSC 52, set the title and report it back
 * as typed input, remap keys) or make one request look like another in an
 * approval prompt.  These functions show such bytes as inert text.
 */
#ifndef SPD_CLIENT_TERMSAFE_H
#define SPD_CLIENT_TERMSAFE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/*
 * A run's output on its way to a terminal.  Everything passes but control
 * characters: ESC and the other C0 controls except newline, tab, carriage
 * return and backspace are shown in caret notation (ESC as ^[), DEL as ^?,
 * C1 controls (U+0080..U+009F, and stray bytes 0x80..0x9F) as \u00XX or
 * \xXX.  Chunks may split a UTF-8 sequence anywhere; the state carries it.
 */
struct ts_stream {
	unsigned char held; /* a 0xC2 lead byte awaiting the next */
	int cont;	    /* continuation bytes still expected */
};

/* Write n bytes of buf to fd through st.  Returns 0 or -errno. */
int ts_stream_write(int fd, struct ts_stream *st, const char *buf, size_t n);
/* The end of the stream: a held lead byte goes out as it was. */
int ts_stream_end(int fd, struct ts_stream *st);

/*
 * One field of a line (a reason, a summary, a path): every control
 * character, C1 included, and the backslash are escaped C-style (\n, \e,
 * \x1b, \\), so the field stays on its line and reads unambiguously.
 * NULL prints as "(null)".
 */
void ts_fputs(FILE *f, const char *s);

/* One argv element, quoted as a POSIX shell would read it back: bare
 * when only safe characters, '...' otherwise, $'...' with C-style escapes
 * when it holds a control character.  An approval shows exactly which
 * strings would run. */
void ts_fputs_arg(FILE *f, const char *s);

#endif
