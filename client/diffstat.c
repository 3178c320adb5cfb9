/*
 * spctl session diff --stat: the per-file summary of a unified diff.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/diffstat.h"
#include "client/termsafe.h"

static bool starts(const char *line, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);

	return n >= k && memcmp(line, prefix, k) == 0;
}

static int set_path(struct diffstat_file *f, const char *p, size_t n)
{
	char *s = strndup(p, n);

	if (!s)
		return -ENOMEM;
	free(f->path);
	f->path = s;
	return 0;
}

/* "diff --git a/P b/P": P when both names are the same (the usual case;
 * a rename says its names on lines of its own). */
static int path_of_header(struct diffstat_file *f, const char *line, size_t n)
{
	const char *p = line + strlen("diff --git ");
	size_t rest = n - strlen("diff --git "), len;

	/* "a/" P " b/" P: 2 * len + 5 bytes. */
	if (rest < 7 || (rest - 5) % 2 != 0)
		return set_path(f, p, rest);
	len = (rest - 5) / 2;
	if (memcmp(p, "a/", 2) == 0 && memcmp(p + 2 + len, " b/", 3) == 0 &&
	    memcmp(p + 2, p + 5 + len, len) == 0)
		return set_path(f, p + 2, len);
	return set_path(f, p, rest);
}

static struct diffstat_file *add_file(struct diffstat *d)
{
	struct diffstat_file *v = realloc(d->files, (d->n + 1) * sizeof(*v));

	if (!v)
		return NULL;
	d->files = v;
	memset(&v[d->n], 0, sizeof(v[d->n]));
	return &v[d->n++];
}

/* One line of a file's section: its headers before the first hunk, then
 * the hunks' lines (a '+' or '-' there is content, whatever follows it). */
static int parse_line(struct diffstat_file *f, bool *in_hunk, char **rename,
		      const char *line, size_t n)
{
	if (*in_hunk) {
		if (n > 0 && line[0] == '+')
			f->added++;
		else if (n > 0 && line[0] == '-')
			f->removed++;
		return 0;
	}
	if (starts(line, n, "@@")) {
		*in_hunk = true;
		return 0;
	}
	if (starts(line, n, "Binary files ") || starts(line, n, "GIT binary")) {
		f->binary = true;
		return 0;
	}
	if (starts(line, n, "+++ b/") && !*rename)
		return set_path(f, line + 6, n - 6);
	if (starts(line, n, "--- a/") && !f->path)
		return set_path(f, line + 6, n - 6);
	if (starts(line, n, "rename from ")) {
		free(*rename);
		*rename = strndup(line + 12, n - 12);
		return *rename ? 0 : -ENOMEM;
	}
	if (starts(line, n, "rename to ") && *rename) {
		char *s = NULL;

		if (asprintf(&s, "%s => %.*s", *rename, (int)(n - 10),
			     line + 10) < 0)
			return -ENOMEM;
		free(f->path);
		f->path = s;
	}
	return 0;
}

int diffstat_parse(const char *text, struct diffstat *ret)
{
	struct diffstat d = {0};
	struct diffstat_file *f = NULL;
	char *rename = NULL;
	bool in_hunk = false;
	const char *p = text ? text : "", *nl;
	int r = 0;

	for (; *p && r == 0; p = nl ? nl + 1 : p + strlen(p)) {
		size_t n;

		nl = strchr(p, '\n');
		n = nl ? (size_t)(nl - p) : strlen(p);
		if (starts(p, n, "diff --git ")) {
			free(rename);
			rename = NULL;
			in_hunk = false;
			f = add_file(&d);
			r = f ? path_of_header(f, p, n) : -ENOMEM;
		} else if (f) {
			r = parse_line(f, &in_hunk, &rename, p, n);
		}
	}
	free(rename);
	if (r < 0) {
		diffstat_free(&d);
		return r;
	}
	for (size_t i = 0; i < d.n; i++) {
		d.added += d.files[i].added;
		d.removed += d.files[i].removed;
	}
	*ret = d;
	return 0;
}

void diffstat_free(struct diffstat *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->n; i++)
		free(d->files[i].path);
	free(d->files);
	memset(d, 0, sizeof(*d));
}

/* The path as printed (escaped), and its width in bytes. */
static char *shown(const char *path)
{
	char *b = NULL;
	size_t n = 0;
	FILE *m = open_memstream(&b, &n);

	if (!m)
		return NULL;
	ts_fputs(m, path ? path : "?");
	fclose(m);
	return b;
}

static size_t bar_len(size_t count, size_t max)
{
	size_t len;

	if (max <= DIFFSTAT_BAR_MAX || count == 0)
		return count;
	len = count * DIFFSTAT_BAR_MAX / max;
	return len ? len : 1;
}

void diffstat_print(FILE *f, const struct diffstat *d)
{
	size_t width = 0, max = 0, digits = 1;
	char **names;

	if (!d || d->n == 0)
		return;
	names = calloc(d->n, sizeof(*names));
	if (!names)
		return;
	for (size_t i = 0; i < d->n; i++) {
		size_t total = d->files[i].added + d->files[i].removed;

		names[i] = shown(d->files[i].path);
		if (names[i] && strlen(names[i]) > width)
			width = strlen(names[i]);
		if (total > max)
			max = total;
	}
	for (size_t m = max; m >= 10; m /= 10)
		digits++;
	for (size_t i = 0; i < d->n; i++) {
		const struct diffstat_file *x = &d->files[i];

		fprintf(f, " %-*s | ", (int)width, names[i] ? names[i] : "?");
		if (x->binary && x->added + x->removed == 0) {
			fputs("Bin\n", f);
			continue;
		}
		fprintf(f, "%*zu ", (int)digits, x->added + x->removed);
		for (size_t k = bar_len(x->added, max); k > 0; k--)
			fputc('+', f);
		for (size_t k = bar_len(x->removed, max); k > 0; k--)
			fputc('-', f);
		fputc('\n', f);
	}
	fprintf(f, " %zu file%s changed", d->n, d->n == 1 ? "" : "s");
	if (d->added)
		fprintf(f, ", %zu insertion%s(+)", d->added,
			d->added == 1 ? "" : "s");
	if (d->removed)
		fprintf(f, ", %zu deletion%s(-)", d->removed,
			d->removed == 1 ? "" : "s");
	fputc('\n', f);
	for (size_t i = 0; i < d->n; i++)
		free(names[i]);
	free(names);
}
