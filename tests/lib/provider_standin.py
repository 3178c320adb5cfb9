#!/usr/bin/env python3
"""A model provider stand-in for the broker tests (standard library only).

Listens on 127.0.0.1 (a free port, written as "PORT n" to
$STANDIN_PORT_FILE, else printed on stdout) and
answers Anthropic- and OpenAI-shaped calls with fixed usage: 100 input and
50 output tokens.  Each request is logged as one JSON line to $STANDIN_LOG:
its path, whether the expected key ($STANDIN_KEYS, comma-separated)
arrived, every header name and value, and "finished" once it has been
answered.  The request header x-standin-mode picks the behaviour:

  ok       a whole JSON reply (the default)
  stream   server-sent events in small pieces; with x-standin-wait: FILE
           it sends the first event, then waits (up to 20 s) for FILE to
           exist before sending the rest
  fail     HTTP 500 with a JSON error
  echo     HTTP 401 whose message quotes the key it received
  stall    the status line and headers, then nothing for 60 s
  drop     the first events of a stream, then the connection closes
  script   an agent's model (the default when $STANDIN_SCRIPT names a
           file): replies in Anthropic's wire format, streamed as
           server-sent events when the request asks for a stream, that
           drive a real agent CLI (tests/agentcli).  The script file,
           read at each call, is JSON {"steps": [{"tool": NAME, "input":
           {...}}, ...], "done": TEXT} (or one step as {"tool": NAME,
           "input": {...}, "done": TEXT}): the agent's conversation calls
           the steps' tools in order, one per reply, then ends with the
           final text DONE.  A call's step is the number of tool_result
           blocks in its messages: step 0 is a call that offers the first
           step's tool and holds no tool_result; a later step (or the
           final text, after the last) answers a call whose last user
           message holds a tool_result, and the step's tool must be
           offered.  Any other call (the CLI's side calls: titles, quota
           checks) gets a short text.  Each such call is logged with
           "script": tool_use (with its "step"), final or side.
"""
import json
import os
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ.get("STANDIN_LOG", "/dev/null")
KEYS = [k for k in os.environ.get("STANDIN_KEYS", "").split(",") if k]
SCRIPT = os.environ.get("STANDIN_SCRIPT")
USAGE_IN, USAGE_OUT = 100, 50


