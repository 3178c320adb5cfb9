/*
 * Attestations (attest.h).  The formats are the established ones, not
 * ours: an in-toto Statement v1 in a DSSE envelope whose signature covers
 * DSSE's pre-authentication encoding, so any DSSE verifier can check the
 * signature and nothing in the payload can be read as another type.
 *
 * Reading someone else's repository must execute nothing from it.
 * libgit2 runs no hooks, objects, refs and notes are read here without a
 * checkout, and the repository is opened through a shadow git dir whose
 * config is spd's (open_foreign), so no filter, textconv, fsmonitor,
 * hooksPath or include of the repository's config or .gitattributes is
 * ever read.
 */
#include <errno.h>
#include <fcntl.h>
#include <git2.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/strv.h"
#include "common/util.h"
#include "common/words.h"
#include "daemon/conftab.h"
#include "daemon/keys/attest.h"

#define SEED_LEN crypto_sign_SEEDBYTES

struct attest_key {
	unsigned char *sk; /* sodium_malloc'd, crypto_sign_SECRETKEYBYTES */
	unsigned char pk[crypto_sign_PUBLICKEYBYTES];
	char public[ATTEST_PUBLIC_LEN];
	char fingerprint[ATTEST_FINGERPRINT_LEN];
};

/* A trusted key, decoded. */
struct trusted {
	unsigned char pk[crypto_sign_PUBLICKEYBYTES];
	const char *text;
	char fingerprint[ATTEST_FINGERPRINT_LEN];
};

