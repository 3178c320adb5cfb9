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
 * What else is escaped, everywhere below: characters that make what a
 * person reads differ from the bytes that run.  Bidi controls (U+202A..
 * U+202E, U+2066..U+2069, U+200E, U+200F, U+061C) reorder the text around
 * them; zero-width and other invisible format characters (U+200B..U+200D,
 * U+2060..U+2064, U+FEFF, U+00AD, tag characters U+E0000..U+E007F,
 * variation selectors but U+FE0E/U+FE0F, Hangul fillers and the rest of
 * general category Cf) hide bytes; U+2028 and U+2029 break the line.
 * Each is shown as \uXXXX (\UXXXXXXXX above U+FFFF), as a shell's $'...'
 * reads it back.  A run of blanks (space, and in a stream tab; the Unicode
 * spaces U+00A0, U+2000..U+200A and the like) longer than the limit below
 * keeps its first characters and the rest becomes "\{N blanks elided}",
 * so that a long one cannot push what follows out of sight.
 */

/* Blanks shown in a field or an argv element before the rest of the run is
 * elided: more than any honest argument or message aligns with, far fewer
 * than a line's width. */
#define TS_FIELD_BLANKS_MAX 16
/* The same for a run's output: column padding and deep indentation pass
 * (pytest pads a line to 80 columns), while a flood that would blank a
 * whole 80x24 screen (1,920 cells) is cut to less than a fifth of it. */
#define TS_STREAM_BLANKS_MAX 256

/*
 * A run's output on its way to a terminal.  Everything passes but control
 * characters and the characters above: ESC and the other C0 controls
 * except newline, tab, carriage return and backspace are shown in caret
 * notation (ESC as ^[), DEL as ^?, C1 controls (U+0080..U+009F) as \u00XX,
 * stray bytes 0x80..0x9F as \xXX.  Chunks may split a UTF-8 sequence or a
 * run of blanks anywhere; the state carries both.  Zero it before use.
 */
struct ts_stream {
	unsigned char seq[4]; /* a UTF-8 sequence begun, not yet complete */
	unsigned char have;   /* bytes of it in seq */
	size_t blanks;	      /* length of the run of blanks in progress */
};

/* Write n bytes of buf to fd through st.  Returns 0 or -errno. */
int ts_stream_write(int fd, struct ts_stream *st, const char *buf, size_t n);
/* The end of the stream: an incomplete UTF-8 sequence goes out as it was,
 * the count of an elided run of blanks is shown.  Returns 0 or -errno. */
int ts_stream_end(int fd, struct ts_stream *st);

/*
 * One field of a line (a reason, a summary, a path): every control
 * character, C1 included, and the backslash are escaped C-style (\n, \e,
 * \x1b, \\), the characters above as \uXXXX, a run of blanks longer than
 * TS_FIELD_BLANKS_MAX elided, so the field stays on its line and reads
 * unambiguously.
 * NULL prints as "(null)".
 */
void ts_fputs(FILE *f, const char *s);

/* ts_fputs into a new string (free it), for text a person reads through
 * another program: an MCP client's elicitation, a progress message.  NULL
 * when out of memory. */
char *ts_strdup(const char *s);

/* One argv element, quoted as a POSIX shell would read it back: bare
 * when only safe characters, '...' otherwise, $'...' with C-style escapes
 * when it holds a control character, a character above or a run of blanks
 * it elides.  An approval shows exactly which strings would run. */
void ts_fputs_arg(FILE *f, const char *s);

#endif
