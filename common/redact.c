/*
 * The redactor: see redact.h for what is matched.
 *
 * How a pass works.  Let span be the length of the shortest pattern
 * (capped at FILTER_SPAN_MAX) and k = span - QGRAM + 1.  Any occurrence
 * starting at s has, at each of the k positions s .. s+span-QGRAM, a
 * QGRAM-byte gram that also occurs within the first span bytes of some
 * pattern; the build step puts those grams into a hashed bitmap.  Exactly
 * one of those k positions is a multiple-of-k "sample" position, so when
 * the gram at sample p is not in the bitmap, no occurrence starts in
 * [p-k+1, p] and those bytes need no further look.  When it is (a hit),
 * the Aho-Corasick automaton is run from p-k+1 (or from where it stopped,
 * if it already got that far) until no partial match that started at or
 * before p is still alive.  So every occurrence is found, only real
 * occurrences are reported, and plain text costs one hashed lookup per k
 * bytes.
 *
 * Each automaton state records the longest pattern that ends there, which
 * is all the union of matched ranges needs.  Reported matches are merged
 * into ranges; a range is written out (as its marker) as soon as no later
 * match can start at or before its start, and the plain text before the
 * "safe" point, where no later match can start, is written at once.  The
 * one-shot and the streamed paths run the same code on absolute offsets,
 * so their output is identical however the input is split.
 *
 * The forms of a value the builder compiles are made in redact_forms.c.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "envscrub.h"
#include "redact.h"
#include "utf8.h"

#define NONE UINT32_MAX
/* Gram length of the sampling filter: one 32-bit load. */
#define QGRAM 4
/*
 * Longest prefix of each pattern whose grams go into the filter.  A longer
 * span means a longer stride between samples but more grams in the bitmap
 * (and so a larger bitmap for the same rate of false hits).  Most keys are
 * 20 bytes or longer, so the span is usually the shortest pattern.
 */
#define FILTER_SPAN_MAX 32
/*
 * Bitmap size: about 64 bits per gram keeps false hits on unrelated text
 * near 1.5%, between 512 bytes and 1 MiB so that it stays in cache.
 */
#define FILTER_BITS_PER_GRAM 64
#define FILTER_LOG2_MIN 12
#define FILTER_LOG2_MAX 23
/*
 * Automaton size limit: a state costs about 40 bytes with its edge, so
 * this caps a set near 160 MiB, far above 100 realistic keys (~100k).
 */
#define MAX_STATES (1u << 22)
/* Any byte of a 32-bit word below 0x21: a cheap test that a sampled gram
 * may hold whitespace (exact for the bytes it clears). */
#define LOW_BYTES(x) (((x)-0x21212121u) & ~(x)&0x80808080u)

struct secret {
	char *name;
	uint8_t *value;
	size_t len;
};

struct redact_builder {
	struct secret *v;
	size_t n, cap;
};

struct ac_state {
	uint32_t fail;
	uint32_t depth;
	uint32_t edge0; /* first of nedge entries in edge_byte/edge_to */
	uint32_t nedge;
	uint32_t out_len;  /* longest pattern ending here, 0 if none */
	uint32_t out_name; /* its secret's index */
	uint32_t dense;	   /* row in dense[], or NONE */
};

struct redact_set {
	struct ac_state *st;
	uint32_t nstates;
	uint8_t *edge_byte;
	bool edge_locked; /* mlock()ed */
	uint32_t *edge_to;
	/* Full transition rows for the root and its children, where the
	 * automaton spends most of its time. */
	uint32_t *dense;
	char **names;
	size_t nnames;
	size_t npatterns;
	size_t maxlen;
	uint64_t *filter;
	unsigned filter_log2;
	size_t stride;
	/* References: the builder's caller and every stream over the set
	 * (redact_stream_new).  The only field ever written after the
	 * build, atomically, so a shared set stays safe across threads. */
	unsigned refs;
	/* A chain (redact_set_chain): the plain sets applied one after the
	 * other, each holding a reference; nothing above is built then but
	 * npatterns and maxlen, which cover them all. */
	struct redact_set **stages;
	size_t nstages;
};

struct range {
	uint64_t start, end;
	uint64_t best_len; /* longest match starting at start */
	uint32_t name;
};

struct redact_stream {
	const struct redact_set *set;
	/* Original offset of each of the last ring_mask + 1 non-whitespace
	 * bytes the automaton read, by their count (ac_c): where a match
	 * found in the whitespace-free view starts in the text. */
	uint64_t *ring;
	uint64_t ring_mask;
	uint64_t ac_c;
	uint32_t ws_run; /* whitespace bytes since the last other byte */
	struct buf hold; /* bytes from base on that may still be needed */
	uint64_t base;
	uint64_t p; /* next sample position */
	uint64_t ac_pos;
	uint64_t hit_p;
	uint32_t ac_state;
	bool ac_on;
	bool stop_on_match; /* redact_contains() */
	bool matched;
	uint64_t out_pos; /* everything before has been written */
	uint64_t open_end;
	struct range *r; /* pending ranges, sorted, disjoint */
	size_t nr, rcap;
	size_t nemitted;
	/* The stream of the next set of a chain: what this one writes goes
	 * through it, except its markers, at which the next is flushed (a
	 * marker ends whatever text the next set was reading). */
	struct redact_stream *sink;
};

