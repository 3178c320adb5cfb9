/*
 * Fuzz spctl acp's side of the Agent Client Protocol: every byte the agent
 * writes to its stdout (untrusted: the agent is steered by whatever it
 * read) reaches client/cmd_acp.c's on_agent_output, which cuts it into
 * messages, parses them and dispatches requests (permissions, files,
 * terminals), responses and session/update notifications, in spctl,
 * outside the sandbox.  The harness includes cmd_acp.c and acp_term.c to
 * reach that static entry; spd is absent (SPD_NO_AUTOSTART, a runtime
 * directory that does not exist), so every call that would reach it fails
 * at once and takes its error path, and the agent's channel is /dev/null.
 *
 * The input: its first byte picks the chunk size the stream is fed in
 * (1..32, or whole), its second the state (in a turn, operator or agent,
 * a known ACP session or not); the rest is the agent's output.  Checked
 * beyond ASan/UBSan/LSan: a message is never held past its newline (fed
 * whole and ending in one, nothing is left buffered), what is buffered
 * never exceeds the message limit, and every terminal and call slot is
 * freed by acp_end.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/fuzz/frontend.h"
#include "client/cmd_acp.c"
#include "client/acp_term.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int devnull = -1;

static void fuzz_init(void)
{
	devnull = frontend_fuzz_env();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct acp a = {.prompts = json_array(), .run_id = 1};
	size_t chunk, off = 0;
	uint8_t mode;

	if (devnull < 0)
		fuzz_init();
	if (size < 2 || devnull < 0) {
		json_decref(a.prompts);
		return 0;
	}
	chunk = data[0] % 33;
	mode = data[1];
	data += 2;
	size -= 2;
	if (chunk == 0)
		chunk = size ? size : 1;
	for (unsigned k = 0; k < ACP_TERMINALS_MAX; k++) {
		a.terms[k].a = &a;
		a.terms[k].spd.fd = -1;
	}
	a.run.fd = dup(devnull);
	a.operator= mode & 1;
	a.session = strdup("fuzz-session");
	a.workspace = strdup("/home/u/ws");
	a.acp_session = mode & 2 ? strdup("acp-1") : NULL;
	a.init_id = 1;
	a.new_id = 2;
	a.prompt_id = 3;
	a.next_id = 4;
	a.in_turn = mode & 4;
	a.turn = mode & 4 ? 1 : 0;
	if (mode & 8)
		json_array_append_new(a.prompts, json_string("a prompt"));

	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;

		on_agent_output(&a, (const char *)data + off, n);
		if (a.line.len > ACP_MESSAGE_MAX)
			abort();
		off += n;
	}
	if (size && data[size - 1] == '\n' && a.line.len)
		abort();

	acp_end(&a);
	for (unsigned k = 0; k < ACP_TERMINALS_MAX; k++)
		if (a.terms[k].id[0] || a.terms[k].spd.fd >= 0)
			abort();
	for (unsigned k = 0; k < ACP_CALLS_MAX; k++)
		if (a.calls[k])
			abort();
	json_decref(a.prompts);
	client_close(&a.run);
	buf_free(&a.line);
	buf_free(&a.stdin_buf);
	free(a.session);
	free(a.workspace);
	free(a.acp_session);
	return 0;
}
