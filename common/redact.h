/*
 * The redactor (docs/design.md, "Secrets and redaction").  Every byte spd hands
 * back to an agent or writes to the journal passes through it: each known
 * secret value and its encoded forms become "[redacted:NAME]".
 *
 * A set of secrets is compiled once into an immutable matcher: an
 * Aho-Corasick automaton over every form of every value (dense rows for the
 * shallow states, sorted edge lists below), fronted by a q-gram sampling
 * filter so that text which cannot hold a match is skipped without running
 * the automaton.  One pass over the input finds all occurrences of all
 * forms; overlapping or nested occurrences are replaced as the union of
 * their ranges.  A built set is never written again, so any number of
 * threads may redact with it at once; each thread uses its own stream.
 *
 * The forms of a value v (see redact_forms()):
 *  - v itself;
 *  - base64, standard and URL-safe alphabets, for v starting at each of the
 *    three byte offsets within a 3-byte group, keeping only the characters
 *    fixed by v's bits (so v is found inside a longer encoded blob), plus
 *    the end-of-data forms with the last partial character, unpadded and
 *    padded;
 *  - hex, lower and upper case;
 *  - percent-encoding of every byte outside the unreserved set, or of the
 *    reserved bytes only, with upper or lower hex digits, with a space as
 *    "%20"/" " or as "+";
 *  - JSON string escaping, with \u escapes in either case, with or without
 *    non-ASCII escaped (\u, surrogate pairs), "/" escaped, "<>&" escaped
 *    (Go) and \b \f written as \u escapes;
 *  - cheap transforms anyone can apply with coreutils: v reversed by
 *    character (rev), rot13 (tr A-Za-z N-ZA-Mn-za-m), UTF-16LE and
 *    UTF-16BE (iconv; valid UTF-8 only), hex with a separator or prefix
 *    per byte ("de:ad", "de-ad", "de,ad", "\xde\xad", "0xde0xad",
 *    "0xde,0xad", "%de%ad") in either case, and every character as a \u
 *    escape in either case (valid UTF-8 only).
 * Forms that come out identical are matched once, under the first name.
 *
 * Whitespace does not count: every form is matched in the text with its
 * spaces, tabs, LFs and CRs left out (runs of up to REDACT_WS_RUN_MAX), so
 * base64 or hex wrapped at any width (base64 -w, xxd -p, od -tx1), text
 * folded across lines (fold) and hex separated by spaces are caught.  A
 * match's marker replaces the whole span that spelled the secret,
 * whitespace inside it included; whitespace before and after stays.
 *
 * Not handled (an accepted risk, SECURITY.md): double encodings (base64 of
 * hex), case-folded values, arbitrary transforms (encryption, compression,
 * any other cipher), and a secret split across separate outputs.
 */
#ifndef SPD_COMMON_REDACT_H
#define SPD_COMMON_REDACT_H

#include <stddef.h>

#include "buf.h"

/*
 * Shorter values are refused: an 8-byte floor keeps common words and
 * numbers from being redacted everywhere, and docs/design.md promises
 * redaction of 8+ character secrets.
 */
#define REDACT_MIN_LEN 8
/*
 * Longer values are refused: every form of a value becomes automaton
 * states (about 40 bytes each), and the longest JSON form is 6 bytes per
 * input byte.  8 KiB holds a PEM-encoded 4096-bit RSA key with room to
 * spare.
 */
#define REDACT_MAX_LEN 8192
/*
 * Matching reads the text with whitespace (space, tab, LF, CR) left out,
 * across runs of at most this many whitespace bytes: a line break and an
 * indent (base64 -w, fold, od's "\n ", a PEM block indented in YAML) fit
 * with room to spare.  A longer run ends a match.  The bound is what keeps
 * a stream's hold finite: a partial match spans at most this many bytes
 * more per character.
 */
#define REDACT_WS_RUN_MAX 16
/*
 * A name is what replaces the value in output: "[redacted:NAME]".  Names
 * are environment variable names, [A-Za-z0-9_.-], at most this long so
 * that a marker stays short.
 */
#define REDACT_MAX_NAME 64

struct redact_set;
struct redact_builder;
struct redact_stream;

/*
 * Start an empty builder.  Returns 0 and a builder owned by the caller
 * (release with redact_builder_free() or hand it to redact_builder_build()),
 * or -ENOMEM.
 */
int redact_builder_new(struct redact_builder **ret);

/*
 * Register a secret: name (NUL-terminated, 1..REDACT_MAX_NAME bytes of
 * [A-Za-z0-9_.-]) and its value (len bytes, may contain NUL).  Both are
 * copied.  Returns 0; -EINVAL when the value has fewer than REDACT_MIN_LEN
 * bytes that are not whitespace (matching ignores whitespace) or a
 * whitespace run longer than REDACT_WS_RUN_MAX (it could never match), or
 * the name is empty, too long or has other bytes (nothing is registered); -E2BIG when
 * len > REDACT_MAX_LEN; -ENOMEM.
 */
int redact_builder_add(struct redact_builder *b, const char *name,
		       const void *value, size_t len);

/*
 * Register the value of each "NAME=value" entry of envp (NULL-terminated;
 * spd's own environment or the parsed environment file) whose name
 * envscrub_name_is_secret() flags, under NAME.  Values with fewer than
 * REDACT_MIN_LEN bytes that are not whitespace, and names that cannot be a marker name, are skipped: the
 * sandbox never sees such variables anyway (envscrub drops them).  Returns
 * the number registered; -E2BIG when a secret value is longer than
 * REDACT_MAX_LEN (the operator must know it cannot be redacted); -ENOMEM.
 */
