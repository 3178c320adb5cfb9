/*
 * Fuzz spctl mcp's server side of the Model Context Protocol: every byte
 * the MCP client writes to spctl mcp's stdin (untrusted: the client is the
 * agent's, steered by whatever it read) reaches client/cmd_mcp.c's
 * on_stdin, which cuts it into messages, checks them as JSON-RPC 2.0 and
 * dispatches initialize, ping, tools/list, tools/call (each tool's
 * arguments checked against its schema in cmd_mcp_tools.c), responses to
 * elicitations and notifications/cancelled, in spctl, outside the sandbox.
 * The harness includes the .c files to reach those static entries; spd is
 * absent (SPD_NO_AUTOSTART, a runtime directory that does not exist), so
 * every call that would reach it fails at once and takes its error path;
 * what spctl answers goes to /dev/null.
 *
 * The input: its first byte picks how many bytes reach the pipe between
 * reads (1..32, or whole), its second whether the session is the
 * operator's; the rest is the client's stream.  Checked beyond
 * ASan/UBSan/LSan: what is buffered never exceeds the message limit, a
 * stream fed whole and ending in a newline leaves nothing buffered, and
 * every call slot is freed.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>

#include "tests/fuzz/frontend.h"
#include "client/cmd_mcp.c"
#include "client/cmd_mcp_tools.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int devnull = -1;
static json_t *schemas;

static void fuzz_init(void)
{
	devnull = frontend_fuzz_env();
	schemas = json_object();
	for (size_t i = 0; i < mcp_tools_n; i++) {
		json_t *in = json_loads(mcp_tools[i].input_schema, 0, NULL);
		json_t *out = json_loads(mcp_tools[i].output_schema, 0, NULL);

		if (!in || !out)
			abort();
		json_object_set_new(
		    schemas, mcp_tools[i].name,
		    json_pack("{s:o, s:o}", "input", in, "output", out));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp m = {0};
	int p[2];
	size_t chunk, off = 0;
	bool whole;

	if (devnull < 0)
		fuzz_init();
	if (size < 2 || devnull < 0 || pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
		return 0;
	m.operator= data[1] & 1;
	chunk = data[0] % 33;
	data += 2;
	size -= 2;
	/* At most a pipe's worth between reads (the write must not block). */
	whole = chunk == 0 && size <= 65536;
	if (chunk == 0)
		chunk = size && size <= 65536 ? size : 65536;
	m.in_fd = p[0];
	m.out_fd = devnull;
	m.session = strdup("fuzz-session");
	m.workspace = strdup("/home/u/ws");
	m.schemas = json_incref(schemas);
	while (off < size) {
		size_t n = size - off < chunk ? size - off : chunk;

		if (write(p[1], data + off, n) != (ssize_t)n)
			abort();
		off += n;
		if (on_stdin(&m) < 0)
			break;
		if (m.in.len > MCP_MESSAGE_MAX)
			abort();
	}
	close(p[1]);
	while (on_stdin(&m) == 0)
		;
	if (whole && size && data[size - 1] == '\n' && m.in.len)
		abort();
	for (int i = 0; i < MCP_CALLS_MAX; i++)
		if (m.calls[i]) {
			call_free(m.calls[i]);
			m.calls[i] = NULL;
		}
	close(p[0]);
	buf_free(&m.in);
	json_decref(m.schemas);
	free(m.session);
	free(m.workspace);
	return 0;
}
