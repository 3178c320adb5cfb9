// An ACP v1 agent stand-in for tests/acp/run, built on the reference ACP
// TypeScript SDK (@agentclientprotocol/sdk, pinned in package.json).  It
// runs inside the session's sandbox as spctl acp's agent and, on each
// session/prompt, does what the prompt's first word names, asking its
// client (spctl acp, that is spd) for files, permissions and terminals.
// What it got back goes to acp-log.txt in its cwd, one line each: "NAME
// JSON".  The suite judges from that log, the worktree and the journal.
import * as acp from "@agentclientprotocol/sdk";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";

const LOG = "acp-log.txt";
const log = (name, v) => appendFileSync(LOG, `${name} ${JSON.stringify(v)}\n`);
// Every option kind, so that choosing an always-option would show.
const OPTIONS = [
	{ optionId: "aa", name: "Always allow", kind: "allow_always" },
	{ optionId: "ao", name: "Allow once", kind: "allow_once" },
	{ optionId: "ro", name: "Reject once", kind: "reject_once" },
	{ optionId: "ra", name: "Always reject", kind: "reject_always" },
];
let cwd = "";
let cancelled = false;
// --auth: the agent, as codex-acp without its own login, answers
// session/new with "Authentication required" until the client
// authenticates with its API-key method.
const needAuth = process.argv.includes("--auth");
let authed = false;

// A request's outcome as data: its result, or its error's code and text.
async function outcome(p) {
	try {
		return { result: await p };
	} catch (e) {
		return { error: { code: e.code, message: e.message } };
	}
}

function permission(client, sessionId, id, title, command, locations) {
	const toolCall = { toolCallId: id, title, kind: "execute", rawInput: { command } };
	if (locations) toolCall.locations = locations;
	return outcome(
		client.request(acp.methods.client.session.requestPermission, {
			sessionId,
			toolCall,
			options: OPTIONS,
		}),
	);
}

async function terminal(client, sessionId, command, args, limit) {
	const t = await client.createTerminal({
		sessionId,
		command,
		args,
		outputByteLimit: limit,
	});
	return t;
}

const raw = (text) =>
	new Promise((resolve) => {
		if (process.stdout.write(text)) resolve();
		else process.stdout.once("drain", resolve);
	});

const update = (client, sessionId, u) =>
	client.notify(acp.methods.client.session.update, { sessionId, update: u });