/* ---- whitespace, and the values that can be matched ---- */

/*
 * The whitespace the second view of the text leaves out: what wraps
 * (base64 -w, fold, xxd -p), separates (od -tx1) or ends lines (CRLF).
 */
static bool is_ws(uint8_t c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * Whether v can be matched: REDACT_MIN_LEN bytes that are not whitespace
 * (the matcher leaves whitespace out) and no whitespace run longer than
 * REDACT_WS_RUN_MAX (which would end its own match).
 */
static bool value_matchable(const uint8_t *v, size_t n)
{
	size_t k = 0, run = 0;

	for (size_t i = 0; i < n; i++) {
		if (!is_ws(v[i])) {
			k++;
			run = 0;
		} else if (++run > REDACT_WS_RUN_MAX) {
			return false;
		}
	}
	return k >= REDACT_MIN_LEN;
}

/* ---- builder ---- */

int redact_builder_new(struct redact_builder **ret)
{
	struct redact_builder *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	*ret = b;
	return 0;
}

static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > REDACT_MAX_NAME)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return true;
}

int redact_builder_add(struct redact_builder *b, const char *name,
		       const void *value, size_t len)
{
	struct secret sec;

	if (len < REDACT_MIN_LEN || !name || !name_ok(name))
		return -EINVAL;
	if (len > REDACT_MAX_LEN)
		return -E2BIG;
	/* Matching ignores whitespace, so the floor counts the rest. */
	if (!value_matchable(value, len))
		return -EINVAL;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 8;
		struct secret *v = realloc(b->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		b->v = v;
		b->cap = cap;
	}
	sec.name = strdup(name);
	sec.value = malloc(len);
	sec.len = len;
	if (!sec.name || !sec.value) {
		free(sec.name);
		free(sec.value);
		return -ENOMEM;
	}
	memcpy(sec.value, value, len);
	b->v[b->n++] = sec;
	return 0;
}

int redact_builder_add_env(struct redact_builder *b, const char *const *envp)
{
	char name[REDACT_MAX_NAME + 1];
	int count = 0, r;

	for (size_t i = 0; envp && envp[i]; i++) {
		const char *eq = strchr(envp[i], '=');
		size_t nl, vl;

		if (!eq)
			continue;
		nl = (size_t)(eq - envp[i]);
		vl = strlen(eq + 1);
		if (!envscrub_name_is_secret(envp[i], nl) || nl == 0 ||
		    nl > REDACT_MAX_NAME || vl < REDACT_MIN_LEN)
			continue;
		if (vl <= REDACT_MAX_LEN &&
		    !value_matchable((const uint8_t *)eq + 1, vl))
			continue;
		memcpy(name, envp[i], nl);
		name[nl] = '\0';
		if (!name_ok(name))
			continue;
		r = redact_builder_add(b, name, eq + 1, vl);
		if (r < 0)
			return r;
		count++;
	}
	return count;
}

void redact_builder_free(struct redact_builder *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].name);
		/* The value is a secret: do not leave it in freed memory. */
		explicit_bzero(b->v[i].value, b->v[i].len);
		free(b->v[i].value);
	}
	free(b->v);
	free(b);
}

/* The trie while it is being built: first-child/next-sibling lists. */
struct trie {
	uint32_t *child, *sib, *term, *depth;
	uint8_t *byte;
	uint32_t n, cap;
	uint32_t cur; /* secret whose forms are being added */
	size_t npat, minlen, maxlen;
	uint8_t *strip; /* a form without its whitespace */
	size_t strip_cap;
};

static uint32_t trie_find(const struct trie *t, uint32_t u, uint8_t c)
{
	for (uint32_t x = t->child[u]; x != NONE; x = t->sib[x])
		if (t->byte[x] == c)
			return x;
	return NONE;
}

static int trie_grow(struct trie *t)
{
	uint32_t cap = t->cap ? 2 * t->cap : 1024;
	void *p;

	if (cap > MAX_STATES)
		cap = MAX_STATES;
	if (cap <= t->n)
		return -E2BIG;
#define GROW(f)                                                                \
	do {                                                                   \
		p = realloc(t->f, (size_t)cap * sizeof(*t->f));                \
		if (!p)                                                        \
			return -ENOMEM;                                        \
		t->f = p;                                                      \
	} while (0)
	GROW(child);
	GROW(sib);
	GROW(term);
	GROW(depth);
#undef GROW
	/* Not realloc: the old bytes (secrets' forms) are wiped, not left
	 * in freed memory. */
	p = malloc(cap);
	if (!p)
		return -ENOMEM;
	if (t->byte) {
		memcpy(p, t->byte, t->cap);
		explicit_bzero(t->byte, t->cap);
		free(t->byte);
	}
	t->byte = p;
	t->cap = cap;
	return 0;
}

