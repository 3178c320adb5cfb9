/*
 * The environment scrub of common/envscrub.h: which variables look like
 * secrets, matched by name, used by spd to build a run's environment and
 * by sandboxd to scrub it again before exec.
 */
#include <string.h>

#include "envscrub.h"

static char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static bool has_prefix(const char *s, size_t n, const char *p)
{
	size_t pn = strlen(p);

	if (n < pn)
		return false;
	for (size_t i = 0; i < pn; i++)
		if (lower(s[i]) != p[i])
			return false;
	return true;
}

static bool has_suffix(const char *s, size_t n, const char *p)
{
	size_t pn = strlen(p);

	return n >= pn && has_prefix(s + n - pn, pn, p);
}

static bool contains(const char *s, size_t n, const char *p)
{
	size_t pn = strlen(p);

	for (size_t i = 0; i + pn <= n; i++)
		if (has_prefix(s + i, n - i, p))
			return true;
	return false;
}

/* Whole names that carry credentials or a way to obtain them. */
static const char *const exact[] = {
    "ssh_auth_sock",
    "git_askpass",
    "ssh_askpass",
    "sudo_askpass",
    "gpg_agent_info",
    "kubeconfig",
    "netrc",
    "docker_auth_config",
    "git_credential_helper",
    "npm_config__auth",
    "pgpass",
    "pgpassword",
    "mysql_pwd",
    "vault_addr",
    NULL,
};

/* Prefixes of provider and cloud variables, all of which may hold keys. */
static const char *const prefixes[] = {
    "aws_",
    "anthropic_",
    "openai_",
    "azure_",
    "google_application_",
    "gcloud_",
    "cloudsdk_",
    "gh_",
    "github_",
    "gitlab_",
    "hf_",
    "huggingface_",
    "vault_",
    "spd_",
    "digitalocean_",
    "heroku_",
    "npm_token",
    "cargo_registry_token",
    "twine_",
    "docker_",
    "stripe_",
    "slack_",
    "sentry_",
    "datadog_",
    NULL,
};

static const char *const suffixes[] = {
    "_api_key", "_apikey", "_token", "_key", "_pat", "_auth", NULL,
};

static const char *const infixes[] = {
    "secret",	   "password", "passwd", "credential",
    "private_key", "api_key",  "apikey", "access_key",
    "session_key", "token",    NULL,
};

bool envscrub_name_is_secret(const char *name, size_t n)
{
	if (n == 0)
		return true;
	for (size_t i = 0; exact[i]; i++)
		if (n == strlen(exact[i]) && has_prefix(name, n, exact[i]))
			return true;
	for (size_t i = 0; prefixes[i]; i++)
		if (has_prefix(name, n, prefixes[i]))
			return true;
	for (size_t i = 0; suffixes[i]; i++)
		if (has_suffix(name, n, suffixes[i]))
			return true;
	for (size_t i = 0; infixes[i]; i++)
		if (contains(name, n, infixes[i]))
			return true;
	return false;
}

bool envscrub_entry_drop(const char *entry, const char *const *secrets)
{
	const char *eq = strchr(entry, '=');

	if (!eq || eq == entry)
		return true;
	if (envscrub_name_is_secret(entry, (size_t)(eq - entry)))
		return true;
	if (secrets)
		for (size_t i = 0; secrets[i]; i++)
			if (secrets[i][0] && strcmp(eq + 1, secrets[i]) == 0)
				return true;
	return false;
}

/* A turn key's shape (daemon/broker/broker.h): "sk-spd-" and 64 lowercase
 * hex digits.  No provider issues keys of this form. */
#define ENVSCRUB_TURN_KEY_PREFIX "sk-spd-"
#define ENVSCRUB_TURN_KEY_HEX 64

static bool is_turn_key(const char *v)
{
	size_t pn = strlen(ENVSCRUB_TURN_KEY_PREFIX);

	if (strncmp(v, ENVSCRUB_TURN_KEY_PREFIX, pn) != 0)
		return false;
	v += pn;
	for (size_t i = 0; i < ENVSCRUB_TURN_KEY_HEX; i++)
		if (!((v[i] >= '0' && v[i] <= '9') ||
		      (v[i] >= 'a' && v[i] <= 'f')))
			return false;
	return v[ENVSCRUB_TURN_KEY_HEX] == '\0';
}

static bool is_broker_url(const char *v, unsigned port)
{
	char want[40];
	size_t n = 0;
	char digits[8];
	size_t nd = 0;

	memcpy(want, "http://127.0.0.1:", 17);
	n = 17;
	do {
		digits[nd++] = (char)('0' + port % 10);
		port /= 10;
	} while (port && nd < sizeof(digits));
	while (nd)
		want[n++] = digits[--nd];
	want[n] = '\0';
	return strncmp(v, want, n) == 0 &&
	       (v[n] == '\0' || strcmp(v + n, "/v1") == 0);
}

bool envscrub_broker_entry_ok(const char *entry, unsigned port)
{
	static const char *const keys[] = {
	    "ANTHROPIC_API_KEY=", "ANTHROPIC_AUTH_TOKEN=", "OPENAI_API_KEY=",
	    "GEMINI_API_KEY="};
	static const char *const urls[] = {
	    "ANTHROPIC_BASE_URL=", "OPENAI_BASE_URL=",
	    "GOOGLE_GEMINI_BASE_URL="};

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strncmp(entry, keys[i], strlen(keys[i])) == 0)
			return is_turn_key(entry + strlen(keys[i]));
	for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++)
		if (strncmp(entry, urls[i], strlen(urls[i])) == 0)
			return port &&
			       is_broker_url(entry + strlen(urls[i]), port);
	return false;
}
