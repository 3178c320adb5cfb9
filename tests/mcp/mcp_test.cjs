// spctl mcp, driven by the reference MCP TypeScript SDK's Client over its
// StdioClientTransport, against the real spd tests/mcp/run started.  Prints
// one PASS/FAIL/SKIP line per check.  Environment: SPCTL, SESSION_ID,
// SESSION_TOKEN, WORKTREE, REPO (the operator's repository), FEATURE,
// SECRET, and spd's SPD_* directories.
'use strict';
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { ElicitRequestSchema, LATEST_PROTOCOL_VERSION } = require('@modelcontextprotocol/sdk/types.js');
const cp = require('child_process');
const fs = require('fs');
const path = require('path');

const SPCTL = process.env.SPCTL;
const SID = process.env.SESSION_ID;
const WT = process.env.WORKTREE;
const REPO = process.env.REPO;
const FEATURE = process.env.FEATURE;
const SECRET = process.env.SECRET;
// A bound on a failure (a hung step), never a timed assertion.
const WAIT_MS = 20000;

let failed = 0;
function pass(name) { console.log(`PASS mcp/${name}`); }
function fail(name, why) { failed++; console.log(`FAIL mcp/${name}: ${why}`); }
function check(name, ok, why) { ok ? pass(name) : fail(name, why); }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(cond) {
  for (let t = 0; t < WAIT_MS; t += 100) {
    if (await cond()) return true;
    await sleep(100);
  }
  return false;
}

// The operator's environment (the operator token from the config dir), and
// an agent's (its session token).
function operatorEnv() {
  const e = { ...process.env };
  delete e.SPD_SESSION_TOKEN;
  return e;
}
function agentEnv() {
  return { ...operatorEnv(), SPD_SESSION_TOKEN: process.env.SESSION_TOKEN };
}
function spctl(args, env = operatorEnv()) {
  return cp.spawnSync(SPCTL, args, { env, encoding: 'utf8' });
}
// The journal's rows after row `since` (0: all), as spd hands them out.
function journal(since = 0) {
  const r = spctl(['journal', '--json', '--since', String(since), '--limit', '1000']);
  return r.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
}
// The rows after `since`, once pred holds of them (spd commits rows on a
// writer thread, a moment after it answers), or whatever is there when the
// bound runs out.
async function rowsAfter(since, pred) {
  let rows = [];
  await waitFor(() => pred(rows = journal(since)));
  return rows;
}
// The id of the journal's last row.  Each query is itself journaled (a
// "request journal.query" row), so paging stops at a page holding nothing
// else: waiting for an empty page never ends once spd keeps up.
function lastRow() {
  const own = (r) => r.kind === 'request' && /^journal\.query /.test(r.summary || '');
  const rows = journal(0);
  let last = rows.length ? rows[rows.length - 1].id : 0;
  for (let more = journal(last); more.some((r) => !own(r)); more = journal(last)) last = more[more.length - 1].id;
  return last;
}
// JSON with sorted keys: the text block and structuredContent compare equal.
function canon(v) {
  if (Array.isArray(v)) return '[' + v.map(canon).join(',') + ']';
  if (v && typeof v === 'object') return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + canon(v[k])).join(',') + '}';
  return JSON.stringify(v);
}
function text(res) {
  return (res.content || []).map((c) => c.text || '').join('\n');
}
// Processes on the host whose argv is exactly argv (the sandbox's pid
// namespace is visible from here).
function running(argv) {
  const want = argv.join('\0') + '\0';
  let n = 0;
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      if (fs.readFileSync(`/proc/${p}/cmdline`, 'latin1') === want) n++;
    } catch (e) { /* gone */ }
  }
  return n;
}