static int trie_node(struct trie *t, uint32_t parent, uint8_t c, uint32_t *ret)
{
	uint32_t x;
	int r;

	if (t->n == t->cap) {
		r = trie_grow(t);
		if (r < 0)
			return r;
	}
	x = t->n++;
	t->child[x] = NONE;
	t->term[x] = NONE;
	t->byte[x] = c;
	if (parent == NONE) {
		t->sib[x] = NONE;
		t->depth[x] = 0;
	} else {
		t->sib[x] = t->child[parent];
		t->child[parent] = x;
		t->depth[x] = t->depth[parent] + 1;
	}
	*ret = x;
	return 0;
}

static int trie_add(const void *form, size_t n, void *userdata)
{
	struct trie *t = userdata;
	const uint8_t *f = form;
	uint32_t u = 0;
	size_t k = 0;
	int r;

	/* The automaton reads the text with its whitespace left out, so it
	 * holds each form the same way. */
	if (n > t->strip_cap)
		return -E2BIG;
	for (size_t i = 0; i < n; i++)
		if (!is_ws(f[i]))
			t->strip[k++] = f[i];
	f = t->strip;
	n = k;
	for (size_t i = 0; i < n; i++) {
		uint32_t x = trie_find(t, u, f[i]);

		if (x == NONE) {
			r = trie_node(t, u, f[i], &x);
			if (r < 0)
				return r;
		}
		u = x;
	}
	/* The same bytes under an earlier name keep that name. */
	if (t->term[u] != NONE)
		return 0;
	t->term[u] = t->cur;
	t->npat++;
	if (t->npat == 1 || n < t->minlen)
		t->minlen = n;
	if (n > t->maxlen)
		t->maxlen = n;
	return 0;
}

static void trie_free(struct trie *t)
{
	/* Its bytes spell out every form of every secret. */
	if (t->byte)
		explicit_bzero(t->byte, t->cap);
	if (t->strip)
		explicit_bzero(t->strip, t->strip_cap);
	free(t->strip);
	free(t->child);
	free(t->sib);
	free(t->term);
	free(t->depth);
	free(t->byte);
}

static uint32_t gram_hash(uint32_t g, unsigned log2)
{
	return (g * 0x9e3779b1u) >> (32 - log2);
}