async function turnMain(client, sessionId) {
	// More than 1 MiB on the channel before anything else: the agent's
	// stdout must not be cut.
	const chunk = "x".repeat(100 * 1024);
	for (let i = 0; i < 12; i++)
		await update(client, sessionId, {
			sessionUpdate: "agent_thought_chunk",
			content: { type: "text", text: chunk },
		});
	await update(client, sessionId, {
		sessionUpdate: "plan",
		entries: [{ content: "read, write, ask, run", priority: "high", status: "in_progress" }],
	});
	await update(client, sessionId, {
		sessionUpdate: "tool_call",
		toolCallId: "tc-read",
		title: "read hello",
		kind: "read",
		status: "pending",
	});
	log(
		"READ",
		await outcome(
			client.request(acp.methods.client.fs.readTextFile, { sessionId, path: `${cwd}/hello.txt` }),
		),
	);
	log(
		"WRITE",
		await outcome(
			client.request(acp.methods.client.fs.writeTextFile, {
				sessionId,
				path: `${cwd}/out.txt`,
				content: "written by agent\n",
			}),
		),
	);
	log(
		"OUTSIDE",
		await outcome(client.request(acp.methods.client.fs.readTextFile, { sessionId, path: "/etc/passwd" })),
	);
	log("PERM-LS", await permission(client, sessionId, "t1", "ls", ["ls"]));
	log("PERM-PUSH", await permission(client, sessionId, "t2", "push", ["git", "push"]));
	// A command line is judged as the shell that would run it: sh -c
	// asks (and the suite's person denies please-deny), where its first
	// word alone (echo) would be allowed.
	log("PERM-LINE", await permission(client, sessionId, "t5", "line", "echo please-deny > line.txt"));
	// A permission request carrying only the id, title and input: the
	// kind and the file came in the tool_call update before it, and the
	// request is judged with them (a write in the worktree: allowed).
	await update(client, sessionId, {
		sessionUpdate: "tool_call",
		toolCallId: "t8",
		title: "Write merged.txt",
		kind: "edit",
		status: "pending",
		locations: [{ path: `${cwd}/merged.txt` }],
	});
	log(
		"PERM-MERGED",
		await outcome(
			client.request(acp.methods.client.session.requestPermission, {
				sessionId,
				toolCall: { toolCallId: "t8", title: "Write merged.txt", rawInput: { content: "x" } },
				options: OPTIONS,
			}),
		),
	);
	// The same without the update: nothing to judge, refused unasked.
	log(
		"PERM-UNKNOWN",
		await outcome(
			client.request(acp.methods.client.session.requestPermission, {
				sessionId,
				toolCall: { toolCallId: "t9", title: "Write what?", rawInput: { content: "x" } },
				options: OPTIONS,
			}),
		),
	);
	// Asks: the suite's person approves the first and denies the second.
	log("PERM-ASK-YES", await permission(client, sessionId, "t3", "sh", ["sh", "-c", "echo please-approve"]));
	log("PERM-ASK-NO", await permission(client, sessionId, "t4", "sh", ["sh", "-c", "echo please-deny"]));
	log(
		"PERM-OUTSIDE",
		await permission(client, sessionId, "t5", "edit", undefined, [{ path: "/etc/hosts" }]),
	);
	// Asked, approved once, then run as the permission said, with the
	// worktree as its cwd as agents give it: the run uses the person's
	// approval (the suite's person refuses any second ask for it).
	// Both as a command line with no args, as Claude Code sends them:
	// the permission is judged as the shell that the terminal then runs
	// (one decision, one command).
	log("PERM-ONCE", await permission(client, sessionId, "t6", "sh", "echo please-once-ran"));
	try {
		const once = await client.createTerminal({
			sessionId,
			command: "echo please-once-ran",
			cwd,
			outputByteLimit: 1024,
		});
		const ex1 = await once.waitForExit();
		log("TERM-ONCE", { output: await once.currentOutput(), exit: ex1 });
		await once.release();
	} catch (e) {
		log("TERM-ONCE", { error: String(e && (e.message || e)) });
	}
	// A terminal: its output's last 8 bytes, and its exit.
	let t = await terminal(client, sessionId, "sh", ["-c", "echo 0123456789abcdef please-approve-term"], 8);
	const ex = await t.waitForExit();
	log("TERM", { output: await t.currentOutput(), exit: ex });
	await t.release();
	// The tail kept at a character: 'x' 'é' '€' '\n' is 7 bytes; the
	// last 5 would start inside 'é'.
	// Its environment, as ACP gives it.
	t = await client.createTerminal({
		sessionId,
		command: "printenv",
		args: ["ACP_TEST_VAR"],
		env: [{ name: "ACP_TEST_VAR", value: "from-the-agent" }],
		outputByteLimit: 1024,
	});
	log("TERM-ENV", await t.waitForExit().then(() => t.currentOutput()));
	await t.release();
	// Lines to stdout and stderr back to back: one buffer, in the order
	// written (one pipe for both streams).
	t = await terminal(
		client,
		sessionId,
		"sh",
		["-c", "i=1; while [ $i -le 50 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done"],
		65536,
	);
	await t.waitForExit();
	log("TERM-ORDER", await t.currentOutput());
	await t.release();
	t = await terminal(client, sessionId, "printf", ["x\u00e9\u20ac\\n"], 5);
	await t.waitForExit();
	log("TERM-UTF8", await t.currentOutput());
	await t.release();
	// A command that would run for long: started, answered at once,
	// killed, its exit reported.
	t = await terminal(client, sessionId, "sleep", ["1000"], 1024);
	log("SLEEP-RUNNING", await t.currentOutput());
	log("SLEEP-KILL", await outcome(t.kill()));
	log("SLEEP-EXIT", await t.waitForExit());
	log("SLEEP-RELEASE", await outcome(t.release()));
	log("RELEASED-OUTPUT", await outcome(t.currentOutput()));
	log("BOGUS", await outcome(client.request("bogus/method", {})));
	// Bad bytes straight on the channel: malformed JSON, and a message
	// over the limit that would run a command.  (Written past the SDK,
	// which must then wait for the pipe to drain before it writes again.)
	await raw("{not json\n");
	const huge = {
		jsonrpc: "2.0",
		id: 999999,
		method: "terminal/create",
		params: { sessionId, command: "touch", args: ["huge-ran", "y".repeat(1200 * 1024)] },
	};
	await raw(JSON.stringify(huge) + "\n");
	// Still talking after both.
	log("AFTER", await outcome(client.request(acp.methods.client.fs.readTextFile, { sessionId, path: `${cwd}/hello.txt` })));
	await update(client, sessionId, {
		sessionUpdate: "tool_call_update",
		toolCallId: "tc-read",
		status: "completed",
	});
	await update(client, sessionId, {
		sessionUpdate: "agent_message_chunk",
		content: { type: "text", text: "done here\n" },
	});
	return "end_turn";
}

