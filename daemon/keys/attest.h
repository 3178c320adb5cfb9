/*
 * Attestations: spd's Ed25519 signing key, the in-toto statements it
 * signs about a verified commit (in a DSSE envelope, stored as a git note
 * under refs/notes/spd in the operator's repository), and the check of
 * such notes on a branch nobody trusts, reading objects and notes only.
 */
#ifndef SPD_DOMAIN_ATTEST_H
#define SPD_DOMAIN_ATTEST_H

#include <jansson.h>
#include <stddef.h>

/* The key's file in the state dir (hidden from every run). */
#define ATTEST_KEY_FILE "attest.key"
/* Where the notes live: git's own notes machinery reads them there. */
#define ATTEST_NOTES_REF "refs/notes/spd"
#define ATTEST_STATEMENT_TYPE "https://in-toto.io/Statement/v1"
#define ATTEST_PREDICATE_TYPE "https://spd.dev/attestation/session-verify/v1"
#define ATTEST_PAYLOAD_TYPE "application/vnd.in-toto+json"
/* "ed25519:" and the 32-byte key in base64, with its NUL. */
#define ATTEST_PUBLIC_LEN 54
/* "SHA256:" and the key's SHA-256 in unpadded base64, with its NUL. */
#define ATTEST_FINGERPRINT_LEN 51
/* A note larger than this is not spd's (ours are a few KiB): refused
 * before it is decoded. */
#define ATTEST_NOTE_MAX (256 * 1024)
/* Commits attest_verify_branch walks: a branch longer than this since
 * its base is refused rather than walked without end. */
#define ATTEST_WALK_MAX 10000
/* --trust-from's file: a list of keys, a few lines; anything larger is
 * not one. */
#define ATTEST_TRUST_FILE_MAX (64 * 1024)
#define ATTEST_TRUST_KEYS_MAX 1000
/* The project's configuration, whose checks and required commands the
 * trusted commit's copy names. */
#define ATTEST_PROJECT_CONF ".spd.conf"

struct attest_key;

/*
 * The signing key in state_dir/ATTEST_KEY_FILE, made (0600, never
 * overwritten) when there is none.  When *key is already set, does
 * nothing.  A key file that is not a regular file of the right size, or
 * that others may read, is refused (-EPERM, -EINVAL).  Returns 0 and *key
 * (free with attest_key_free), or -errno.
 */
int attest_key_ensure(const char *state_dir, struct attest_key **key);
/* The same key when it exists, never made: -ENOENT when there is none
 * (`spd --attest-verify`, which changes nothing of spd's). */
int attest_key_load(const char *state_dir, struct attest_key **key);
/* Free a key (its secret part is wiped); NULL is allowed. */
void attest_key_free(struct attest_key *k);
/* The public key as people paste it into spd.conf: "ed25519:BASE64"
 * (owned by k). */
const char *attest_key_public(const struct attest_key *k);
/* "SHA256:..." of the public key: the DSSE keyid (owned by k). */
const char *attest_key_fingerprint(const struct attest_key *k);
/* Whether text is a public key in the "ed25519:BASE64" form: 0 or
 * -EINVAL. */
int attest_key_check(const char *text);

/*
 * Sign statement (an in-toto Statement, JSON) with k into a DSSE
 * envelope and store it as the note of commit_hex under ATTEST_NOTES_REF
 * in the repository whose git dir is gitdir, replacing an older note.
 * Runs no hook.  Returns 0, -EINVAL (statement or commit malformed) or
 * -EIO (*ret_why, when not NULL, gets libgit2's message; static storage
 * that the next call overwrites).
 */
int attest_sign_note(const struct attest_key *k, const char *gitdir,
		     const char *commit_hex, json_t *statement,
		     const char **ret_why);

/*
 * Open a note's text (untrusted bytes: the repository's) as a DSSE
 * envelope: the in-toto statement it carries when one of its signatures
 * is a trusted key's over DSSE's pre-authentication encoding of the
 * payload and the payload is spd's statement type, else NULL and
 * *ret_why (static).  trust is a NULL-terminated list of
 * "ed25519:BASE64" keys (NULL: none); *ret_signer gets the one that
 * signed (borrowed from trust).  The statement's subject is not checked
 * here (attest_show and attest_verify_branch hold it to the commit).
 * Returns a new reference.
 */