static uint32_t load_gram(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* Lay the trie out in breadth-first order with failure links, outputs,
 * dense rows and the sampling filter. */
static int set_compile(struct redact_set *s, const struct trie *t)
{
	uint32_t *order = NULL, *newid = NULL, *fail = NULL, *gram = NULL;
	uint32_t n = t->n, ndense = 0, nedge = 0;
	size_t span, ngrams = 0;
	int r = -ENOMEM;

	order = malloc((size_t)n * sizeof(*order));
	newid = malloc((size_t)n * sizeof(*newid));
	fail = malloc((size_t)n * sizeof(*fail));
	gram = malloc((size_t)n * sizeof(*gram));
	s->st = calloc(n, sizeof(*s->st));
	s->edge_byte = malloc(n);
	s->edge_to = malloc((size_t)n * sizeof(*s->edge_to));
	if (!order || !newid || !fail || !gram || !s->st || !s->edge_byte ||
	    !s->edge_to)
		goto out;
	/* The edge bytes spell out every secret: kept out of swap where the
	 * memory-lock limit allows (best effort; they are wiped on free). */
	s->edge_locked = mlock(s->edge_byte, n) == 0;
	s->nstates = n;
	s->npatterns = t->npat;
	s->maxlen = t->maxlen;
	span = t->minlen < FILTER_SPAN_MAX ? t->minlen : FILTER_SPAN_MAX;

	/* Breadth-first: failure links point to shallower states, which
	 * are therefore done first. */
	uint32_t head = 0, tail = 0;
	order[tail++] = 0;
	fail[0] = 0;
	gram[0] = 0;
	while (head < tail) {
		uint32_t u = order[head];
		struct ac_state *x = &s->st[head];

		newid[u] = head++;
		x->depth = t->depth[u];
		x->edge0 = nedge;
		if (t->term[u] != NONE) {
			x->out_len = t->depth[u];
			x->out_name = t->term[u];
		} else if (u != 0) {
			x->out_len = s->st[newid[fail[u]]].out_len;
			x->out_name = s->st[newid[fail[u]]].out_name;
		}
		x->dense = NONE;
		if (t->depth[u] <= 1)
			x->dense = ndense++;
		if (t->depth[u] >= QGRAM && t->depth[u] <= span)
			ngrams++;
		for (uint32_t v = t->child[u]; v != NONE; v = t->sib[v]) {
			uint8_t c = t->byte[v];
			uint32_t f = fail[u], w = NONE;

			if (u != 0) {
				while ((w = trie_find(t, f, c)) == NONE &&
				       f != 0)
					f = fail[f];
			}
			fail[v] = (w != NONE && w != v) ? w : 0;
			gram[v] = gram[u] >> 8 | (uint32_t)c << 24;
			s->edge_byte[nedge++] = c;
			order[tail++] = v;
		}
		x->nedge = nedge - x->edge0;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t u = order[i];

		s->st[i].fail = newid[fail[u]];
	}
	for (uint32_t i = 0, e = 0; i < n; i++)
		for (uint32_t v = t->child[order[i]]; v != NONE; v = t->sib[v])
			s->edge_to[e++] = newid[v];

	s->dense = malloc((size_t)ndense * 256 * sizeof(*s->dense));
	if (!s->dense)
		goto out;
	for (uint32_t i = 0; i < n && s->st[i].depth <= 1; i++) {
		uint32_t *row = s->dense + (size_t)s->st[i].dense * 256;

		/* A child of the root falls back to the root's row. */
		for (unsigned c = 0; c < 256; c++)
			row[c] = i == 0 ? 0 : s->dense[c];
		for (uint32_t e = 0; e < s->st[i].nedge; e++)
			row[s->edge_byte[s->st[i].edge0 + e]] =
			    s->edge_to[s->st[i].edge0 + e];
	}

	s->filter_log2 = FILTER_LOG2_MIN;
	while (s->filter_log2 < FILTER_LOG2_MAX &&
	       ((size_t)1 << s->filter_log2) < ngrams * FILTER_BITS_PER_GRAM)
		s->filter_log2++;
	s->filter =
	    calloc(((size_t)1 << s->filter_log2) / 64, sizeof(uint64_t));
	if (!s->filter)
		goto out;
	for (uint32_t u = 0; u < n; u++) {
		if (t->depth[u] >= QGRAM && t->depth[u] <= span) {
			uint32_t h = gram_hash(gram[u], s->filter_log2);

			s->filter[h >> 6] |= (uint64_t)1 << (h & 63);
		}
	}
	s->stride = span >= QGRAM ? span - QGRAM + 1 : 1;
	r = 0;
out:
	free(order);
	free(newid);
	free(fail);
	free(gram);
	return r;
}

int redact_builder_build(struct redact_builder *b, struct redact_set **ret)
{
	struct trie t = {0};
	struct redact_set *s = NULL;
	uint32_t root;
	int r;

	s = calloc(1, sizeof(*s));
	if (!s) {
		r = -ENOMEM;
		goto out;
	}
	s->refs = 1;
	r = trie_node(&t, NONE, 0, &root);
	if (r < 0)
		goto out;
	for (size_t i = 0; i < b->n; i++)
		if (REDACT_FORM_MAX(b->v[i].len) > t.strip_cap)
			t.strip_cap = REDACT_FORM_MAX(b->v[i].len);
	t.strip = malloc(t.strip_cap ? t.strip_cap : 1);
	if (!t.strip) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b->n; i++) {
		t.cur = (uint32_t)i;
		r = redact_forms(b->v[i].value, b->v[i].len, trie_add, &t);
		if (r < 0)
			goto out;
	}
	r = set_compile(s, &t);
	if (r < 0)
		goto out;
	s->names = calloc(b->n ? b->n : 1, sizeof(*s->names));
	if (!s->names) {
		r = -ENOMEM;
		goto out;
	}
	s->nnames = b->n;
	for (size_t i = 0; i < b->n; i++) {
		s->names[i] = b->v[i].name;
		b->v[i].name = NULL;
	}
	*ret = s;
	s = NULL;
	r = 0;
out:
	trie_free(&t);
	redact_set_free(s);
	redact_builder_free(b);
	return r;
}

/* The count is not part of what the set means: a stream reads a const
 * set and still shares it, which is what the count counts. */
static struct redact_set *set_mutable(const struct redact_set *s)
{
	return (struct redact_set *)(uintptr_t)s;
}

struct redact_set *redact_set_ref(struct redact_set *s)
{
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
	return s;
}

void redact_set_free(struct redact_set *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (size_t i = 0; i < s->nstages; i++)
		redact_set_free(s->stages[i]);
	free(s->stages);
	for (size_t i = 0; i < s->nnames; i++)
		free(s->names[i]);
	free(s->names);
	/* The automaton spells out every secret: wipe it. */
	if (s->edge_byte) {
		explicit_bzero(s->edge_byte, s->nstates);
		if (s->edge_locked)
			munlock(s->edge_byte, s->nstates);
	}
	free(s->edge_byte);
	free(s->edge_to);
	free(s->st);
	free(s->dense);
	free(s->filter);
	free(s);
}