int redact_builder_add_env(struct redact_builder *b, const char *const *envp);

/* Release a builder that was not built.  NULL is allowed. */
void redact_builder_free(struct redact_builder *b);

/*
 * Compile the registered secrets into an immutable set.  Always consumes
 * b, on failure too.  An empty builder gives a set that matches nothing.
 * Returns 0 and a set owned by the caller, -E2BIG when the forms of all
 * values exceed the automaton's size limit, or -ENOMEM.
 */
int redact_builder_build(struct redact_builder *b, struct redact_set **ret);

/*
 * Drop a reference to a set: the set is freed (its automaton wiped) when
 * the last one goes, so a set replaced by a newer one lives exactly as
 * long as the streams that still read it.  The builder's caller holds one
 * reference; each stream holds its own (redact_stream_new takes it,
 * redact_stream_free drops it).  NULL is allowed.
 */
void redact_set_free(struct redact_set *s);
/*
 * Take one more reference to s, for a reader that uses it after the
 * caller's own may be gone (a job on another thread); drop it with
 * redact_set_free.  Safe from any thread.  Returns s; NULL is allowed.
 */
struct redact_set *redact_set_ref(struct redact_set *s);

/*
 * A set that applies a, then b, to what a wrote: *ret (owned by the
 * caller) holds references to both, so either may be dropped by its
 * owner while the chain lives; each may itself be a chain.  Lets a
 * small set that changes often (spd's minted turn keys) ride with a
 * large one that does not, without rebuilding the large one.
 * redact_buf and a stream redact the secrets of both, a secret of either
 * split across chunks included; the markers a writes pass b untouched
 * (b reads the text on either side of a marker as separate texts);
 * redact_contains is true when either holds the value; count and
 * max_len cover both.  An empty set in a chain is left out; a chain of
 * one set is that set.  Returns 0 or -ENOMEM.
 */
int redact_set_chain(const struct redact_set *a, const struct redact_set *b,
		     struct redact_set **ret);

/* The number of distinct patterns (forms of all values) in the set. */
size_t redact_set_count(const struct redact_set *s);

/*
 * The length of the longest pattern, whitespace left out; a stream holds
 * back less than this many bytes that are not whitespace (and at most
 * REDACT_WS_RUN_MAX whitespace bytes after each).
 */
size_t redact_set_max_len(const struct redact_set *s);

/*
 * Call cb once for each form of the len-byte value (see the list at the
 * top), in a fixed order; a form may be reported more than once.  The form
 * pointer is valid only during the call.  Stops at, and returns, the first
 * non-zero value cb returns; otherwise returns 0, -EINVAL when len is 0,
 * or -ENOMEM.  Meant for tests and for checks that need the forms.
 */
int redact_forms(const void *value, size_t len,
		 int (*cb)(const void *form, size_t n, void *userdata),
		 void *userdata);
/* The longest form of a len-byte value: a JSON \u00XX escape per byte,
 * plus slack (common/redact_forms.c). */
#define REDACT_FORM_MAX(len) (6 * (len) + 16)

/*
 * Redact the n bytes at in (may contain NUL; in may be NULL when n is 0).
 * On success returns the number of redacted ranges (0 or more) and sets
 * *ret_out to a malloc'd, NUL-terminated copy with every match replaced,
 * owned by the caller, and *ret_len to its length without the NUL.
 * Returns -ENOMEM on failure.
 */
int redact_buf(const struct redact_set *s, const void *in, size_t n,
	       char **ret_out, size_t *ret_len);

/*
 * Whether the n bytes at in hold any form of any secret: 1 or 0.  For
 * checks that refuse rather than redact (a diff that adds a secret).
 */
int redact_contains(const struct redact_set *s, const void *in, size_t n);

/*
 * Start a stream over s, holding a reference to it (so s lives as long
 * as the stream, whoever else drops it); many streams may share one set
 * from different threads.  Returns 0 and a stream owned by the
 * caller, or -ENOMEM.
 */
int redact_stream_new(const struct redact_set *s, struct redact_stream **ret);

/*
 * Feed the next n bytes of the stream.  The redacted output that can no
 * longer change is appended to out; what may still be the start of a
 * secret (fewer than redact_set_max_len() bytes) is held until the next
 * feed or the flush.  Concatenating everything a stream appends gives
 * exactly what redact_buf() gives for the whole input, however it was
 * split.  Returns 0 or -ENOMEM; after a failure the stream must only be
 * freed.
 */
int redact_stream_feed(struct redact_stream *st, const void *chunk, size_t n,
		       struct buf *out);

/*
 * End of input: append everything still held, redacted, to out.  The
 * stream is then reset and may start over.  Returns 0 or -ENOMEM.
 */
int redact_stream_flush(struct redact_stream *st, struct buf *out);

/* Release a stream (held bytes are dropped) and its reference to its
 * set.  NULL is allowed. */
void redact_stream_free(struct redact_stream *st);

/*
 * The source went quiet (no output for a while): emit, redacted, what the
 * stream holds, unless its tail may be the start of a secret and is not
 * followed by whitespace — then keep holding, since the next bytes may
 * complete it.  Returns 1 when it
 * flushed (the stream goes on as if new), 0 when it keeps holding (or
 * held nothing), -ENOMEM.  Lets a short prompt or progress line reach
 * the client while a split secret still cannot.
 */
int redact_stream_idle(struct redact_stream *st, struct buf *out);

#endif
