/*
 * Fuzz client/termsafe.c, which every byte a run prints (and every string
 * an agent chooses) goes through on its way to the operator's terminal.
 *
 * Checked for every input, split into chunks at points the input picks:
 *   - the stream never lets ESC, another C0 control but newline, tab,
 *     carriage return and backspace, DEL, a UTF-8 C1 control (C2 80..9F)
 *     or a stray byte 0x80..0x9F reach the output; and when the input
 *     holds none of them, the output is the input, byte for byte;
 *   - a field and an argv element printed with ts_fputs / ts_fputs_arg
 *     hold no control character at all.
 */
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/termsafe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool c1_or_control(const uint8_t *p, size_t n, bool stream)
{
	int cont = 0;

	for (size_t i = 0; i < n; i++) {
		uint8_t c = p[i];

		if (cont > 0 && c >= 0x80 && c <= 0xbf) {
			cont--;
			continue;
		}
		cont = 0;
		if (c == 0x1b || c == 0x7f)
			return true;
		if (c < 0x20 && !(stream && (c == '\n' || c == '\t' ||
					     c == '\r' || c == '\b')))
			return true;
		if (c == 0xc2 && i + 1 < n && p[i + 1] >= 0x80 &&
		    p[i + 1] <= 0x9f)
			return true;
		if (c >= 0x80 && c <= 0x9f)
			return true;
		cont = c >= 0xc2 && c <= 0xdf	? 1
		       : c >= 0xe0 && c <= 0xef ? 2
		       : c >= 0xf0 && c <= 0xf4 ? 3
						: 0;
	}
	return false;
}

static void check_stream(const uint8_t *data, size_t size)
{
	struct ts_stream st = {0};
	uint8_t *out = malloc(8 * size + 16);
	size_t got = 0, off = 0, step = 1 + (size ? data[0] % 7 : 0);
	int p[2];

	if (!out || pipe2(p, O_NONBLOCK) < 0)
		abort();
	/* Output may be up to 6 bytes per input byte: feed in small chunks
	 * and drain as we go, so that the pipe never fills. */
	while (off < size) {
		size_t n = size - off < step ? size - off : step;
		ssize_t r;

		if (ts_stream_write(p[1], &st, (const char *)data + off, n) < 0)
			abort();
		off += n;
		while ((r = read(p[0], out + got, 8 * size + 16 - got)) > 0)
			got += (size_t)r;
	}
	ts_stream_end(p[1], &st);
	close(p[1]);
	for (ssize_t r; (r = read(p[0], out + got, 8 * size + 16 - got)) > 0;)
		got += (size_t)r;
	close(p[0]);
	if (c1_or_control(out, got, true))
		abort();
	if (!c1_or_control(data, size, true) &&
	    (got != size || memcmp(out, data, size) != 0))
		abort();
	free(out);
}

static void check_field(void (*fn)(FILE *, const char *), const char *s)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		abort();
	fn(f, s);
	fclose(f);
	if (c1_or_control((const uint8_t *)out, len, false))
		abort();
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size > 65536)
		return 0;
	check_stream(data, size);
	s = malloc(size + 1);
	if (!s)
		abort();
	memcpy(s, data, size);
	s[size] = 0;
	check_field(ts_fputs, s);
	check_field(ts_fputs_arg, s);
	free(s);
	return 0;
}