size_t redact_set_count(const struct redact_set *s)
{
	return s->npatterns;
}

size_t redact_set_max_len(const struct redact_set *s)
{
	return s->maxlen;
}

/* Append the plain sets of s that match anything to the stages of c. */
static void chain_take(struct redact_set *c, const struct redact_set *s)
{
	if (s->nstages) {
		for (size_t i = 0; i < s->nstages; i++)
			chain_take(c, s->stages[i]);
		return;
	}
	if (s->npatterns == 0)
		return;
	c->stages[c->nstages++] = redact_set_ref(set_mutable(s));
	c->npatterns += s->npatterns;
	if (s->maxlen > c->maxlen)
		c->maxlen = s->maxlen;
}

int redact_set_chain(const struct redact_set *a, const struct redact_set *b,
		     struct redact_set **ret)
{
	size_t n =
	    (a->nstages ? a->nstages : 1) + (b->nstages ? b->nstages : 1);
	struct redact_set *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->refs = 1;
	c->stages = calloc(n, sizeof(*c->stages));
	if (!c->stages) {
		free(c);
		return -ENOMEM;
	}
	chain_take(c, a);
	chain_take(c, b);
	/* One set that matches anything is itself; none, an empty one. */
	if (c->nstages <= 1) {
		struct redact_set *one = c->nstages
					     ? redact_set_ref(c->stages[0])
					     : redact_set_ref(set_mutable(a));

		redact_set_free(c);
		*ret = one;
		return 0;
	}
	*ret = c;
	return 0;
}

/* ---- matching ---- */

static uint32_t ac_step(const struct redact_set *s, uint32_t q, uint8_t c)
{
	for (;;) {
		const struct ac_state *x = &s->st[q];

		if (x->dense != NONE)
			return s->dense[(size_t)x->dense * 256 + c];
		for (uint32_t e = x->edge0; e < x->edge0 + x->nedge; e++)
			if (s->edge_byte[e] == c)
				return s->edge_to[e];
		q = x->fail;
	}
}

static bool filter_has(const struct redact_set *s, uint32_t g)
{
	uint32_t h = gram_hash(g, s->filter_log2);

	return (s->filter[h >> 6] >> (h & 63)) & 1;
}

enum { SAMPLE_MISS, SAMPLE_HIT, SAMPLE_MORE };

/*
 * The sample at p when the 4 bytes there may hold whitespace: the gram
 * is then the next QGRAM bytes of the whitespace-free view, read across
 * runs of at most REDACT_WS_RUN_MAX.  SAMPLE_MORE when they run past avail.
 */
static int sample_slow(const struct redact_set *s, const uint8_t *data,
		       uint64_t base, uint64_t p, uint64_t avail)
{
	uint32_t g = 0, run = 0;
	unsigned n = 0;

	for (uint64_t i = p; n < QGRAM; i++) {
		uint8_t c;

		if (i >= avail)
			return SAMPLE_MORE;
		c = data[i - base];
		if (is_ws(c)) {
			if (++run > REDACT_WS_RUN_MAX)
				return SAMPLE_MISS;
			continue;
		}
		run = 0;
		g |= (uint32_t)c << (8 * n++);
	}
	return filter_has(s, g) ? SAMPLE_HIT : SAMPLE_MISS;
}

/* Where the automaton's live partial match begins in the text: its
 * first byte, or pos when there is none. */
static uint64_t part_start(const struct redact_stream *st, uint32_t q,
			   uint64_t pos)
{
	uint32_t d = st->set->st[q].depth;

	return d ? st->ring[(st->ac_c - d) & st->ring_mask] : pos;
}

static void range_merge(struct range *a, const struct range *b)
{
	if (b->start < a->start ||
	    (b->start == a->start && b->best_len > a->best_len)) {
		a->start = b->start;
		a->best_len = b->best_len;
		a->name = b->name;
	}
	if (b->end > a->end)
		a->end = b->end;
}

/* A match [start, end) of the secret name, len bytes of it not
 * whitespace.  Returns 1 to stop the scan
 * (redact_contains), 0, or -ENOMEM. */