json_t *attest_envelope_open(const char *note, const char *const *trust,
			     const char **ret_signer, const char **ret_why);
/* What a note claims, unverified (for a person, beside why it is not
 * valid): its payload decoded and parsed as JSON, a new reference, or
 * NULL. */
json_t *attest_note_claims(const char *note);
/*
 * The keys of a trust file's text (untrusted bytes: a blob of the
 * repository's), one "ed25519:BASE64" a line; anything after it on the
 * line, blank lines and lines beginning with '#' are comments.  text is
 * cut in place; the keys pushed onto keys (copies).  spec names the file
 * in *why.  Returns 0 and *ret_found, or -EINVAL (a line that is not a
 * key), -E2BIG (more than ATTEST_TRUST_KEYS_MAX) or -ENOMEM, with *why
 * (malloc'd) for the first two.
 */
struct strv;
int attest_trust_lines(char *text, const char *spec, struct strv *keys,
		       size_t *ret_found, char **why);

/*
 * The statement spd signs: subject branch at commit_hex, predicate of
 * type ATTEST_PREDICATE_TYPE with the commit's tree read from gitdir and
 * the fields of predicate (which it takes; it gains "commit" and "tree").
 * Returns a new reference, or NULL (the commit cannot be read).
 */
json_t *attest_statement(const char *gitdir, const char *branch,
			 const char *commit_hex, json_t *predicate);

/*
 * The note on rev (a commit, a branch, HEAD) in the repository at repo
 * (its working directory or git dir, never searched upwards; its config
 * is never read: a shadow git dir of links to its objects and refs is
 * made for the call in scratch, a private directory of spd's, and
 * removed), for a person: {commit, keyid, key (the trusted key that
 * signed it, or null), valid, why, verdict, statement, trust_from}.
 * trust is a NULL-terminated list of "ed25519:..." keys (NULL: none);
 * trust_from (NULL: none) a "REF:PATH" file of more, read as
 * attest_verify_branch reads it, from a commit that does not have rev's
 * commit in its history (-EPERM otherwise: the commit would be vouching
 * for itself).  Returns 0 and *ret, -ENOENT (no note, no such file;
 * *ret_why says so), -EINVAL, -EPERM, -E2BIG or -EIO with *ret_why
 * (malloc'd).
 */
int attest_show(const char *repo, const char *scratch, const char *rev,
		const char *const *trust, const char *trust_from, json_t **ret,
		char **ret_why);

/* What attest_verify_branch checks, and against which keys. */
struct attest_verify_opts {
	const char *branch; /* a ref or commit of the repository */
	const char *base;   /* its merge base's other side; NULL: HEAD */
	/* NULL-terminated "ed25519:..." keys (NULL: none), and "REF:PATH"
	 * (NULL: none): a file of more keys in a commit the branch did not
	 * write. */
	const char *const *trust;
	const char *trust_from;
};

/*
 * Check o->branch of the repository at repo (opened as attest_show opens
 * it, in scratch) against its attestations: every commit since its
 * merge base with o->base, newest first (none: the tip alone).  Reads
 * objects and notes only — no checkout, no filter, no hook, not the
 * repository's config.  The branch passes when its tip carries an
 * attestation signed by a trusted key (o->trust and the keys of
 * o->trust_from's file), whose subject is that commit, whose tree is
 * that commit's tree, whose verdict is a pass, and which shows every
 * check (same name and argv, exit 0) and required command of the merge
 * base's .spd.conf (the trusted configuration: a commit the branch did
 * not write).  Returns 0 and *ret {ok, commits: [{commit, attested,
 * key, verdict, why, signed_at, method}], why, merge_base, required,
 * trust_from}, or -EINVAL/-ENOENT/-EPERM/-E2BIG/-EIO with *ret_why
 * (malloc'd): no such repository or ref, a malformed trusted key, a
 * --trust-from commit the branch wrote.
 */
int attest_verify_branch(const char *repo, const char *scratch,
			 const struct attest_verify_opts *o, json_t **ret,
			 char **ret_why);

#endif