def log(entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # A reply is several writes; on a kept-alive connection (spd's curl
    # reuses it) Nagle would hold each one after the first for the
    # client's delayed ACK, some 40 ms.  Real providers' front ends set
    # TCP_NODELAY too.
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def key(self):
        k = self.headers.get("x-api-key")
        if k is None:
            a = self.headers.get("authorization", "")
            if a.lower().startswith("bearer "):
                k = a[7:]
        return k

    def send(self, status, body, ctype="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", "req_standin")
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def events(self, openai, path):
        if openai and path.startswith("/v1/responses"):
            return [
                {"type": "response.created", "response": {"id": "r1"}},
                {"type": "response.output_text.delta", "delta": "hel"},
                {"type": "response.output_text.delta", "delta": "lo"},
                {"type": "response.completed", "response": {"id": "r1",
                 "usage": {"input_tokens": USAGE_IN,
                           "output_tokens": USAGE_OUT}}},
            ]
        if openai:
            return [
                {"choices": [{"delta": {"content": "hel"}}]},
                {"choices": [{"delta": {"content": "lo"}}]},
                {"choices": [], "usage": {"prompt_tokens": USAGE_IN,
                                          "completion_tokens": USAGE_OUT}},
            ]
        return [
            {"type": "message_start", "message": {"id": "m1",
             "usage": {"input_tokens": USAGE_IN, "output_tokens": 1}}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "hel"}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "lo"}},
            # Cumulative: the last value counts, never the sum.
            {"type": "message_delta", "usage": {"output_tokens": 20}},
            {"type": "message_delta", "usage": {"output_tokens": USAGE_OUT}},
            {"type": "message_stop"},
        ]

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(n)
        mode = self.headers.get("x-standin-mode",
                                "script" if SCRIPT else "ok")
        key = self.key()
        entry = {"path": self.path, "mode": mode,
                 "key_ok": key in KEYS,
                 "headers": {k.lower(): v for k, v in self.headers.items()},
                 "body": body.decode(errors="replace")}
        log(entry)
        openai = self.path.startswith("/v1/chat") or \
            self.path.startswith("/v1/responses")
        try:
            self.answer(mode, openai, key, body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        log({"path": self.path, "mode": mode, "finished": True})

    def answer(self, mode, openai, key, body):
        if mode == "script" and not openai:
            self.scripted(body)
            return
        if mode == "fail":
            self.send(500, json.dumps({"type": "error", "error": {
                "type": "api_error", "message": "stand-in failure"}}))
            return
        if mode == "echo":
            self.send(401, json.dumps({"error": {
                "message": "invalid key %s" % key}}))
            return
        if mode in ("stream", "drop", "stall"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            if mode == "stall":
                time.sleep(60)
                return
            evs = self.events(openai, self.path)
            wait = self.headers.get("x-standin-wait")
            for i, ev in enumerate(evs):
                if mode == "drop" and i == 2:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                name = ev.get("type", "")
                text = ("event: %s\ndata: %s\n\n" % (name, json.dumps(ev))
                        if name and not openai else
                        "data: %s\n\n" % json.dumps(ev))
                raw = text.encode()
                # Small pieces, so that events straddle reads.
                for j in range(0, len(raw), 7):
                    self.chunk(raw[j:j + 7])
                if i == 0 and wait:
                    for _ in range(200):
                        if os.path.exists(wait):
                            break
                        time.sleep(0.1)
            if openai and not self.path.startswith("/v1/responses"):
                self.chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        if self.path.endswith("/count_tokens"):
            self.send(200, json.dumps({"input_tokens": USAGE_IN}))
        elif openai and self.path.startswith("/v1/responses"):
            self.send(200, json.dumps({"object": "response", "usage": {
                "input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}}))
        elif openai:
            self.send(200, json.dumps({"object": "chat.completion",
                "choices": [{"message": {"content": "hello"}}],
                "usage": {"prompt_tokens": USAGE_IN,
                          "completion_tokens": USAGE_OUT}}))
        else:
            self.send(200, json.dumps({"type": "message", "content": [
                {"type": "text", "text": "hello"}], "usage": {
                "input_tokens": USAGE_IN, "output_tokens": USAGE_OUT}}))


    def scripted(self, body):
        if self.path.split("?")[0].endswith("/count_tokens"):
            log({"path": self.path, "script": "count_tokens"})
            self.send(200, json.dumps({"input_tokens": USAGE_IN}))
            return
        try:
            req = json.loads(body)
            with open(SCRIPT) as f:
                script = json.load(f)
        except (ValueError, OSError) as e:
            self.send(400, json.dumps({"type": "error", "error": {
                "type": "invalid_request_error", "message": str(e)}}))
            return
        tools = [t.get("name") for t in req.get("tools") or []]
        msgs = req.get("messages") or [{}]
        steps = script.get("steps") or [
            {"tool": script["tool"], "input": script["input"]}]

        def results(m):
            c = m.get("content") if isinstance(m, dict) else None
            return sum(1 for b in c if isinstance(b, dict) and
                       b.get("type") == "tool_result") \
                if isinstance(c, list) else 0
        done = sum(results(m) for m in msgs)
        answered = results(msgs[-1]) > 0
        step = None
        if answered and done >= len(steps):
            kind, block = "final", {"type": "text", "text": script["done"]}
        elif (answered or done == 0) and done < len(steps) and \
                steps[done]["tool"] in tools:
            step = done
            kind, block = "tool_use", {
                "type": "tool_use", "id": "toolu_standin%02d" % (step + 1),
                "name": steps[step]["tool"], "input": steps[step]["input"]}
        else:
            kind, block = "side", {"type": "text", "text": "ok"}
        entry = {"path": self.path, "script": kind,
                 "model": req.get("model"), "stream": bool(req.get("stream"))}
        if step is not None:
            entry["step"] = step
        log(entry)
        stop = "tool_use" if kind == "tool_use" else "end_turn"
        usage = {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT,
                 "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        msg = {"id": "msg_standin", "type": "message", "role": "assistant",
               "model": req.get("model"), "content": [block],
               "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not req.get("stream"):
            self.send(200, json.dumps(msg))
            return
        start = dict(msg, content=[], stop_reason=None,
                     usage=dict(usage, output_tokens=1))
        if block["type"] == "tool_use":
            first = dict(block, input={})
            delta = {"type": "input_json_delta",
                     "partial_json": json.dumps(block["input"])}
        else:
            first = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        evs = [{"type": "message_start", "message": start},
               {"type": "content_block_start", "index": 0,
                "content_block": first},
               {"type": "content_block_delta", "index": 0, "delta": delta},
               {"type": "content_block_stop", "index": 0},
               {"type": "message_delta", "delta": {
                   "stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": USAGE_OUT}},
               {"type": "message_stop"}]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", "req_standin")
        self.end_headers()
        for ev in evs:
            self.chunk(("event: %s\ndata: %s\n\n" % (
                ev["type"], json.dumps(ev))).encode())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def main():
    # The default listen backlog (5) drops connections when 32 or 50
    # calls arrive at once (the cap and bench tests), and the client's
    # SYN retry then costs a second.
    ThreadingHTTPServer.request_queue_size = 128
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    port_file = os.environ.get("STANDIN_PORT_FILE")
    if port_file:
        with open(port_file + ".tmp", "w") as f:
            f.write("PORT %d\n" % srv.server_address[1])
        os.rename(port_file + ".tmp", port_file)
    else:
        print("PORT %d" % srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
