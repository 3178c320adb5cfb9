/*
 * The one word splitter (common/words.h) of spd.conf's policy lists and
 * a project's checks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "strv.h"
#include "words.h"

void words_free(char **words)
{
	strv_free_array(words);
}

/* The word starting at *pp into w (room for the whole line); advances
 * *pp past it.  Returns its length or -EINVAL. */
static long word_at(const char **pp, char *w)
{
	const char *p = *pp;
	size_t n = 0;

	for (; *p && *p != ' ' && *p != '\t' && *p != '\n'; p++) {
		if (*p == '\'') {
			const char *e = strchr(p + 1, '\'');

			if (!e)
				return -EINVAL;
			memcpy(w + n, p + 1, (size_t)(e - p - 1));
			n += (size_t)(e - p - 1);
			p = e;
		} else if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				if (*p == '\\' && p[1] &&
				    strchr("\"\\$`", p[1]))
					p++;
				else if (*p == '$' || *p == '`')
					return -EINVAL;
				w[n++] = *p;
			}
			if (*p != '"')
				return -EINVAL;
		} else if (*p == '\\') {
			if (!p[1])
				return -EINVAL;
			w[n++] = *++p;
		} else if (strchr("|&;<>()`$", *p)) {
			return -EINVAL;
		} else {
			w[n++] = *p;
		}
	}
	*pp = p;
	return (long)n;
}

int words_split(const char *s, size_t max, char ***ret)
{
	size_t len = strlen(s), n = 0;
	char **v, *w = NULL;
	int r = -ENOMEM;

	if (len > WORDS_LINE_MAX)
		return -E2BIG;
	v = calloc(max + 1, sizeof(*v));
	w = malloc(len + 1);
	if (!v || !w)
		goto fail;
	for (const char *p = s; *p;) {
		long k;

		if (*p == ' ' || *p == '\t' || *p == '\n') {
			p++;
			continue;
		}
		if (n >= max) {
			r = -E2BIG;
			goto fail;
		}
		if ((k = word_at(&p, w)) < 0) {
			r = (int)k;
			goto fail;
		}
		v[n] = strndup(w, (size_t)k);
		if (!v[n++])
			goto fail;
	}
	free(w);
	*ret = v;
	return (int)n;
fail:
	free(w);
	words_free(v);
	return r;
}