static int report(struct redact_stream *st, uint64_t start, uint64_t end,
		  uint32_t len, uint32_t name)
{
	struct range nr = {start, end, len, name};

	st->matched = true;
	if (st->stop_on_match)
		return 1;
	while (st->nr > 0 && st->r[st->nr - 1].end > nr.start)
		range_merge(&nr, &st->r[--st->nr]);
	/* The range already written as a marker can only grow to the right. */
	if (nr.start < st->open_end) {
		if (nr.end > st->open_end)
			st->open_end = nr.end;
		if (nr.end > st->out_pos)
			st->out_pos = nr.end;
		return 0;
	}
	if (st->nr == st->rcap) {
		size_t cap = st->rcap ? 2 * st->rcap : 16;
		struct range *p = realloc(st->r, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		st->r = p;
		st->rcap = cap;
	}
	st->r[st->nr++] = nr;
	return 0;
}

/* Advance the filter and the automaton over data[0 .. avail-base).
 * Returns 0, 1 (stopped at a match) or -ENOMEM. */
static int scan(struct redact_stream *st, const uint8_t *data, uint64_t base,
		uint64_t avail)
{
	const struct redact_set *s = st->set;
	const uint64_t k = s->stride;
	int r;

	if (s->npatterns == 0)
		return 0;
	for (;;) {
		if (st->ac_on) {
			uint32_t q = st->ac_state;
			uint64_t pos = st->ac_pos;

			for (;;) {
				uint8_t c;

				/* Stop once every live partial match started
				 * after the sample that woke us. */
				if (pos > st->hit_p &&
				    part_start(st, q, pos) > st->hit_p) {
					st->ac_on = false;
					break;
				}
				if (pos >= avail)
					break;
				c = data[pos - base];
				pos++;
				/* The whitespace-free view: a short run is
				 * skipped, a long one breaks any match. */
				if (is_ws(c)) {
					if (++st->ws_run > REDACT_WS_RUN_MAX)
						q = 0;
					continue;
				}
				st->ws_run = 0;
				st->ring[st->ac_c++ & st->ring_mask] = pos - 1;
				q = ac_step(s, q, c);
				if (s->st[q].out_len) {
					uint32_t l = s->st[q].out_len;

					r = report(st,
						   st->ring[(st->ac_c - l) &
							    st->ring_mask],
						   pos, l, s->st[q].out_name);
					if (r) {
						st->ac_state = q;
						st->ac_pos = pos;
						return r;
					}
				}
			}
			st->ac_state = q;
			st->ac_pos = pos;
			if (st->ac_on)
				return 0;
		}

		uint64_t p = st->p;
		for (;; p += k) {
			uint32_t g;

			if (p + QGRAM > avail) {
				st->p = p;
				return 0;
			}
			g = load_gram(data + (p - base));
			if (!LOW_BYTES(g)) {
				if (filter_has(s, g))
					break;
				continue;
			}
			r = sample_slow(s, data, base, p, avail);
			if (r == SAMPLE_HIT)
				break;
			if (r == SAMPLE_MORE) {
				/* At the end of the input there is no
				 * room left for a match from here. */
				st->p = p;
				return 0;
			}
		}
		if (st->ac_pos < p - k + 1) {
			st->ac_state = 0;
			st->ac_pos = p - k + 1;
			st->ws_run = 0;
		}
		st->ac_on = true;
		st->hit_p = p;
		st->p = p + k;
	}
}

/* The first offset at which a match not yet reported could start. */
static uint64_t safe_point(const struct redact_stream *st, uint64_t avail,
			   bool final)
{
	const struct redact_set *s = st->set;
	uint64_t ac, samp;

	if (final || s->npatterns == 0)
		return avail;
	ac = part_start(st, st->ac_state, st->ac_pos);
	if (st->ac_on)
		return ac;
	samp = st->p - s->stride + 1;
	return ac > samp ? ac : samp;
}

static int put_marker(struct buf *out, const char *name)
{
	int r = buf_puts(out, "[redacted:");

	if (!r)
		r = buf_puts(out, name);
	if (!r)
		r = buf_puts(out, "]");
	return r;
}

/* Text that can no longer change: to out, or through the next set's
 * stream of a chain. */
static int put_text(struct redact_stream *st, const uint8_t *p, size_t n,
		    struct buf *out)
{
	return st->sink ? redact_stream_feed(st->sink, p, n, out)
			: buf_append(out, p, n);
}

/* A marker goes to out as it is: the next set of a chain first writes
 * out what it read before it, and starts over after it. */
static int put_marker_after(struct redact_stream *st, const char *name,
			    struct buf *out)
{
	if (st->sink) {
		int r = redact_stream_flush(st->sink, out);

		if (r < 0)
			return r;
	}
	return put_marker(out, name);
}

/* Write what can no longer change, up to safe. */
static int emit(struct redact_stream *st, const uint8_t *data, uint64_t base,
		uint64_t safe, struct buf *out)
{
	size_t i = 0;
	int r = 0;

	for (; i < st->nr && st->r[i].start < safe; i++) {
		const struct range *x = &st->r[i];

		if (st->out_pos < x->start) {
			r = put_text(st, data + (st->out_pos - base),
				     x->start - st->out_pos, out);
			if (r < 0)
				goto out;
		}
		r = put_marker_after(st, st->set->names[x->name], out);
		if (r < 0)
			goto out;
		st->nemitted++;
		st->open_end = x->end;
		st->out_pos = x->end;
	}
	if (st->out_pos < safe) {
		r = put_text(st, data + (st->out_pos - base),
			     safe - st->out_pos, out);
		if (r < 0)
			goto out;
		st->out_pos = safe;
	}
out:
	if (i) {
		memmove(st->r, st->r + i, (st->nr - i) * sizeof(*st->r));
		st->nr -= i;
	}
	return r;
}

/* The first offset the stream must still hold. */
static uint64_t keep_from(const struct redact_stream *st, uint64_t avail)
{
	uint64_t need;

	if (st->set->npatterns == 0)
		return st->out_pos < avail ? st->out_pos : avail;
	/* The automaton resumes at ac_pos, the filter at sample p, unless
	 * the automaton is idle and behind p's interval: then it restarts at
	 * the interval's first byte. */
	if (!st->ac_on && st->ac_pos < st->p - st->set->stride + 1)
		need = st->p - st->set->stride + 1;
	else
		need = st->ac_pos < st->p ? st->ac_pos : st->p;
	return st->out_pos < need ? st->out_pos : need;
}

/* Reset st to the start of a text, keeping its ring (ring may be NULL). */
static void stream_reset(struct redact_stream *st, const struct redact_set *s,
			 uint64_t *ring, uint64_t ring_mask)
{
	memset(st, 0, sizeof(*st));
	st->set = s;
	st->p = s->stride - 1;
	st->ring = ring;
	st->ring_mask = ring_mask;
}

/* Start st over s.  Returns 0 or -ENOMEM. */
static int stream_init(struct redact_stream *st, const struct redact_set *s)
{
	uint64_t n = 1;
	uint64_t *ring;

	/* A partial match is at most maxlen bytes deep. */
	while (n <= s->maxlen)
		n <<= 1;
	ring = malloc(n * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	stream_reset(st, s, ring, n - 1);
	return 0;
}

/* redact_buf over a chain: its streams in series over the whole input. */
static int chain_buf(const struct redact_set *s, const void *in, size_t n,
		     char **ret_out, size_t *ret_len)
{
	struct redact_stream *st = NULL;
	struct buf out = BUF_INIT;
	size_t count = 0;
	int r;

	r = redact_stream_new(s, &st);
	if (r < 0)
		return r;
	r = buf_reserve(&out, n);
	if (r == 0)
		r = redact_stream_feed(st, in, n, &out);
	if (r == 0)
		r = redact_stream_flush(st, &out);
	if (r == 0)
		r = buf_append(&out, "", 0);
	if (r == 0) {
		for (const struct redact_stream *x = st; x; x = x->sink)
			count += x->nemitted;
		*ret_out = out.data;
		*ret_len = out.len;
		out.data = NULL;
		r = count > INT32_MAX ? INT32_MAX : (int)count;
	}
	buf_free(&out);
	redact_stream_free(st);
	return r;
}

int redact_buf(const struct redact_set *s, const void *in, size_t n,
	       char **ret_out, size_t *ret_len)
{
	struct redact_stream st;
	struct buf out = BUF_INIT;
	int r;

	if (s->nstages)
		return chain_buf(s, in, n, ret_out, ret_len);
	r = stream_init(&st, s);
	if (r < 0)
		return r;
	/* Output is rarely longer than the input. */
	r = buf_reserve(&out, n);
	if (r < 0)
		goto out;
	r = scan(&st, in, 0, n);
	if (r < 0)
		goto out;
	r = emit(&st, in, 0, n, &out);
	if (r < 0)
		goto out;
	r = buf_append(&out, "", 0); /* NUL-terminated even when empty */
	if (r < 0)
		goto out;
	*ret_out = out.data;
	*ret_len = out.len;
	out.data = NULL;
	r = st.nemitted > INT32_MAX ? INT32_MAX : (int)st.nemitted;
out:
	buf_free(&out);
	free(st.r);
	free(st.ring);
	return r;
}

int redact_contains(const struct redact_set *s, const void *in, size_t n)
{
	struct redact_stream st;

	for (size_t i = 0; i < s->nstages; i++)
		if (redact_contains(s->stages[i], in, n))
			return 1;
	if (s->nstages)
		return 0;
	/* Without memory to look, say yes: callers refuse on a match. */
	if (stream_init(&st, s) < 0)
		return 1;
	st.stop_on_match = true;
	if (scan(&st, in, 0, n) < 0)
		st.matched = true;
	free(st.r);
	free(st.ring);
	return st.matched ? 1 : 0;
}

int redact_stream_new(const struct redact_set *s, struct redact_stream **ret)
{
	struct redact_stream *st;

	if (s->nstages) {
		struct redact_stream *head = NULL, **link = &head;

		/* One stream per set, each writing through the next. */
		for (size_t i = 0; i < s->nstages; i++) {
			int r = redact_stream_new(s->stages[i], link);

			if (r < 0) {
				redact_stream_free(head);
				return r;
			}
			link = &(*link)->sink;
		}
		*ret = head;
		return 0;
	}
	st = malloc(sizeof(*st));
	if (!st)
		return -ENOMEM;
	if (stream_init(st, s) < 0) {
		free(st);
		return -ENOMEM;
	}
	redact_set_ref(set_mutable(s));
	*ret = st;
	return 0;
}

/* After a scan and an emit: drop what is no longer needed, keep the rest
 * (copying it from data when the caller's chunk was scanned in place). */
static int stream_trim(struct redact_stream *st, const uint8_t *data,
		       uint64_t avail, bool in_place)
{
	uint64_t keep = keep_from(st, avail);

	if (in_place) {
		int r = buf_append(&st->hold, data + (keep - st->base),
				   avail - keep);

		if (r < 0)
			return r;
	} else {
		buf_consume(&st->hold, keep - st->base);
	}
	st->base = keep;
	return 0;
}

int redact_stream_feed(struct redact_stream *st, const void *chunk, size_t n,
		       struct buf *out)
{
	const uint8_t *data;
	bool in_place = st->hold.len == 0;
	uint64_t avail;
	int r;

	if (n == 0)
		return 0;
	/* With nothing held the chunk is scanned where it is, which spares
	 * a copy of large chunks. */
	if (in_place) {
		data = chunk;
	} else {
		r = buf_append(&st->hold, chunk, n);
		if (r < 0)
			return r;
		data = (const uint8_t *)st->hold.data;
	}
	avail = st->base + (in_place ? n : st->hold.len);
	r = scan(st, data, st->base, avail);
	if (r < 0)
		return r;
	r = emit(st, data, st->base, safe_point(st, avail, false), out);
	if (r < 0)
		return r;
	return stream_trim(st, data, avail, in_place);
}

/* Write out everything this stream holds (into the next of a chain,
 * which keeps what it holds) and start over. */
static int flush_own(struct redact_stream *st, struct buf *out)
{
	const uint8_t *data = (const uint8_t *)st->hold.data;
	uint64_t avail = st->base + st->hold.len;
	struct redact_stream *sink = st->sink;
	size_t nemitted;
	int r;

	r = scan(st, data, st->base, avail);
	if (r < 0)
		return r;
	r = emit(st, data, st->base, avail, out);
	if (r < 0)
		return r;
	free(st->r);
	buf_free(&st->hold);
	nemitted = st->nemitted;
	stream_reset(st, st->set, st->ring, st->ring_mask);
	st->sink = sink;
	st->nemitted = nemitted;
	return 0;
}

int redact_stream_flush(struct redact_stream *st, struct buf *out)
{
	int r = flush_own(st, out);

	if (r == 0 && st->sink)
		r = redact_stream_flush(st->sink, out);
	return r;
}

int redact_stream_idle(struct redact_stream *st, struct buf *out)
{
	const uint8_t *data = (const uint8_t *)st->hold.data;
	size_t n = st->hold.len, from, span;
	uint32_t q = 0, run = 0;
	int flushed = 0;

	if (n == 0 || st->set->npatterns == 0)
		goto next;
	/* The automaton from its root over the held bytes that can hold
	 * maxlen - 1 pattern bytes (with a whitespace run after each) ends
	 * in the state of the longest suffix that is the start of some
	 * pattern.  Depth 0: no pattern can begin in what is held and run
	 * past its end, so a flush (which still redacts whole matches)
	 * cannot split a secret. */
	span = st->set->maxlen * (REDACT_WS_RUN_MAX + 1);
	from = n > span ? n - span : 0;
	for (size_t i = from; i < n; i++) {
		if (is_ws(data[i])) {
			if (++run > REDACT_WS_RUN_MAX)
				q = 0;
			continue;
		}
		run = 0;
		q = ac_step(st->set, q, data[i]);
	}
	/* Held whitespace after the last byte ends what may be a secret's
	 * start: a quiet source that ended a line (tail -f after printing
	 * a file, a prompt) gets its line out now, not when it next writes,
	 * which may be never.  A secret written slowly across a line break
	 * with a pause at the break is not caught: as for one split across
	 * commands, an accepted limit (SECURITY.md). */
	if (st->set->st[q].depth == 0 || run > 0) {
		if (flush_own(st, out) < 0)
			return -ENOMEM;
		flushed = 1;
	}
next:
	/* The next set of a chain holds text from before what this one
	 * still holds: whether it may go is its own set's question. */
	if (st->sink) {
		int r = redact_stream_idle(st->sink, out);

		if (r < 0)
			return r;
		flushed |= r;
	}
	return flushed;
}

void redact_stream_free(struct redact_stream *st)
{
	if (!st)
		return;
	redact_stream_free(st->sink);
	redact_set_free(set_mutable(st->set));
	free(st->r);
	free(st->ring);
	if (st->hold.data)
		explicit_bzero(st->hold.data, st->hold.cap);
	buf_free(&st->hold);
	free(st);
}
