# An ACP v1 agent stand-in for tests/acp/run: answers initialize and
# session/new, and on session/prompt asks its client (spctl acp) for files,
# permissions and a terminal, sends an unknown method and malformed JSON,
# and writes what it got back, one line each, to acp-log.txt in its cwd.
import json, sys
LOG = open("acp-log.txt", "a")
def log(text):
    LOG.write(text)
    LOG.flush()
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
def recv():
    l = sys.stdin.readline()
    if not l: sys.exit(0)
    return json.loads(l)
nid = 100
def ask(method, params):
    global nid
    nid += 1
    send({"jsonrpc": "2.0", "id": nid, "method": method, "params": params})
    while True:
        m = recv()
        if m.get("id") == nid and "method" not in m:
            return m
while True:
    m = recv()
    if m.get("method") == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}})
    elif m.get("method") == "session/new":
        cwd = m["params"]["cwd"]
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "s1"}})
    elif m.get("method") == "session/prompt":
        r = ask("fs/read_text_file", {"sessionId": "s1", "path": cwd + "/hello.txt"})
        log("READ %s\n" % json.dumps(r))
        r = ask("fs/write_text_file", {"sessionId": "s1", "path": cwd + "/out.txt", "content": "written by agent\n"})
        log("WRITE %s\n" % json.dumps(r))
        r = ask("fs/read_text_file", {"sessionId": "s1", "path": "/etc/passwd"})
        log("OUTSIDE %s\n" % json.dumps(r))
        opts = [{"optionId": "aa", "name": "always", "kind": "allow_always"}, {"optionId": "ao", "name": "once", "kind": "allow_once"}, {"optionId": "ro", "name": "no", "kind": "reject_once"}]
        r = ask("session/request_permission", {"sessionId": "s1", "toolCall": {"toolCallId": "t1", "title": "ls", "kind": "execute", "rawInput": {"command": ["ls"]}}, "options": opts})
        log("PERM-LS %s\n" % json.dumps(r))
        r = ask("session/request_permission", {"sessionId": "s1", "toolCall": {"toolCallId": "t2", "title": "push", "kind": "execute", "rawInput": {"command": ["git", "push"]}}, "options": opts})
        log("PERM-PUSH %s\n" % json.dumps(r))
        r = ask("terminal/create", {"sessionId": "s1", "command": "sh", "args": ["-c", "echo 0123456789abcdef"], "outputByteLimit": 8})
        tid = r.get("result", {}).get("terminalId")
        r = ask("terminal/output", {"sessionId": "s1", "terminalId": tid})
        log("TERM %s\n" % json.dumps(r))
        r = ask("bogus/method", {})
        log("BOGUS %s\n" % json.dumps(r))
        sys.stdout.write("{not json\n"); sys.stdout.flush()
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done here\n"}}}})
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"stopReason": "end_turn"}})