static void fingerprint_of(const unsigned char *pk,
			   char ret[ATTEST_FINGERPRINT_LEN])
{
	unsigned char h[crypto_hash_sha256_BYTES];

	crypto_hash_sha256(h, pk, crypto_sign_PUBLICKEYBYTES);
	memcpy(ret, "SHA256:", 7);
	sodium_bin2base64(ret + 7, ATTEST_FINGERPRINT_LEN - 7, h, sizeof(h),
			  sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
}

static int key_parse(const char *text, unsigned char *ret_pk)
{
	unsigned char pk[crypto_sign_PUBLICKEYBYTES];
	size_t n = 0;
	const char *end = NULL;

	if (!text || strncmp(text, "ed25519:", 8) != 0)
		return -EINVAL;
	if (sodium_base642bin(pk, sizeof(pk), text + 8, strlen(text + 8), NULL,
			      &n, &end, sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    n != sizeof(pk) || *end)
		return -EINVAL;
	if (ret_pk)
		memcpy(ret_pk, pk, sizeof(pk));
	return 0;
}

int attest_key_check(const char *text)
{
	return key_parse(text, NULL);
}

static int key_from_seed(const unsigned char *seed, struct attest_key **ret)
{
	struct attest_key *k = calloc(1, sizeof(*k));

	if (!k)
		return -ENOMEM;
	k->sk = sodium_malloc(crypto_sign_SECRETKEYBYTES);
	if (!k->sk) {
		free(k);
		return -ENOMEM;
	}
	crypto_sign_seed_keypair(k->pk, k->sk, seed);
	memcpy(k->public, "ed25519:", 8);
	sodium_bin2base64(k->public + 8, sizeof(k->public) - 8, k->pk,
			  sizeof(k->pk), sodium_base64_VARIANT_ORIGINAL);
	fingerprint_of(k->pk, k->fingerprint);
	*ret = k;
	return 0;
}

/* Read the seed from an open key file: a regular file of exactly the
 * seed's size that nobody else may read. */
static int read_seed(int fd, unsigned char *seed)
{
	struct stat st;
	ssize_t n;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size != SEED_LEN)
		return -EINVAL;
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return -EPERM;
	n = read(fd, seed, SEED_LEN);
	if (n != SEED_LEN)
		return n < 0 ? -errno : -EINVAL;
	return 0;
}

static int key_open(const char *state_dir, bool make, struct attest_key **key)
{
	unsigned char *seed = NULL;
	char *path = NULL;
	int fd = -1, r;

	if (*key)
		return 0;
	if (!state_dir)
		return -EINVAL;
	if (sodium_init() < 0)
		return -EIO;
	if (!(path = paths_join(state_dir, ATTEST_KEY_FILE)) ||
	    !(seed = sodium_malloc(SEED_LEN))) {
		r = -ENOMEM;
		goto out;
	}
	/* Made once, with O_EXCL: a second spd racing us loads ours. */
	fd = !make ? -1
		   : open(path,
			  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			  0600);
	if (fd >= 0) {
		randombytes_buf(seed, SEED_LEN);
		if (write(fd, seed, SEED_LEN) != SEED_LEN || fsync(fd) < 0) {
			r = errno ? -errno : -EIO;
			close(fd);
			fd = -1;
			unlink(path);
			goto out;
		}
		close(fd);
		fd = -1;
	} else if (make && errno != EEXIST) {
		r = -errno;
		goto out;
	}
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	r = read_seed(fd, seed);
	if (r == 0)
		r = key_from_seed(seed, key);
out:
	if (fd >= 0)
		close(fd);
	if (seed)
		sodium_free(seed);
	free(path);
	return r;
}

int attest_key_ensure(const char *state_dir, struct attest_key **key)
{
	return key_open(state_dir, true, key);
}

int attest_key_load(const char *state_dir, struct attest_key **key)
{
	return key_open(state_dir, false, key);
}

void attest_key_free(struct attest_key *k)
{
	if (!k)
		return;
	sodium_free(k->sk);
	free(k);
}

const char *attest_key_public(const struct attest_key *k)
{
	return k->public;
}

const char *attest_key_fingerprint(const struct attest_key *k)
{
	return k->fingerprint;
}

/* ---- DSSE ---- */

/* DSSE's pre-authentication encoding of (type, body): what is signed. */
static char *pae(const char *type, const unsigned char *body, size_t blen,
		 size_t *ret_len)
{
	size_t tlen = strlen(type), n;
	char *p;
	int h;

	n = 6 + 1 + 20 + 1 + tlen + 1 + 20 + 1 + blen + 1;
	if (!(p = malloc(n)))
		return NULL;
	h = snprintf(p, n, "DSSEv1 %zu %s %zu ", tlen, type, blen);
	if (h < 0 || (size_t)h + blen >= n) {
		free(p);
		return NULL;
	}
	memcpy(p + h, body, blen);
	*ret_len = (size_t)h + blen;
	return p;
}

static char *b64(const unsigned char *bin, size_t n)
{
	size_t len =
	    sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *s = malloc(len);

	if (s)
		sodium_bin2base64(s, len, bin, n,
				  sodium_base64_VARIANT_ORIGINAL);
	return s;
}

/* Decode standard base64 (malloc'd, *ret_len bytes), or NULL. */
static unsigned char *unb64(const char *s, size_t *ret_len)
{
	size_t cap = strlen(s) / 4 * 3 + 3, n = 0;
	const char *end = NULL;
	unsigned char *bin = malloc(cap + 1);

	if (!bin)
		return NULL;
	if (sodium_base642bin(bin, cap, s, strlen(s), NULL, &n, &end,
			      sodium_base64_VARIANT_ORIGINAL) != 0 ||
	    *end) {
		free(bin);
		return NULL;
	}
	bin[n] = '\0';
	*ret_len = n;
	return bin;
}

static char *envelope(const struct attest_key *k, const char *body)
{
	unsigned char sig[crypto_sign_BYTES];
	size_t plen = 0, blen = strlen(body);
	char *p =
	    pae(ATTEST_PAYLOAD_TYPE, (const unsigned char *)body, blen, &plen);
	char *payload = NULL, *sig64 = NULL, *text = NULL;
	json_t *env;

	if (!p)
		return NULL;
	crypto_sign_detached(sig, NULL, (unsigned char *)p, plen, k->sk);
	free(p);
	payload = b64((const unsigned char *)body, blen);
	sig64 = b64(sig, sizeof(sig));
	if (payload && sig64) {
		env = json_pack("{s:s, s:s, s:[{s:s, s:s}]}", "payloadType",
				ATTEST_PAYLOAD_TYPE, "payload", payload,
				"signatures", "keyid", k->fingerprint, "sig",
				sig64);
		if (env)
			text = json_dumps(env, JSON_COMPACT);
		json_decref(env);
	}
	free(payload);
	free(sig64);
	return text;
}

/*
 * Open an envelope: the statement when one of its signatures is a
 * trusted key's over the payload, else NULL and *why.  *ret_signer gets
 * the trusted key that signed and *ret_keyid the first signature's
 * keyid (both may be NULL on failure; keyid owned by the returned
 * statement's envelope copy: strdup'd).
 */
static json_t *envelope_open(const char *text, const struct trusted *trust,
			     size_t n_trust, const char **ret_signer,
			     char **ret_keyid, const char **why)
{
	json_t *env = NULL, *sigs, *st = NULL;
	unsigned char *body = NULL;
	size_t blen = 0, plen = 0;
	const char *type, *payload;
	char *p = NULL;
	bool good = false;

	*ret_signer = NULL;
	*ret_keyid = NULL;
	env = json_loads(text, 0, NULL);
	type = json_string_value(json_object_get(env, "payloadType"));
	payload = json_string_value(json_object_get(env, "payload"));
	sigs = json_object_get(env, "signatures");
	if (!env || !type || !payload || !json_is_array(sigs)) {
		*why = "the note is not a DSSE envelope";
		goto out;
	}
	if (strcmp(type, ATTEST_PAYLOAD_TYPE) != 0) {
		*why = "the envelope's payload is not an in-toto statement";
		goto out;
	}
	if (!(body = unb64(payload, &blen)) ||
	    !(p = pae(type, body, blen, &plen))) {
		*why = "the envelope's payload is not base64";
		goto out;
	}
	for (size_t i = 0; i < json_array_size(sigs) && !good; i++) {
		json_t *s = json_array_get(sigs, i);
		const char *kid =
		    json_string_value(json_object_get(s, "keyid"));
		const char *sig64 =
		    json_string_value(json_object_get(s, "sig"));
		unsigned char *sig;
		size_t slen = 0;

		if (kid && !*ret_keyid)
			*ret_keyid = strdup(kid);
		if (!sig64 || !(sig = unb64(sig64, &slen)))
			continue;
		for (size_t t = 0; slen == crypto_sign_BYTES && t < n_trust;
		     t++)
			if (crypto_sign_verify_detached(sig, (unsigned char *)p,
							plen,
							trust[t].pk) == 0) {
				*ret_signer = trust[t].text;
				good = true;
				break;
			}
		free(sig);
	}
	if (!good) {
		*why = "no signature by a trusted key";
		goto out;
	}
	st = json_loadb((const char *)body, blen, 0, NULL);
	if (!json_is_object(st) ||
	    !json_is_string(json_object_get(st, "_type")) ||
	    strcmp(json_string_value(json_object_get(st, "_type")),
		   ATTEST_STATEMENT_TYPE) != 0 ||
	    !json_is_string(json_object_get(st, "predicateType")) ||
	    strcmp(json_string_value(json_object_get(st, "predicateType")),
		   ATTEST_PREDICATE_TYPE) != 0) {
		json_decref(st);
		st = NULL;
		*ret_signer = NULL;
		*why = "the signed payload is not spd's statement";
	}
out:
	json_decref(env);
	free(body);
	free(p);
	return st;
}

static int trust_parse(const char *const *keys, struct trusted **ret,
		       size_t *ret_n, char **why);

json_t *attest_envelope_open(const char *note, const char *const *trust,
			     const char **ret_signer, const char **ret_why)
{
	struct trusted *t = NULL;
	size_t nt = 0;
	char *keyid = NULL, *why = NULL;
	json_t *st;

	*ret_signer = NULL;
	if (!note || strlen(note) > ATTEST_NOTE_MAX) {
		*ret_why = "the note is not an attestation";
		return NULL;
	}
	if (trust_parse(trust, &t, &nt, &why) < 0) {
		free(why);
		*ret_why = "a trusted key is malformed";
		return NULL;
	}
	st = envelope_open(note, t, nt, ret_signer, &keyid, ret_why);
	free(keyid);
	free(t);
	return st;
}

json_t *attest_note_claims(const char *note)
{
	json_t *env = note ? json_loads(note, 0, NULL) : NULL, *raw = NULL;
	const char *p = json_string_value(json_object_get(env, "payload"));
	size_t n = 0;
	unsigned char *body = p ? unb64(p, &n) : NULL;

	if (body)
		raw = json_loadb((const char *)body, n, 0, NULL);
	free(body);
	json_decref(env);
	return raw;
}

/* ---- the repository ---- */

static const char *git_msg(void)
{
	const git_error *e = git_error_last();

	return e && e->message ? e->message : "unknown error";
}

json_t *attest_statement(const char *gitdir, const char *branch,
			 const char *commit_hex, json_t *predicate)
{
	git_repository *repo = NULL;
	git_commit *c = NULL;
	git_oid oid;
	char tree[GIT_OID_HEXSZ + 1];
	json_t *st = NULL;

	if (git_libgit2_init() < 0 || git_oid_fromstr(&oid, commit_hex) < 0 ||
	    git_repository_open_ext(&repo, gitdir,
				    GIT_REPOSITORY_OPEN_NO_SEARCH |
					GIT_REPOSITORY_OPEN_BARE,
				    NULL) < 0 ||
	    git_commit_lookup(&c, repo, &oid) < 0) {
		json_decref(predicate);
		goto out;
	}
	git_oid_tostr(tree, sizeof(tree), git_commit_tree_id(c));
	json_object_set_new(predicate, "commit", json_string(commit_hex));
	json_object_set_new(predicate, "tree", json_string(tree));
	st = json_pack("{s:s, s:[{s:s, s:{s:s}}], s:s, s:o}", "_type",
		       ATTEST_STATEMENT_TYPE, "subject", "name",
		       branch ? branch : commit_hex, "digest", "gitCommit",
		       commit_hex, "predicateType", ATTEST_PREDICATE_TYPE,
		       "predicate", predicate);
out:
	git_commit_free(c);
	git_repository_free(repo);
	return st;
}

int attest_sign_note(const struct attest_key *k, const char *gitdir,
		     const char *commit_hex, json_t *statement,
		     const char **ret_why)
{
	git_repository *repo = NULL;
	git_signature *sig = NULL;
	git_oid oid, note;
	char *body = NULL, *env = NULL;
	int r = -EINVAL;

	if (ret_why)
		*ret_why = "malformed statement or commit";
	if (git_oid_fromstr(&oid, commit_hex) < 0 || !statement ||
	    !(body = json_dumps(statement, JSON_COMPACT | JSON_SORT_KEYS)))
		goto out;
	r = -ENOMEM;
	if (!(env = envelope(k, body)))
		goto out;
	r = -EIO;
	if (git_libgit2_init() < 0 ||
	    git_repository_open_ext(&repo, gitdir,
				    GIT_REPOSITORY_OPEN_NO_SEARCH |
					GIT_REPOSITORY_OPEN_BARE,
				    NULL) < 0 ||
	    git_signature_now(&sig, "spd", "spd@localhost") < 0 ||
	    git_note_create(&note, repo, ATTEST_NOTES_REF, sig, sig, &oid, env,
			    1) < 0) {
		if (ret_why)
			*ret_why = git_msg();
		goto out;
	}
	r = 0;
out:
	git_signature_free(sig);
	git_repository_free(repo);
	free(body);
	free(env);
	return r;
}

static char *dupf(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *dupf(const char *f, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* What a shadow git dir holds, by name, pointing into the repository's:
 * its data, never its config (which names programs and includes). */
static const char *const shadow_links[] = {"objects", "refs", "packed-refs",
					   "shallow", "HEAD"};
/* The shadow's own config: the defaults a plain repository has. */
#define SHADOW_CONFIG "[core]\n\trepositoryformatversion = 0\n\tbare = true\n"

/* path made absolute against base when it is relative (malloc'd). */
static char *against(const char *base, const char *path)
{
	return path[0] == '/' ? strdup(path) : paths_join(base, path);
}

/* The git dir of the repository at path (its working directory, a
 * linked worktree or submodule whose .git is a "gitdir:" file, or a git
 * dir itself) and its common dir, where objects and refs live. */
static int find_gitdir(const char *path, char **ret_git, char **ret_common)
{
	char *dotgit = paths_join(path, ".git"), *git = NULL, *common = NULL;
	char *line = NULL, *cfile = NULL, *objects = NULL;
	struct stat st;
	int r = -ENOENT;

	if (!dotgit)
		return -ENOMEM;
	int l = lstat(dotgit, &st);

	if (l == 0 && S_ISDIR(st.st_mode)) {
		git = steal_ptr(dotgit);
	} else if (l == 0 && S_ISREG(st.st_mode) &&
		   (line = paths_read_line(dotgit)) &&
		   strncmp(line, "gitdir: ", 8) == 0) {
		git = against(path, line + 8);
	} else {
		git = strdup(path);
	}
	free(line);
	line = NULL;
	if (!git || !(cfile = paths_join(git, "commondir")))
		goto out;
	line = paths_read_line(cfile);
	common = line ? against(git, line) : strdup(git);
	if (!common || !(objects = paths_join(common, "objects")))
		goto out;
	if (stat(objects, &st) < 0 || !S_ISDIR(st.st_mode))
		goto out;
	*ret_git = steal_ptr(git);
	*ret_common = steal_ptr(common);
	r = 0;
out:
	free(dotgit);
	free(git);
	free(common);
	free(line);
	free(cfile);
	free(objects);
	return r;
}

/* Remove a shadow git dir (NULL is allowed). */
static void shadow_remove(char *shadow)
{
	char *p;

	if (!shadow)
		return;
	for (size_t i = 0; i < ARRAY_SIZE(shadow_links); i++)
		if ((p = paths_join(shadow, shadow_links[i]))) {
			unlink(p);
			free(p);
		}
	if ((p = paths_join(shadow, "config"))) {
		unlink(p);
		free(p);
	}
	rmdir(shadow);
	free(shadow);
}

/*
 * Open the repository at path to read its objects, refs and notes only.
 * libgit2 reads a repository's config when it opens one, and follows its
 * include.path and includeIf: a hostile repository could name any file
 * of the operator's there.  So spd opens a shadow git dir of its own,
 * made in scratch, whose objects, refs, packed-refs, shallow and HEAD
 * are links to the repository's and whose config is spd's.  Returns 0,
 * *ret and *ret_shadow (for shadow_remove), or -ENOENT/-EIO and *why.
 */
static int open_foreign(const char *path, const char *scratch,
			git_repository **ret, char **ret_shadow, char **why)
{
	char *git = NULL, *common = NULL, *shadow = NULL, *p = NULL, *t = NULL;
	int fd, r;

	r = find_gitdir(path, &git, &common);
	if (r < 0) {
		*why = dupf("%s: not a git repository", path);
		return r;
	}
	r = -EIO;
	if (!(shadow = paths_join(scratch, "attest-XXXXXX")) ||
	    !mkdtemp(shadow)) {
		*why = dupf("cannot make a directory in %s: %s", scratch,
			    strerror(errno));
		free(shadow);
		shadow = NULL;
		goto out;
	}
	for (size_t i = 0; i < ARRAY_SIZE(shadow_links); i++) {
		const char *from =
		    i + 1 == ARRAY_SIZE(shadow_links) ? git : common;

		free(p);
		free(t);
		p = paths_join(from, shadow_links[i]);
		t = paths_join(shadow, shadow_links[i]);
		if (!p || !t)
			goto oom;
		if (access(p, F_OK) == 0 && symlink(p, t) < 0) {
			*why = dupf("%s: %s", t, strerror(errno));
			goto out;
		}
	}
	free(t);
	if (!(t = paths_join(shadow, "config")))
		goto oom;
	fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, SHADOW_CONFIG, strlen(SHADOW_CONFIG)) !=
			  (ssize_t)strlen(SHADOW_CONFIG)) {
		*why = dupf("%s: %s", t, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	if (git_libgit2_init() < 0 ||
	    git_repository_open_bare(ret, shadow) < 0) {
		*why = dupf("%s: not a git repository (%s)", path, git_msg());
		r = -ENOENT;
		goto out;
	}
	*ret_shadow = steal_ptr(shadow);
	r = 0;
	goto out;
oom:
	r = -ENOMEM;
out:
	shadow_remove(shadow);
	free(p);
	free(t);
	free(git);
	free(common);
	return r;
}

static int resolve(git_repository *repo, const char *rev, git_oid *ret,
		   char **why)
{
	git_object *o = NULL, *c = NULL;
	int r = 0;

	if (git_revparse_single(&o, repo, rev) < 0 ||
	    git_object_peel(&c, o, GIT_OBJECT_COMMIT) < 0) {
		*why = dupf("%s: no such commit (%s)", rev, git_msg());
		r = -ENOENT;
	} else {
		git_oid_cpy(ret, git_object_id(c));
	}
	git_object_free(c);
	git_object_free(o);
	return r;
}

static int trust_parse(const char *const *keys, struct trusted **ret,
		       size_t *ret_n, char **why)
{
	struct trusted *t;
	size_t n = 0;

	while (keys && keys[n])
		n++;
	if (!(t = calloc(n + 1, sizeof(*t))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (key_parse(keys[i], t[i].pk) < 0) {
			*why = dupf("\"%s\" is not a key (ed25519:BASE64)",
				    keys[i]);
			free(t);
			return -EINVAL;
		}
		t[i].text = keys[i];
		fingerprint_of(t[i].pk, t[i].fingerprint);
	}
	*ret = t;
	*ret_n = n;
	return 0;
}

/* Whether the checks saw exactly the commit's tree: a merge's checkout
 * of it, or a worktree with nothing uncommitted.  Checks that passed
 * with files the commit lacks say nothing of the commit. */
static bool checked_this_tree(json_t *pred)
{
	const char *how = json_string_value(json_object_get(pred, "checked"));
	json_t *n = json_object_get(pred, "worktree_uncommitted");

	if (how && strcmp(how, "branch-tip") == 0)
		return true;
	return how && strcmp(how, "worktree") == 0 && json_is_integer(n) &&
	       json_integer_value(n) == 0;
}

/*
 * What the note on commit says: the statement (when validly signed by a
 * trusted key and about this commit and its tree), or NULL and *why.
 * *ret_note gets the note's text when there is one.
 */
static json_t *commit_statement(git_repository *repo, const git_oid *commit,
				const struct trusted *trust, size_t n_trust,
				const char **ret_signer, char **ret_keyid,
				const char **why)
{
	git_note *note = NULL;
	git_commit *c = NULL;
	const char *msg;
	char hex[GIT_OID_HEXSZ + 1], tree[GIT_OID_HEXSZ + 1];
	json_t *st = NULL, *pred, *subj;
	const char *s_commit, *s_tree, *d;

	*ret_signer = NULL;
	*ret_keyid = NULL;
	git_oid_tostr(hex, sizeof(hex), commit);
	if (git_note_read(&note, repo, ATTEST_NOTES_REF, commit) < 0) {
		*why = "no attestation";
		return NULL;
	}
	msg = git_note_message(note);
	if (!msg || strlen(msg) > ATTEST_NOTE_MAX) {
		*why = "the note is not an attestation";
		goto out;
	}
	st = envelope_open(msg, trust, n_trust, ret_signer, ret_keyid, why);
	if (!st)
		goto out;
	pred = json_object_get(st, "predicate");
	subj = json_array_get(json_object_get(st, "subject"), 0);
	d = json_string_value(
	    json_object_get(json_object_get(subj, "digest"), "gitCommit"));
	s_commit = json_string_value(json_object_get(pred, "commit"));
	s_tree = json_string_value(json_object_get(pred, "tree"));
	if (!d || strcmp(d, hex) != 0 || !s_commit ||
	    strcmp(s_commit, hex) != 0) {
		*why = "the attestation is about another commit";
		goto bad;
	}
	if (git_commit_lookup(&c, repo, commit) < 0) {
		*why = "the commit cannot be read";
		goto bad;
	}
	git_oid_tostr(tree, sizeof(tree), git_commit_tree_id(c));
	if (!s_tree || strcmp(s_tree, tree) != 0) {
		*why = "the attested tree is not the commit's tree";
		goto bad;
	}
	if (!checked_this_tree(pred)) {
		*why = "the checks ran in a worktree with files not committed "
		       "(or not known to be none): not on this tree";
		goto bad;
	}
	goto out;
bad:
	json_decref(st);
	st = NULL;
	*ret_signer = NULL;
out:
	git_commit_free(c);
	git_note_free(note);
	return st;
}

static const char *verdict_of(json_t *st)
{
	json_t *v =
	    json_object_get(json_object_get(st, "predicate"), "verdict");

	return json_string_value(v) ? json_string_value(v) : "unknown";
}

static int trust_from_read(git_repository *repo, const char *spec,
			   const git_oid *tip, const git_oid *mb,
			   struct strv *keys, json_t **ret_info, char **why);

int attest_show(const char *repo_path, const char *scratch, const char *rev,
		const char *const *trust, const char *trust_from, json_t **ret,
		char **ret_why)
{
	git_repository *repo = NULL;
	git_note *note = NULL;
	char *shadow = NULL;
	struct trusted *t = NULL;
	struct strv keys = {0};
	size_t nt = 0;
	git_oid oid;
	char hex[GIT_OID_HEXSZ + 1], *keyid = NULL;
	const char *why = NULL, *signer = NULL;
	json_t *st = NULL, *raw = NULL, *from = NULL;
	int r;

	*ret_why = NULL;
	for (size_t i = 0; trust && trust[i]; i++)
		if (strv_push(&keys, trust[i]) < 0) {
			strv_free(&keys);
			return -ENOMEM;
		}
	r = open_foreign(repo_path, scratch, &repo, &shadow, ret_why);
	if (r == 0)
		r = resolve(repo, rev, &oid, ret_why);
	/* The keys of a file in a commit that does not contain the one
	 * shown (no merge base: the commit itself is the "branch"). */
	if (r == 0 && trust_from)
		r = trust_from_read(repo, trust_from, &oid, NULL, &keys, &from,
				    ret_why);
	if (r == 0)
		r = trust_parse((const char *const *)keys.v, &t, &nt, ret_why);
	if (r < 0)
		goto out;
	git_oid_tostr(hex, sizeof(hex), &oid);
	if (git_note_read(&note, repo, ATTEST_NOTES_REF, &oid) < 0) {
		*ret_why = dupf("%s has no attestation under %s", hex,
				ATTEST_NOTES_REF);
		r = -ENOENT;
		goto out;
	}
	git_note_free(note);
	st = commit_statement(repo, &oid, t, nt, &signer, &keyid, &why);
	if (!st) {
		/* Unverified, a person still wants to see what it claims. */
		if (git_note_read(&note, repo, ATTEST_NOTES_REF, &oid) == 0)
			raw = attest_note_claims(git_note_message(note));
		git_note_free(note);
	}
	*ret =
	    json_pack("{s:s, s:s?, s:s?, s:b, s:s?, s:s, s:o?}", "commit", hex,
		      "keyid", keyid, "key", signer, "valid", st != NULL, "why",
		      st ? NULL : why, "verdict", verdict_of(st ? st : raw),
		      "statement", st ? st : (raw ? raw : json_null()));
	if (!json_object_get(*ret, "key"))
		json_object_set_new(*ret, "key", json_null());
	if (!json_object_get(*ret, "keyid"))
		json_object_set_new(*ret, "keyid", json_null());
	if (!json_object_get(*ret, "why"))
		json_object_set_new(*ret, "why", json_null());
	json_object_set_new(*ret, "trust_from", from ? from : json_null());
	from = NULL;
	r = 0;
out:
	json_decref(from);
	strv_free(&keys);
	free(keyid);
	free(t);
	git_repository_free(repo);
	shadow_remove(shadow);
	return r;
}

/*
 * Whether commit is one the checked branch did not write: none of the
 * commits from the merge base mb to the tip is among its ancestors
 * (a best common ancestor of commit and the tip is mb or older).  Keys
 * and requirements read from a commit the branch wrote would be the
 * branch vouching for itself.
 */
static int not_written_by(git_repository *repo, const git_oid *commit,
			  const git_oid *tip, const git_oid *mb, bool *ret)
{
	git_oidarray bases = {0};
	int r = git_merge_bases(&bases, repo, commit, tip);

	*ret = true;
	if (r == GIT_ENOTFOUND)
		return 0; /* unrelated histories: nothing in common */
	if (r < 0)
		return -EIO;
	for (size_t i = 0; i < bases.count && *ret; i++) {
		if (git_oid_equal(&bases.ids[i], mb))
			continue;
		r = git_graph_descendant_of(repo, mb, &bases.ids[i]);
		if (r < 0) {
			git_oidarray_dispose(&bases);
			return -EIO;
		}
		*ret = r == 1;
	}
	git_oidarray_dispose(&bases);
	return 0;
}

/* The blob at path in commit (a regular file), NUL-terminated and at
 * most max bytes: malloc'd, or NULL and *why. */
static char *blob_at(git_repository *repo, const git_oid *commit,
		     const char *spec, const char *path, size_t max, char **why)
{
	git_commit *c = NULL;
	git_tree *tree = NULL;
	git_tree_entry *e = NULL;
	git_blob *b = NULL;
	char *text = NULL;
	git_filemode_t mode;
	size_t n;

	if (git_commit_lookup(&c, repo, commit) < 0 ||
	    git_commit_tree(&tree, c) < 0) {
		*why = dupf("%s: cannot read its tree (%s)", spec, git_msg());
		goto out;
	}
	if (git_tree_entry_bypath(&e, tree, path) < 0) {
		*why = dupf("%s: no such file", spec);
		goto out;
	}
	mode = git_tree_entry_filemode(e);
	if ((mode != GIT_FILEMODE_BLOB &&
	     mode != GIT_FILEMODE_BLOB_EXECUTABLE) ||
	    git_blob_lookup(&b, repo, git_tree_entry_id(e)) < 0) {
		*why = dupf("%s: not a regular file", spec);
		goto out;
	}
	n = (size_t)git_blob_rawsize(b);
	if (n > max) {
		*why = dupf("%s: larger than %zu bytes", spec, max);
		goto out;
	}
	if (memchr(git_blob_rawcontent(b), '\0', n)) {
		*why = dupf("%s: not a text file", spec);
		goto out;
	}
	if ((text = malloc(n + 1))) {
		memcpy(text, git_blob_rawcontent(b), n);
		text[n] = '\0';
	}
out:
	git_blob_free(b);
	git_tree_entry_free(e);
	git_tree_free(tree);
	git_commit_free(c);
	return text;
}

int attest_trust_lines(char *text, const char *spec, struct strv *keys,
		       size_t *ret_found, char **why)
{
	char *line, *save = NULL;
	size_t lineno = 0, found = 0;

	/* Lines counted as a person counts them: strtok_r would skip
	 * blank ones. */
	for (line = text; line; line = save) {
		char *k, *end;

		save = strchr(line, '\n');
		if (save)
			*save++ = '\0';
		lineno++;
		k = line + strspn(line, " \t\r");
		if (!*k || *k == '#')
			continue;
		end = k + strcspn(k, " \t\r");
		*end = '\0';
		if (key_parse(k, NULL) < 0) {
			*why = dupf("%s line %zu: not a key (ed25519:BASE64)",
				    spec, lineno);
			return -EINVAL;
		}
		if (++found > ATTEST_TRUST_KEYS_MAX) {
			*why = dupf("%s: more than %d keys", spec,
				    ATTEST_TRUST_KEYS_MAX);
			return -E2BIG;
		}
		if (strv_push(keys, k) < 0)
			return -ENOMEM;
	}
	*ret_found = found;
	return 0;
}

/*
 * --trust-from REF:PATH: the keys of the file PATH in the commit REF, one
 * "ed25519:BASE64" a line (anything after it on the line, blank lines
 * and lines beginning with '#' are comments), pushed onto keys.  REF must
 * be a commit the branch did not write.  Returns 0 and *ret_info
 * {commit, path, keys}, or -EINVAL/-ENOENT/-EPERM/-EIO and *why.
 */
static int trust_from_read(git_repository *repo, const char *spec,
			   const git_oid *tip, const git_oid *mb,
			   struct strv *keys, json_t **ret_info, char **why)
{
	const char *colon = strchr(spec, ':');
	char *ref = NULL, *text = NULL;
	char hex[GIT_OID_HEXSZ + 1];
	git_oid commit;
	size_t found = 0;
	bool ok = false;
	int r;

	if (!colon || colon == spec || !colon[1]) {
		*why = dupf("--trust-from \"%s\" is not REF:PATH", spec);
		return -EINVAL;
	}
	if (!(ref = strndup(spec, (size_t)(colon - spec))))
		return -ENOMEM;
	r = resolve(repo, ref, &commit, why);
	if (r < 0)
		goto out;
	git_oid_tostr(hex, sizeof(hex), &commit);
	if (mb) {
		r = not_written_by(repo, &commit, tip, mb, &ok);
	} else {
		/* attest show: the commit shown is not in REF's history. */
		r = git_oid_equal(&commit, tip)
			? 1
			: git_graph_descendant_of(repo, &commit, tip);
		ok = r == 0;
		r = r < 0 ? -EIO : 0;
	}
	if (r < 0) {
		*why = dupf("%s: cannot walk its history (%s)", ref, git_msg());
		goto out;
	}
	if (!ok) {
		*why = dupf("--trust-from %s: commit %.12s contains commits of "
			    "the checked %s; trust must come from a "
			    "commit it did not write (its base's)",
			    ref, hex, mb ? "branch" : "commit");
		r = -EPERM;
		goto out;
	}
	text =
	    blob_at(repo, &commit, spec, colon + 1, ATTEST_TRUST_FILE_MAX, why);
	if (!text) {
		r = -ENOENT;
		goto out;
	}
	r = attest_trust_lines(text, spec, keys, &found, why);
	if (r < 0)
		goto out;
	*ret_info = json_pack("{s:s, s:s, s:I}", "commit", hex, "path",
			      colon + 1, "keys", (json_int_t)found);
	r = 0;
out:
	free(text);
	free(ref);
	return r;
}

/*
 * The trusted configuration: the .spd.conf of commit (one the branch did
 * not write), read as an object: {checks: [{name, argv}], required:
 * [line]} — what an attestation must show ran and passed.  No file: no
 * requirement (an empty object).  The text is checked before libgit2
 * parses it, which would follow an [include]; so is a copy written into
 * the shadow git dir (spd's), never the repository.  Returns 0 and *ret,
 * or -EINVAL/-EIO and *why.
 */
static int trusted_config(git_repository *repo, const char *shadow,
			  const git_oid *commit, json_t **ret, char **why)
{
	git_commit *c = NULL;
	git_tree *tree = NULL;
	git_tree_entry *e = NULL;
	git_config *cfg = NULL;
	git_config_iterator *it = NULL;
	git_config_entry *ent;
	char hex[GIT_OID_HEXSZ + 1], *spec, *text = NULL, *file = NULL;
	json_t *checks = json_array(), *req = json_array();
	int fd, r = -EIO;

	git_oid_tostr(hex, sizeof(hex), commit);
	if (!(spec = dupf("%.12s:" ATTEST_PROJECT_CONF, hex)) || !checks ||
	    !req) {
		r = -ENOMEM;
		goto out;
	}
	if (git_commit_lookup(&c, repo, commit) < 0 ||
	    git_commit_tree(&tree, c) < 0) {
		*why = dupf("%s: cannot read its tree (%s)", spec, git_msg());
		goto out;
	}
	if (git_tree_entry_bypath(&e, tree, ATTEST_PROJECT_CONF) < 0) {
		*ret = json_object();
		r = *ret ? 0 : -ENOMEM;
		goto out;
	}
	r = -EINVAL;
	if (!(text = blob_at(repo, commit, spec, ATTEST_PROJECT_CONF,
			     ATTEST_NOTE_MAX, why)))
		goto out;
	for (const char *l = text; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *h = l + strspn(l, " \t");

		if (*h == '[' && strncasecmp(h + 1 + strspn(h + 1, " \t"),
					     "include", 7) == 0) {
			*why = dupf("%s: an [include] (a trusted configuration "
				    "is one file)",
				    spec);
			goto out;
		}
	}
	r = -EIO;
	if (!(file = paths_join(shadow, "trusted.conf")))
		goto out;
	fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text)) {
		*why = dupf("%s: %s", file, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	/* The one reader of .spd.conf: an [include] or a misspelt key is
	 * refused, as spd refuses them in a session. */
	{
		char err[512];

		r = conftab_open(file, spec, CONFTAB_PROJECT, &cfg, err,
				 sizeof(err));
		if (r < 0) {
			*why = dupf("%s", r == -ENOENT ? spec : err);
			r = -EINVAL;
			goto out;
		}
	}
	r = -EINVAL;
	if (git_config_iterator_new(&it, cfg) < 0) {
		*why = dupf("%s: %s", spec, git_msg());
		goto out;
	}
	while (git_config_next(&ent, it) == 0) {
		size_t full = strlen(ent->name);
		char **argv = NULL;
		json_t *a;

		if (strncasecmp(ent->name, "include", 7) == 0) {
			*why = dupf("%s: an [include]", spec);
			goto out;
		}
		if (strcmp(ent->name, "verify.require") == 0) {
			json_array_append_new(req,
					      json_string(ent->value ?: ""));
			continue;
		}
		if (full <= 10 || strncmp(ent->name, "check.", 6) != 0 ||
		    strcmp(ent->name + full - 4, ".run") != 0)
			continue;
		if (words_split(ent->value ? ent->value : "", 256, &argv) <=
		    0) {
			words_free(argv);
			*why = dupf("%s: check \"%.*s\": cannot split its run "
				    "line into words",
				    spec, (int)(full - 10), ent->name + 6);
			goto out;
		}
		a = json_array();
		for (size_t k = 0; argv[k]; k++)
			json_array_append_new(a, json_string(argv[k]));
		words_free(argv);
		json_array_append_new(checks, json_pack("{s:s%, s:o}", "name",
							ent->name + 6,
							full - 10, "argv", a));
	}
	*ret = json_pack("{s:s, s:O, s:O}", "from", spec, "checks", checks,
			 "required", req);
	r = *ret ? 0 : -ENOMEM;
out:
	git_config_iterator_free(it);
	git_config_free(cfg);
	if (file) {
		unlink(file);
		free(file);
	}
	free(text);
	free(spec);
	json_decref(checks);
	json_decref(req);
	git_tree_entry_free(e);
	git_tree_free(tree);
	git_commit_free(c);
	return r;
}

/* Whether the statement shows what the trusted configuration requires:
 * each of its checks, with the same argv, exited 0, and each of its
 * required commands was among those the session was held to.  NULL when
 * it does, else why not (static or in *buf). */
static const char *meets(json_t *st, json_t *want, char *buf, size_t len)
{
	json_t *pred = json_object_get(st, "predicate"), *w, *h;
	json_t *have = json_object_get(pred, "checks");
	json_t *req = json_object_get(pred, "required");
	size_t i, k;

	json_array_foreach(json_object_get(want, "checks"), i, w)
	{
		const char *name =
		    json_string_value(json_object_get(w, "name"));
		bool found = false;

		json_array_foreach(have, k, h)
		{
			const char *n =
			    json_string_value(json_object_get(h, "name"));

			if (!n || strcmp(n, name) != 0 ||
			    !json_equal(json_object_get(h, "argv"),
					json_object_get(w, "argv")))
				continue;
			found = json_integer_value(
				    json_object_get(h, "exit")) == 0 &&
				json_is_integer(json_object_get(h, "exit"));
			break;
		}
		if (!found) {
			snprintf(
			    buf, len,
			    "the trusted configuration (%s) requires "
			    "check \"%s\", which the attestation does not "
			    "show passing as configured there",
			    json_string_value(json_object_get(want, "from")),
			    name);
			return buf;
		}
	}
	json_array_foreach(json_object_get(want, "required"), i, w)
	{
		bool found = false;

		json_array_foreach(req, k, h)
		{
			if (json_equal(h, w))
				found = true;
		}
		if (!found) {
			snprintf(
			    buf, len,
			    "the trusted configuration (%s) requires the "
			    "command \"%s\" to have run, which the "
			    "attestation does not show",
			    json_string_value(json_object_get(want, "from")),
			    json_string_value(w));
			return buf;
		}
	}
	return NULL;
}

/* The branch's verdict from its commits' (newest first): true when the
 * tip passes, else false and *ret_why (malloc'd) naming the tip and, when
 * an older commit was attested, how many came after it unchecked. */
static bool branch_why(json_t *commits, char **ret_why)
{
	json_t *first = json_array_get(commits, 0);
	const char *h = json_string_value(json_object_get(first, "commit"));
	const char *w = json_string_value(json_object_get(first, "why"));
	size_t k, n = json_array_size(commits);

	if (!w)
		return true;
	/* Name the newest commit that was attested, if any: what came
	 * after it is what nobody checked. */
	for (k = 1; k < n; k++)
		if (json_is_true(json_object_get(json_array_get(commits, k),
						 "attested")))
			break;
	if (k < n && !json_is_true(json_object_get(first, "attested")))
		*ret_why = dupf("the branch's tip %.12s is not attested: %zu "
				"commit(s) after the newest attested one",
				h, k);
	else
		*ret_why = dupf("the branch's tip %.12s: %s", h, w);
	return false;
}

int attest_verify_branch(const char *repo_path, const char *scratch,
			 const struct attest_verify_opts *o, json_t **ret,
			 char **ret_why)
{
	git_repository *repo = NULL;
	char *shadow = NULL;
	git_revwalk *walk = NULL;
	struct trusted *t = NULL;
	struct strv keys = {0};
	size_t nt = 0, n = 0;
	git_oid tip, base_oid, mb, oid;
	json_t *commits = NULL, *from = NULL, *want = NULL;
	char *why_all = NULL, mbhex[GIT_OID_HEXSZ + 1], unmet[512];
	const char *branch = o->branch;
	bool ok = false;
	int r;

	*ret_why = NULL;
	for (size_t i = 0; o->trust && o->trust[i]; i++)
		if (strv_push(&keys, o->trust[i]) < 0) {
			r = -ENOMEM;
			goto out;
		}
	r = open_foreign(repo_path, scratch, &repo, &shadow, ret_why);
	if (r == 0)
		r = resolve(repo, branch, &tip, ret_why);
	if (r == 0)
		r = resolve(repo, o->base ? o->base : "HEAD", &base_oid,
			    ret_why);
	if (r < 0)
		goto out;
	r = -EIO;
	if (git_merge_base(&mb, repo, &tip, &base_oid) < 0) {
		*ret_why = dupf("%s has no common ancestor with the base (%s)",
				branch, git_msg());
		r = -EINVAL;
		goto out;
	}
	git_oid_tostr(mbhex, sizeof(mbhex), &mb);
	if (o->trust_from) {
		r = trust_from_read(repo, o->trust_from, &tip, &mb, &keys,
				    &from, ret_why);
		if (r < 0)
			goto out;
	}
	r = trust_parse((const char *const *)keys.v, &t, &nt, ret_why);
	if (r < 0)
		goto out;
	/* What must have passed: the base's configuration, never the
	 * branch's own (which the branch may have weakened). */
	r = trusted_config(repo, shadow, &mb, &want, ret_why);
	if (r < 0)
		goto out;
	r = -EIO;
	if (git_revwalk_new(&walk, repo) < 0 ||
	    git_revwalk_sorting(walk, GIT_SORT_TOPOLOGICAL | GIT_SORT_TIME) <
		0 ||
	    git_revwalk_push(walk, &tip) < 0 ||
	    git_revwalk_hide(walk, &mb) < 0 || !(commits = json_array())) {
		*ret_why = dupf("cannot walk %s: %s", branch, git_msg());
		goto out;
	}
	/* A branch with nothing beyond its base (merged by a fast-forward,
	 * say) still has a tip that can be checked. */
	bool empty = git_revwalk_next(&oid, walk) != 0;

	if (empty)
		git_oid_cpy(&oid, &tip);
	for (bool more = true; more;
	     more = !empty && git_revwalk_next(&oid, walk) == 0) {
		char hex[GIT_OID_HEXSZ + 1], *keyid = NULL;
		const char *why = NULL, *signer = NULL;
		json_t *st;
		const char *verdict;
		bool pass;

		if (++n > ATTEST_WALK_MAX) {
			*ret_why = dupf("%s has more than %d commits since its "
					"base",
					branch, ATTEST_WALK_MAX);
			r = -E2BIG;
			goto out;
		}
		git_oid_tostr(hex, sizeof(hex), &oid);
		st = commit_statement(repo, &oid, t, nt, &signer, &keyid, &why);
		verdict = st ? verdict_of(st) : NULL;
		pass = verdict && strcmp(verdict, "pass") == 0;
		if (st && !pass)
			why = "the attested verdict is not a pass";
		else if (st && (why = meets(st, want, unmet, sizeof(unmet))))
			pass = false;
		json_array_append_new(
		    commits,
		    json_pack("{s:s, s:b, s:s?, s:s?, s:s?}", "commit", hex,
			      "attested", st != NULL, "key", signer, "verdict",
			      verdict, "why", st && pass ? NULL : why));
		json_t *last = json_array_get(commits, n - 1);
		json_t *pred = json_object_get(st, "predicate");

		/* When and how, for the person reading the answer. */
		json_object_set(last, "signed_at",
				json_object_get(pred, "signed_at")
				    ?: json_null());
		json_object_set(last, "method",
				json_object_get(pred, "method") ?: json_null());
		if (!json_object_get(last, "key"))
			json_object_set_new(last, "key", json_null());
		if (!json_object_get(last, "verdict"))
			json_object_set_new(last, "verdict", json_null());
		if (!json_object_get(last, "why"))
			json_object_set_new(last, "why", json_null());
		json_decref(st);
		free(keyid);
	}
	ok = branch_why(commits, &why_all);
	*ret = json_pack("{s:b, s:o, s:s?, s:s, s:O, s:O?}", "ok", ok,
			 "commits", commits, "why", why_all, "merge_base",
			 mbhex, "required", want, "trust_from", from);
	commits = NULL;
	if (!json_object_get(*ret, "why"))
		json_object_set_new(*ret, "why", json_null());
	if (!json_object_get(*ret, "trust_from"))
		json_object_set_new(*ret, "trust_from", json_null());
	r = 0;
out:
	json_decref(commits);
	json_decref(from);
	json_decref(want);
	strv_free(&keys);
	free(why_all);
	git_revwalk_free(walk);
	free(t);
	git_repository_free(repo);
	shadow_remove(shadow);
	return r;
}