// The agent commits its work as agents do: it writes a file, then runs
// git through a terminal in its worktree (a repository of its own, whose
// commits spd takes onto the session's branch after the run).
async function turnCommit(client, sessionId) {
	log(
		"COMMIT-WRITE",
		await outcome(
			client.request(acp.methods.client.fs.writeTextFile, {
				sessionId,
				path: `${cwd}/acp-committed.txt`,
				content: "committed by the acp agent\n",
			}),
		),
	);
	try {
		const t = await client.createTerminal({
			sessionId,
			command: "sh",
			args: ["-c", 'git add acp-committed.txt && git commit -q -m "acp: add acp-committed.txt" && git log -1 --format=%s'],
			cwd,
			outputByteLimit: 65536,
		});
		const exit = await t.waitForExit();
		log("COMMIT", { output: await t.currentOutput(), exit });
		await t.release();
	} catch (e) {
		log("COMMIT", { error: String(e && (e.message || e)) });
	}
	return "end_turn";
}

// The operator cancels: a terminal runs and a permission waits for a
// person when the suite sends spctl acp SIGINT.
async function turnCancel(client, sessionId) {
	const t = await terminal(client, sessionId, "sleep", ["987654"], 1024);
	log("CANCEL-TERM-STARTED", { id: t.id });
	const p = permission(client, sessionId, "t9", "sh", ["sh", "-c", "echo please-wait"]);
	log("CANCEL-PERM", await p);
	log("CANCEL-TERM-EXIT", await t.waitForExit());
	await t.release();
	log("CANCEL-SEEN", { cancelled });
	return "cancelled";
}

// The agent vanishes mid-turn, leaving a terminal running.
async function turnVanish(client, sessionId) {
	const t = await terminal(client, sessionId, "sleep", ["987655"], 1024);
	log("VANISH-TERM-STARTED", { id: t.id });
	process.exit(3);
}

// The client vanishes: the agent waits with a terminal running until the
// suite kills spctl acp.
async function turnLinger(client, sessionId) {
	const t = await terminal(client, sessionId, "sleep", ["987656"], 1024);
	log("LINGER-TERM-STARTED", { id: t.id });
	await new Promise(() => {});
}

// An agent that ends its turn well but never exits, its input's end
// unheeded (as claude-code-acp and codex-acp do).
async function turnDeaf() {
	setInterval(() => {}, 1 << 30);
	// What an agent does with its last writes when it is ended: spd sends
	// SIGTERM before SIGKILL.
	process.on("SIGTERM", () => {
		log("DEAF-SIGTERM", {});
		process.exit(0);
	});
	log("DEAF-TURN", {});
	return "end_turn";
}

const turns = {
	main: turnMain,
	commit: turnCommit,
	cancel: turnCancel,
	vanish: turnVanish,
	linger: turnLinger,
	deaf: turnDeaf,
};

const app = acp
	.agent({ name: "spd-acp-test-agent" })
	.onRequest(acp.methods.agent.initialize, ({ params }) => {
		log("INIT", params);
		const r = { protocolVersion: acp.PROTOCOL_VERSION, agentCapabilities: {} };
		if (needAuth)
			r.authMethods = [
				{ id: "chatgpt", name: "Login with ChatGPT", description: "a browser" },
				{ id: "openai-api-key", name: "Use OPENAI_API_KEY", description: "the key" },
			];
		return r;
	})
	.onRequest(acp.methods.agent.authenticate, ({ params }) => {
		log("AUTH", params);
		authed = params.methodId === "openai-api-key" && !!process.env.OPENAI_API_KEY;
		return {};
	})
	.onRequest(acp.methods.agent.session.new, ({ params }) => {
		if (needAuth && !authed) {
			log("AUTH-REQUIRED", {});
			throw acp.RequestError.authRequired();
		}
		cwd = params.cwd;
		return { sessionId: "s1" };
	})
	.onNotification(acp.methods.agent.session.cancel, ({ params }) => {
		cancelled = true;
		log("CANCEL-NOTIFIED", params);
	})
	.onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
		const word = params.prompt[0].text.split(" ")[0];
		const turn = turns[word];
		if (!turn) return { stopReason: "refusal" };
		try {
			return { stopReason: await turn(client, params.sessionId) };
		} catch (e) {
			log("EXCEPTION", { message: String(e && e.stack ? e.stack : e) });
			return { stopReason: "end_turn" };
		}
	});

const stream = acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin));
const conn = app.connect(stream);
await conn.closed;