async function connect(name, { agent = false, elicit = null, version, token = null } = {}) {
  const args = agent ? ['mcp'] : ['mcp', '--session', SID];
  const env = agent ? agentEnv() : operatorEnv();
  if (token) env.SPD_SESSION_TOKEN = token;
  const transport = new StdioClientTransport({
    command: SPCTL, args, env, stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr.on('data', (d) => { stderr += d; });
  const caps = elicit ? { elicitation: { form: {} } } : {};
  const client = new Client({ name, version: '1.0.0' }, { capabilities: caps });
  if (elicit) client.setRequestHandler(ElicitRequestSchema, elicit);
  await client.connect(transport);
  return { client, transport, stderr: () => stderr };
}

// A raw client: spctl mcp with stdin and stdout as pipes, for what the SDK
// would never send.
function raw(args = ['mcp', '--session', SID], env = operatorEnv()) {
  const child = cp.spawn(SPCTL, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines = [];
  let buf = '', err = '', exited = null;
  child.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  child.stderr.on('data', (d) => { err += d; });
  child.on('exit', (code) => { exited = code; });
  child.stdin.on('error', () => {});
  return {
    child, lines,
    send(s) { child.stdin.write(typeof s === 'string' ? s : JSON.stringify(s) + '\n'); },
    async response(pred) {
      let found = null;
      await waitFor(() => {
        for (const l of lines) {
          let m;
          try { m = JSON.parse(l); } catch (e) { continue; }
          if (pred(m)) { found = m; return true; }
        }
        return false;
      });
      return found;
    },
    stderr: () => err,
    exited: () => exited,
  };
}
const INIT = (id, version) => ({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

async function main() {
  // ---- no session: spctl mcp refuses to start, saying how to get one.
  {
    const e = operatorEnv();
    const r = cp.spawnSync(SPCTL, ['mcp'], { env: e, input: '', encoding: 'utf8' });
    check('no-session-refused', r.status === 2 && /spctl session start/.test(r.stderr) && r.stdout === '',
      `exit ${r.status}, stdout ${JSON.stringify(r.stdout)}, stderr ${r.stderr}`);
  }

  // ---- the handshake and the tools, as the operator with elicitation.
  const asked = [];
  let answer = 'accept';
  const op = await connect('spd-test-operator', {
    elicit: async (req) => {
      asked.push(req.params);
      return answer === 'accept' ? { action: 'accept', content: { approve: true } } : { action: answer };
    },
  });
  const c = op.client;
  check('handshake', c.getServerVersion()?.name === 'spctl-mcp' && !!c.getServerCapabilities()?.tools,
    `server ${JSON.stringify(c.getServerVersion())} ${JSON.stringify(c.getServerCapabilities())}`);
  check('handshake-version', LATEST_PROTOCOL_VERSION === '2025-11-25',
    `the SDK's latest revision is ${LATEST_PROTOCOL_VERSION}`);
  {
    const { tools } = await c.listTools();
    const names = tools.map((t) => t.name).sort().join(',');
    const want = 'commit,edit_file,list_dir,policy_check,propose_rule,read_file,run_command,search,session_status,write_file';
    const by = Object.fromEntries(tools.map((t) => [t.name, t]));
    check('tools-list', names === want, `tools: ${names}`);
    check('tools-schemas', tools.every((t) => t.inputSchema?.type === 'object' && t.outputSchema?.type === 'object'),
      'a tool lacks inputSchema or outputSchema');
    check('tools-annotations', by.read_file?.annotations?.readOnlyHint === true &&
      by.run_command?.annotations?.destructiveHint === true &&
      by.write_file?.annotations?.readOnlyHint === false &&
      by.search?.annotations?.readOnlyHint === true,
    JSON.stringify(tools.map((t) => [t.name, t.annotations])));
  }

  // ---- a run: its output, structured and as text.
  {
    const r = await c.callTool({ name: 'run_command', arguments: { argv: ['cat', 'hello.txt'] } });
    check('run', !r.isError && r.structuredContent?.exit_code === 0 &&
      r.structuredContent.stdout === 'hello from the workspace\n' &&
      canon(JSON.parse(text(r))) === canon(r.structuredContent), JSON.stringify(r));
    const s = await c.callTool({ name: 'session_status', arguments: {} });
    check('session-status', s.structuredContent?.id === SID && s.structuredContent?.commands >= 1, JSON.stringify(s));
    const ls = await c.callTool({ name: 'list_dir', arguments: {} });
    check('list-dir', !ls.isError && ls.structuredContent.entries.some((e) => e.name === 'hello.txt'), JSON.stringify(ls));
    const pc = await c.callTool({ name: 'policy_check', arguments: { argv: ['git', 'push'] } });
    check('policy-check', pc.structuredContent?.decision === 'deny' && pc.structuredContent?.rule === 'deny.git.remote',
      JSON.stringify(pc));
  }

  // ---- a denied call: a tool error with the rule and its reason, nothing run.
  {
    const before = lastRow();
    const r = await c.callTool({ name: 'run_command', arguments: { argv: ['git', 'push', 'origin', 'main'] } });
    check('denied', r.isError === true && /deny\.git\.remote/.test(text(r)) && /POLICY-DENIED/.test(text(r)) &&
      /remote/.test(text(r)), JSON.stringify(r));
    // The reason said once: a model that reads it twice weighs it twice.
    const why = (await c.callTool({ name: 'policy_check', arguments: { argv: ['git', 'push', 'origin', 'main'] } }))
      .structuredContent?.reason;
    check('denied-reason-once', !!why && text(r).split(why).length === 2, `reason ${JSON.stringify(why)} in ${text(r)}`);
    const rows = await rowsAfter(before, (rs) => rs.some((e) => e.detail?.outcome === 'POLICY-DENIED'));
    check('denied-journaled', rows.some((e) => e.detail?.outcome === 'POLICY-DENIED' && e.detail?.method === 'cmd.run') &&
      !rows.some((e) => e.kind === 'run.start'), JSON.stringify(rows.map((e) => e.kind)));
  }

  // ---- writes and edits.
  {
    const w = await c.callTool({ name: 'write_file', arguments: { path: 'new.txt', content: 'alpha beta\n' } });
    const e = await c.callTool({ name: 'edit_file', arguments: { path: 'new.txt', old_string: 'beta', new_string: 'gamma' } });
    check('write-edit', !w.isError && !e.isError && e.structuredContent?.replacements === 1 &&
      fs.readFileSync(path.join(WT, 'new.txt'), 'utf8') === 'alpha gamma\n', JSON.stringify([w, e]));
    const t = await c.callTool({ name: 'edit_file', arguments: { path: 'twice.txt', old_string: 'one', new_string: 'three' } });
    check('edit-not-unique', t.isError === true && /occurs 2 times/.test(text(t)) &&
      fs.readFileSync(path.join(WT, 'twice.txt'), 'utf8') === 'one\ntwo\none\n', JSON.stringify(t));
    const bad = await c.callTool({ name: 'run_command', arguments: { argv: 'ls -l' } });
    check('input-error-is-tool-error', bad.isError === true && /argv/.test(text(bad)), JSON.stringify(bad));
    let unknown = null;
    try { await c.callTool({ name: 'no_such_tool', arguments: {} }); } catch (err) { unknown = err; }
    check('unknown-tool', unknown && unknown.code === -32602, String(unknown));
  }

  // ---- commit: the agent's commit, with its message, is on spd/FEATURE in
  // the operator's repository when the call returns; session_status shows
  // what is uncommitted before and the commit after.
  {
    const ag = await connect('spd-test-commit', { agent: true });
    const git = (...a) => cp.spawnSync('git', ['-C', REPO, ...a], { encoding: 'utf8' }).stdout || '';
    const st0 = (await ag.client.callTool({ name: 'session_status', arguments: {} })).structuredContent || {};
    check('status-uncommitted', (st0.uncommitted || []).includes('new.txt') && st0.uncommitted_count >= 1 &&
      Array.isArray(st0.commits) && st0.commits.length === 0, JSON.stringify(st0));
    const msg = 'Add new.txt through the MCP commit tool';
    const r = await ag.client.callTool({ name: 'commit', arguments: { message: msg, paths: ['new.txt'] } },
      undefined, { timeout: 120000 });
    const subject = git('log', '-1', '--format=%s', `spd/${FEATURE}`).trim();
    const files = git('show', '--name-only', '--format=', `spd/${FEATURE}`).trim();
    check('commit', !r.isError && /new\.txt/.test(r.structuredContent?.stdout || '') && subject === msg &&
      files === 'new.txt' && git('show', `spd/${FEATURE}:new.txt`) === 'alpha gamma\n',
    `result ${JSON.stringify(r)}, spd/${FEATURE}: ${subject} [${files}]`);
    const st1 = (await ag.client.callTool({ name: 'session_status', arguments: {} })).structuredContent || {};
    check('status-commits', st1.commits?.[0]?.subject === msg && !(st1.uncommitted || []).includes('new.txt'),
      JSON.stringify(st1));
    const none = await ag.client.callTool({ name: 'commit', arguments: { message: 'nothing to commit', paths: ['new.txt'] } },
      undefined, { timeout: 120000 });
    check('commit-nothing', none.isError === true && /git commit failed/.test(text(none)) &&
      git('log', '-1', '--format=%s', `spd/${FEATURE}`).trim() === msg, JSON.stringify(none));
    const bad = await ag.client.callTool({ name: 'commit', arguments: { paths: ['new.txt'] } });
    check('commit-needs-message', bad.isError === true && /message/.test(text(bad)), JSON.stringify(bad));
    await ag.client.close();
  }

  // ---- a secret in a file comes back redacted, by every tool.
  {
    const r = await c.callTool({ name: 'read_file', arguments: { path: 'secret.txt' } });
    const all = JSON.stringify(r);
    check('secret-redacted', !all.includes(SECRET) && /\[redacted:MCP_TEST_API_KEY\]/.test(r.structuredContent?.content || ''),
      all);
    const s = await c.callTool({ name: 'search', arguments: { pattern: 'api_key' } });
    check('search-redacted', !JSON.stringify(s).includes(SECRET) &&
      s.structuredContent?.matches?.some((m) => m.path === 'secret.txt' && m.line === 1 && /redacted/.test(m.text)),
    JSON.stringify(s));
    const g = await c.callTool({ name: 'search', arguments: { pattern: '^h[a-z]+ from', regex: true } });
    check('search-regex', g.structuredContent?.matches?.length === 1 && g.structuredContent.matches[0].path === 'hello.txt',
      JSON.stringify(g));
    const e = await c.callTool({ name: 'edit_file', arguments: { path: 'secret.txt', old_string: 'api_key', new_string: 'key' } });
    check('edit-redacted-refused', e.isError === true &&
      fs.readFileSync(path.join(WT, 'secret.txt'), 'utf8').includes(SECRET), JSON.stringify(e));
  }

  // ---- paths outside the workspace: a tool error, nothing read or written, journaled.
  {
    const before = lastRow();
    const outside = path.join(path.dirname(WT), 'mcp-outside.txt');
    const r1 = await c.callTool({ name: 'read_file', arguments: { path: '../../../../etc/passwd' } });
    const r2 = await c.callTool({ name: 'write_file', arguments: { path: '../mcp-outside.txt', content: 'x' } });
    const r3 = await c.callTool({ name: 'run_command', arguments: { argv: ['true'], cwd: '../..' } });
    check('path-outside', r1.isError && /PATH-ESCAPE/.test(text(r1)) && !/root:/.test(text(r1)) &&
      r2.isError && /PATH-ESCAPE/.test(text(r2)) && !fs.existsSync(outside) && r3.isError && /PATH-ESCAPE/.test(text(r3)),
    JSON.stringify([r1, r2, r3]));
    const rows = await rowsAfter(before, (rs) => rs.filter((e) => e.detail?.outcome === 'PATH-ESCAPE').length >= 3);
    check('path-outside-journaled', rows.filter((e) => e.detail?.outcome === 'PATH-ESCAPE').length >= 3,
      JSON.stringify(rows.map((e) => e.detail?.outcome)));
  }

  // ---- an ask answered in the client (elicitation, form mode).
  {
    answer = 'accept';
    const r = await c.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', 'echo elicited > elicited.txt'] } },
      undefined, { timeout: 120000 });
    check('ask-elicitation', !r.isError && r.structuredContent?.exit_code === 0 && asked.length === 1 &&
      (asked[0].mode === 'form' || asked[0].mode === undefined) && /ask\.shell/.test(asked[0].message) &&
      asked[0].requestedSchema?.properties?.approve?.type === 'boolean' &&
      fs.existsSync(path.join(WT, 'elicited.txt')), JSON.stringify([r, asked]));
    answer = 'decline';
    const d = await c.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', 'echo no > declined.txt'] } },
      undefined, { timeout: 120000 });
    check('ask-elicitation-declined', d.isError === true && /APPROVAL-REFUSED/.test(text(d)) && asked.length === 2 &&
      !fs.existsSync(path.join(WT, 'declined.txt')), JSON.stringify(d));
    // The agent's words reach the person through termsafe: a U+202E in
    // the call cannot reorder what the elicitation shows.
    const b = await c.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', 'echo \u202Etxt.exe > rlo.txt'] } },
      undefined, { timeout: 120000 });
    const m = asked[2]?.message ?? '';
    check('ask-elicitation-bidi-escaped', b.isError === true && asked.length === 3 &&
      !/[\u202A-\u202E\u2066-\u2069\u200B-\u200F]/.test(m) && m.includes('\\u202e'),
      JSON.stringify(m));
  }

  // ---- propose_rule: the agent asks a person for a request rule of its
  // proxy runs (policy.propose); it is a pending approval the operator sees,
  // and a host spd does not terminate is refused.
  {
    const ag = await connect('spd-test-propose', { agent: true });
    const r = await ag.client.callTool({ name: 'propose_rule',
      arguments: { host: 'api.mcp-standin.test', method: 'GET', path: '/repos/**' } });
    const id = r.structuredContent?.approval;
    // One pending ask per line.
    const pend = (spctl(['approvals', '--json']).stdout || '').split('\n').filter((l) => l).map((l) => JSON.parse(l));
    const p = pend.find((a) => a.id === id);
    check('propose-rule', !r.isError && Number.isInteger(id) && id > 0 && p?.rule === 'ask.net.rule' &&
      p?.object?.host === 'api.mcp-standin.test' && p?.object?.path === '/repos/**', JSON.stringify([r, pend]));
    // Approved, not refused: three refusals in a row would end the attempt.
    if (id) spctl(['approve', String(id)]);
    const bad = await ag.client.callTool({ name: 'propose_rule',
      arguments: { host: 'elsewhere.test', method: 'GET', path: '/x' } });
    check('propose-rule-refused', bad.isError === true && /BAD-REQUEST/.test(text(bad)) &&
      /elsewhere\.test/.test(text(bad)), JSON.stringify(bad));
    await ag.client.close();
  }

  // ---- an ask answered by `spctl approve`, the agent's client told by progress.
  {
    const ag = await connect('spd-test-agent', {
      agent: true,
      // The agent's client may say it can elicit: it still never decides.
      elicit: async () => ({ action: 'accept', content: { approve: true } }),
    });
    const messages = [];
    let approved = null;
    const r = await ag.client.callTool(
      { name: 'run_command', arguments: { argv: ['sh', '-c', 'echo approved-by-a-person'] } }, undefined, {
        timeout: 120000,
        resetTimeoutOnProgress: true,
        onprogress: (p) => {
          messages.push(p.message);
          const m = /spctl approve (\d+)/.exec(p.message || '');
          if (m && approved === null) {
            approved = m[1];
            const a = spctl(['approve', m[1]]);
            if (a.status !== 0) fail('ask-approve-cmd', a.stderr);
          }
        },
      });
    check('ask-spctl-approve', !r.isError && r.structuredContent?.stdout === 'approved-by-a-person\n' && approved !== null,
      JSON.stringify([r, messages]));
    await ag.client.close();
  }

  // ---- long runs: progress with the output so far; cancel kills the run.
  {
    const marker = ['sleep', '3600.25'];
    const seen = [];
    const ac = new AbortController();
    const p = c.callTool({ name: 'run_command', arguments: { argv: ['sh', '-c', 'echo first-line; exec sleep 3600.25'] } },
      undefined, {
        signal: ac.signal, timeout: 120000,
        onprogress: (x) => seen.push(x.message),
      }).catch((e) => e);
    // sh is an ask: the operator's client approves it (elicitation).
    answer = 'accept';
    const started = await waitFor(() => running(marker) > 0 && seen.some((m) => /first-line/.test(m || '')));
    check('progress-output', started, `progress: ${JSON.stringify(seen)}`);
    const before = lastRow();
    ac.abort('test cancels');
    const res = await p;
    const gone = await waitFor(() => running(marker) === 0);
    check('cancel-kills-run', started && gone && res instanceof Error, `result ${res}, running ${running(marker)}`);
    let rows = [];
    await waitFor(() => {
      rows = journal(before);
      return rows.some((e) => e.detail?.method === 'cmd.run');
    });
    // The run's row: ended by spd, SIGTERM first (sleep dies of it, well
    // within spd.conf's kill-grace).
    check('cancel-journaled', rows.some((e) => e.detail?.method === 'cmd.run' && e.detail?.signal === 15 &&
      e.detail?.ended === 'terminated' &&
      (e.detail?.argv || []).includes('echo first-line; exec sleep 3600.25')),
    JSON.stringify(rows.map((e) => e.detail)));
    const after = await c.callTool({ name: 'run_command', arguments: { argv: ['true'] } });
    check('after-cancel-serves', !after.isError && after.structuredContent?.exit_code === 0, JSON.stringify(after));
  }
  await c.close();

  // ---- version negotiation, and what the SDK would never send.
  {
    const before = lastRow();
    const r = raw();
    r.send(INIT(1, '2025-03-26'));
    const i1 = await r.response((m) => m.id === 1);
    r.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    r.send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
    const l = await r.response((m) => m.id === 2);
    check('version-2025-03-26', i1?.result?.protocolVersion === '2025-03-26' &&
      l?.result?.tools?.length === 10 && l.result.tools.every((t) => !t.outputSchema), JSON.stringify([i1, l && l.result.tools[0]]));
    r.send(INIT(3, '2025-06-18'));
    const i2 = await r.response((m) => m.id === 3);
    r.send(INIT(4, '1999-01-01'));
    const i3 = await r.response((m) => m.id === 4);
    check('version-negotiation', i2?.result?.protocolVersion === '2025-06-18' && i3?.result?.protocolVersion === '2025-11-25',
      JSON.stringify([i2, i3]));
    r.send('{"jsonrpc":"2.0","id":5,"method":\n');
    const pe = await r.response((m) => m.error && m.error.code === -32700);
    check('malformed-json', pe && pe.id === null, JSON.stringify(pe));
    r.send({ jsonrpc: '2.0', id: 6, method: 'resources/list' });
    const um = await r.response((m) => m.id === 6);
    check('unknown-method', um?.error?.code === -32601, JSON.stringify(um));
    r.send({ jsonrpc: '1.0', id: 7, method: 'ping' });
    const ir = await r.response((m) => m.id === 7);
    check('invalid-request', ir?.error?.code === -32600, JSON.stringify(ir));
    // Over the limit (1 MiB): refused, nothing run, the next message served.
    const huge = JSON.stringify({
      jsonrpc: '2.0', id: 8, method: 'tools/call',
      params: { name: 'write_file', arguments: { path: 'huge.txt', content: 'x'.repeat(2 * 1024 * 1024) } },
    }) + '\n';
    r.send(huge);
    r.send({ jsonrpc: '2.0', id: 9, method: 'ping' });
    const big = await r.response((m) => m.error && m.error.code === -32600 && /too large/.test(m.error.message));
    const pong = await r.response((m) => m.id === 9);
    check('huge-message', big && pong?.result && !r.lines.some((l) => /"id":8/.test(l)) &&
      !fs.existsSync(path.join(WT, 'huge.txt')), JSON.stringify([big, pong]));
    r.child.stdin.end();
    await waitFor(() => r.exited() !== null);
    // Each refusal is a journal row; nothing of it ran.
    let rows = [];
    const want = ['malformed-json', 'unknown-method', 'invalid-request', 'too-large'];
    await waitFor(() => {
      rows = journal(before);
      return want.every((w) => rows.some((e) => (e.summary || '').endsWith(`mcp refused ${w}`)));
    });
    check('bad-input-journaled', want.every((w) => rows.some((e) => (e.summary || '').endsWith(`mcp refused ${w}`) &&
      e.detail?.method === 'client.refused')) && !rows.some((e) => e.kind === 'run.start' || e.detail?.method === 'fs.write'),
    JSON.stringify(rows.map((e) => e.summary)));
    check('stdout-only-protocol', r.lines.every((l) => { try { return JSON.parse(l).jsonrpc === '2.0'; } catch (e) { return false; } }),
      r.lines.filter((l) => !l.startsWith('{')).join('|'));
  }

  // ---- a client that writes its requests and closes stdin gets its
  // answers: the end of input waits for the calls in flight.
  {
    const r = raw();
    r.send(INIT(1, '2025-11-25'));
    r.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    r.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_command', arguments: { argv: ['sleep', '1'] } } });
    r.send({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'read_file', arguments: { path: 'hello.txt' } } });
    r.child.stdin.end();
    const ended = await waitFor(() => r.exited() !== null);
    const byId = (id) => r.lines.map((l) => { try { return JSON.parse(l); } catch (e) { return null; } })
      .find((m) => m && m.id === id);
    const run = byId(2), read = byId(3);
    check('eof-answers-in-flight', ended && r.exited() === 0 && run?.result?.isError === false &&
      run.result.structuredContent?.exit_code === 0 && /hello from the workspace/.test(JSON.stringify(read?.result)),
    `exited ${r.exited()}, answers ${JSON.stringify([run, read])}, stderr ${r.stderr()}`);
  }

  // ---- a client that vanishes mid-run: the run is killed, spctl mcp ends.
  {
    const marker = ['sleep', '3600.5'];
    const r = raw();
    r.send(INIT(1, '2025-11-25'));
    await r.response((m) => m.id === 1);
    r.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    r.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_command', arguments: { argv: marker } } });
    const started = await waitFor(() => running(marker) > 0);
    const before = lastRow();
    r.child.stdin.destroy();
    r.child.stdout.destroy();
    const gone = await waitFor(() => running(marker) === 0);
    const ended = await waitFor(() => r.exited() !== null);
    check('client-vanishes', started && gone && ended, `started ${started}, gone ${gone}, exited ${r.exited()}`);
    let rows = [];
    await waitFor(() => {
      rows = journal(before);
      return rows.some((e) => e.detail?.method === 'cmd.run');
    });
    check('client-vanishes-journaled', rows.some((e) => e.detail?.method === 'cmd.run' && e.detail?.signal === 15 &&
      e.detail?.ended === 'terminated' &&
      JSON.stringify(e.detail.argv) === JSON.stringify(marker)), JSON.stringify(rows.map((e) => e.detail)));
  }

  // ---- provenance labels (issue 41), in a session of their own: a page
  // fetched through the proxy makes a second host ask a person, naming
  // the page and its row; denied, the stand-in never sees the request.
  // The session's rows and `session show` carry the labels.
  if (process.env.WEB_PORT) {
    const port = process.env.WEB_PORT;
    const st = spctl(['--json', 'session', 'start', 'mcp-prov', '--repo', REPO]);
    const sess = JSON.parse(st.stdout || '{}');
    const ag = await connect('spd-test-prov', { agent: true, token: sess.token });
    const before = lastRow();
    const read = await ag.client.callTool({ name: 'read_file', arguments: { path: 'hello.txt' } });
    const page = await ag.client.callTool(
      { name: 'run_command', arguments: { argv: ['curl', '-sS', `http://page.test:${port}/readme`], network: 'proxy' } },
      undefined, { timeout: 120000 });
    check('prov-fetch', !read.isError && /page \/readme/.test(page.structuredContent?.stdout || ''),
      JSON.stringify([read, page]));
    let asked = null;
    const second = ag.client.callTool(
      { name: 'run_command', arguments: { argv: ['curl', '-sS', `http://other.test:${port}/exfil`], network: 'proxy' } },
      undefined, { timeout: 120000 });
    await waitFor(() => {
      const a = spctl(['approvals', '--json']);
      for (const l of (a.stdout || '').split('\n').filter(Boolean)) {
        let o;
        try { o = JSON.parse(l); } catch (e) { continue; }
        for (const p of Array.isArray(o) ? o : (o.pending || [o])) {
          if (p && p.rule === 'ask.provenance.egress') asked = p;
        }
      }
      return asked !== null;
    });
    if (asked) spctl(['deny', String(asked.id)]);
    const r2 = await second;
    const seen = cp.spawnSync('curl', ['-sS', '--noproxy', '*', `http://127.0.0.2:${port}/seen`], { encoding: 'utf8' }).stdout;
    check('prov-new-host-asks', asked !== null && /this session read network:page\.test .* at row \d+/.test(asked.reason || '') &&
      !/page \/exfil/.test(r2.structuredContent?.stdout || '') && !/exfil/.test(seen || ''),
    JSON.stringify([asked, r2, seen]));
    const rows = await rowsAfter(before, (rs) => rs.some((e) => e.kind === 'net.proxy' && e.detail?.decision === 'allow'));
    const fsRow = rows.find((e) => e.detail?.method === 'fs.read');
    const runRow = rows.find((e) => e.detail?.method === 'cmd.run');
    check('prov-rows-labelled', JSON.stringify(fsRow?.detail?.labels) === '["worktree"]' &&
      (runRow?.detail?.labels || []).includes('command') &&
      rows.some((e) => e.kind === 'net.proxy' && (e.detail?.labels || []).includes('network:page.test')),
    JSON.stringify(rows.filter((e) => e.session === sess.id).map((e) => [e.kind, e.detail?.method, e.detail?.labels])));
    const show = JSON.parse(spctl(['--json', 'session', 'show', sess.id]).stdout || '{}');
    const names = (show.labels || []).map((l) => l.label);
    check('prov-session-show', ['worktree', 'command', 'network:page.test'].every((n) => names.includes(n)) &&
      show.labels.every((l) => l.row > 0), JSON.stringify(show.labels));
    await ag.client.close();
  } else {
    console.log('SKIP mcp/prov: no web stand-in (python3 missing)');
  }
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
  console.log(`FAIL mcp/script: ${e && e.stack || e}`);
  process.exit(1);
});
