#!/usr/bin/env python3
"""A model provider stand-in for the broker tests (standard library only).

Listens on 127.0.0.1 (a free port, written as "PORT n" to
$STANDIN_PORT_FILE, else printed on stdout) and
answers Anthropic-, OpenAI- (chat completions and responses) and
Gemini-shaped calls (/v1beta/models/MODEL:generateContent,
:streamGenerateContent, with alt=sse as server-sent events, else one JSON
array; :countTokens) with fixed usage: 100 input and 50 output tokens
(Gemini's ok and stream modes report 40 candidates and 10 thoughts
tokens).  The key is read from x-api-key, x-goog-api-key, the query's
key= or Authorization: Bearer.  Each request is logged as one JSON line to $STANDIN_LOG:
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

With x-standin-close the connection closes after the reply, without a
"Connection: close" in it.
  script   an agent's model (the default when $STANDIN_SCRIPT names a
           file): replies in the wire format of the API called
           (Anthropic's messages, OpenAI's chat completions or responses,
           Gemini's generateContent), streamed as the provider streams
           them when the request asks for a stream, that drive a real
           agent CLI (tests/agentcli).  The script file,
           read at each call, is JSON {"steps": [{"tool": NAME, "input":
           {...}}, ...], "done": TEXT} (or one step as {"tool": NAME,
           "input": {...}, "done": TEXT}): the agent's conversation calls
           the steps' tools in order, one per reply, then ends with the
           final text DONE.  A call's step is the number of tool_result
           blocks in its messages: step 0 is a call that offers the first
           step's tool and holds no tool_result; a later step (or the
           final text, after the last) answers a call whose last user
           message holds a tool_result, and the step's tool must be
           offered (a tool result: Anthropic's tool_result block, chat's
           "tool" message, a responses function_call_output, Gemini's
           functionResponse part).  Any other call (the CLI's side calls:
           titles, quota checks) gets a short text ("{}" when a JSON
           reply is asked for).  Each such call is logged with
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
            k = self.headers.get("x-goog-api-key")
        if k is None and "?" in self.path:
            for kv in self.path.split("?", 1)[1].split("&"):
                if kv.startswith("key="):
                    k = kv[4:]
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
        api = api_of(self.path)
        try:
            self.answer(mode, api, key, body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        # x-standin-close: the connection closes after the reply, which
        # said nothing of it (a provider's front end letting a kept
        # connection go).
        if self.headers.get("x-standin-close"):
            self.close_connection = True
        log({"path": self.path, "mode": mode, "finished": True})

    def sse_head(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", "req_standin")
        self.end_headers()
        self.wfile.flush()

    def gemini_events(self):
        model = gemini_model(self.path)
        return [
            {"candidates": [{"content": {"role": "model", "parts": [
                {"text": "hel"}]}, "index": 0}],
             "usageMetadata": {"promptTokenCount": USAGE_IN,
                               "totalTokenCount": USAGE_IN},
             "modelVersion": model},
            {"candidates": [{"content": {"role": "model", "parts": [
                {"text": "lo"}]}, "finishReason": "STOP", "index": 0}],
             # The thoughts are billed as output besides the
             # candidates' count.
             "usageMetadata": {"promptTokenCount": USAGE_IN,
                               "candidatesTokenCount": USAGE_OUT - 10,
                               "thoughtsTokenCount": 10,
                               "totalTokenCount": USAGE_IN + USAGE_OUT},
             "modelVersion": model},
        ]

    def answer(self, mode, api, key, body):
        openai = api in ("chat", "responses")
        if mode == "script":
            self.scripted(api, body)
            return
        if mode == "fail":
            self.send(500, json.dumps({"type": "error", "error": {
                "type": "api_error", "message": "stand-in failure"}}))
            return
        if mode == "echo":
            self.send(401, json.dumps({"error": {
                "message": "invalid key %s" % key}}))
            return
        if api == "gemini" and mode in ("stream", "drop") and \
                "alt=sse" not in self.path:
            # streamGenerateContent without alt=sse: one JSON array.
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            raw = json.dumps(self.gemini_events()).encode()
            for j in range(0, len(raw), 7):
                if mode == "drop" and j > len(raw) // 2:
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.chunk(raw[j:j + 7])
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        if mode in ("stream", "drop", "stall"):
            self.sse_head()
            if mode == "stall":
                time.sleep(60)
                return
            evs = self.gemini_events() if api == "gemini" else \
                self.events(openai, self.path)
            wait = self.headers.get("x-standin-wait")
            for i, ev in enumerate(evs):
                if mode == "drop" and i == (1 if api == "gemini" else 2):
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                name = ev.get("type", "")
                text = ("event: %s\ndata: %s\n\n" % (name, json.dumps(ev))
                        if name and not openai else
                        "data: %s\r\n\r\n" % json.dumps(ev)
                        if api == "gemini" else
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
            if api == "chat":
                self.chunk(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        if self.path.split("?")[0].endswith(":countTokens"):
            self.send(200, json.dumps({"totalTokens": USAGE_IN}))
        elif api == "gemini":
            ev = self.gemini_events()[-1]
            ev["candidates"][0]["content"]["parts"] = [{"text": "hello"}]
            self.send(200, json.dumps(ev))
        elif self.path.endswith("/count_tokens"):
            self.send(200, json.dumps({"input_tokens": USAGE_IN}))
        elif api == "responses":
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

    def scripted(self, api, body):
        p = self.path.split("?")[0]
        if p.endswith("/count_tokens") or p.endswith(":countTokens"):
            log({"path": self.path, "script": "count_tokens"})
            self.send(200, json.dumps({"totalTokens": USAGE_IN}
                                      if api == "gemini" else
                                      {"input_tokens": USAGE_IN}))
            return
        try:
            req = json.loads(body)
            with open(SCRIPT) as f:
                script = json.load(f)
        except (ValueError, OSError) as e:
            self.send(400, json.dumps({"type": "error", "error": {
                "type": "invalid_request_error", "message": str(e)}}))
            return
        steps = script.get("steps") or [
            {"tool": script["tool"], "input": script["input"]}]
        tools, done, answered = READERS[api](req)
        step = None
        if answered and done >= len(steps):
            kind = "final"
        elif (answered or done == 0) and done < len(steps) and \
                steps[done]["tool"] in tools:
            step = done
            kind = "tool_use"
        else:
            kind = "side"
        model = gemini_model(self.path) if api == "gemini" else \
            req.get("model")
        stream = api == "gemini" and ":streamGenerateContent" in p or \
            bool(req.get("stream"))
        entry = {"path": self.path, "script": kind, "api": api,
                 "model": model, "stream": stream, "tools": tools}
        if step is not None:
            entry["step"] = step
        log(entry)
        if kind == "tool_use":
            reply = ("tool", steps[step]["tool"], steps[step]["input"],
                     step + 1)
        elif kind == "final":
            reply = ("text", script["done"])
        else:
            reply = ("text", "{}" if wants_json(api, req) else "ok")
        if api == "anthropic":
            self.reply_anthropic(req, reply, stream)
        elif api == "chat":
            self.reply_chat(model, reply, stream)
        elif api == "responses":
            self.reply_responses(model, reply, stream)
        else:
            self.reply_gemini(model, reply, stream)

    def sse(self, evs, named=False, done=False):
        self.sse_head()
        for ev in evs:
            if named:
                text = "event: %s\ndata: %s\n\n" % (ev["type"],
                                                   json.dumps(ev))
            else:
                text = "data: %s\n\n" % json.dumps(ev)
            self.chunk(text.encode())
        if done:
            self.chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def reply_anthropic(self, req, reply, stream):
        if reply[0] == "tool":
            block = {"type": "tool_use", "id": "toolu_standin%02d" % reply[3],
                     "name": reply[1], "input": reply[2]}
        else:
            block = {"type": "text", "text": reply[1]}
        stop = "tool_use" if reply[0] == "tool" else "end_turn"
        usage = {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT,
                 "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        msg = {"id": "msg_standin", "type": "message", "role": "assistant",
               "model": req.get("model"), "content": [block],
               "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not stream:
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
        self.sse([{"type": "message_start", "message": start},
                  {"type": "content_block_start", "index": 0,
                   "content_block": first},
                  {"type": "content_block_delta", "index": 0,
                   "delta": delta},
                  {"type": "content_block_stop", "index": 0},
                  {"type": "message_delta", "delta": {
                      "stop_reason": stop, "stop_sequence": None},
                   "usage": {"output_tokens": USAGE_OUT}},
                  {"type": "message_stop"}], named=True)

    def reply_chat(self, model, reply, stream):
        usage = {"prompt_tokens": USAGE_IN, "completion_tokens": USAGE_OUT,
                 "total_tokens": USAGE_IN + USAGE_OUT}
        base = {"id": "chatcmpl-standin", "created": int(time.time()),
                "model": model}
        if reply[0] == "tool":
            call = {"id": "call_standin%02d" % reply[3], "type": "function",
                    "function": {"name": reply[1],
                                 "arguments": json.dumps(reply[2])}}
            msg = {"role": "assistant", "content": None,
                   "tool_calls": [call]}
            finish = "tool_calls"
        else:
            msg = {"role": "assistant", "content": reply[1]}
            finish = "stop"
        if not stream:
            self.send(200, json.dumps(dict(base, object="chat.completion",
                choices=[{"index": 0, "message": msg,
                          "finish_reason": finish}], usage=usage)))
            return
        c = dict(base, object="chat.completion.chunk")
        if reply[0] == "tool":
            first = dict(call, index=0,
                         function={"name": reply[1], "arguments": ""})
            deltas = [{"role": "assistant", "content": None,
                       "tool_calls": [first]},
                      {"tool_calls": [{"index": 0, "function": {
                          "arguments": call["function"]["arguments"]}}]}]
        else:
            deltas = [{"role": "assistant", "content": ""},
                      {"content": reply[1]}]
        evs = [dict(c, choices=[{"index": 0, "delta": d,
                                 "finish_reason": None}]) for d in deltas]
        evs.append(dict(c, choices=[{"index": 0, "delta": {},
                                     "finish_reason": finish}]))
        evs.append(dict(c, choices=[], usage=usage))
        self.sse(evs, done=True)

    def reply_responses(self, model, reply, stream):
        if reply[0] == "tool":
            item = {"type": "function_call", "id": "fc_standin%02d" % reply[3],
                    "call_id": "call_standin%02d" % reply[3],
                    "name": reply[1], "arguments": json.dumps(reply[2]),
                    "status": "completed"}
        else:
            item = {"type": "message", "id": "msg_standin",
                    "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": reply[1],
                                 "annotations": []}]}
        usage = {"input_tokens": USAGE_IN, "output_tokens": USAGE_OUT,
                 "total_tokens": USAGE_IN + USAGE_OUT,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens_details": {"reasoning_tokens": 0}}
        resp = {"id": "resp_standin", "object": "response",
                "created_at": int(time.time()), "model": model,
                "status": "completed", "output": [item], "usage": usage}
        if not stream:
            self.send(200, json.dumps(resp))
            return
        pending = dict(resp, status="in_progress", output=[], usage=None)
        evs = [{"type": "response.created", "response": pending},
               {"type": "response.in_progress", "response": pending}]
        if reply[0] == "tool":
            evs += [{"type": "response.output_item.added", "output_index": 0,
                     "item": dict(item, arguments="",
                                  status="in_progress")},
                    {"type": "response.function_call_arguments.delta",
                     "output_index": 0, "item_id": item["id"],
                     "delta": item["arguments"]},
                    {"type": "response.function_call_arguments.done",
                     "output_index": 0, "item_id": item["id"],
                     "arguments": item["arguments"]}]
        else:
            part = {"type": "output_text", "text": "", "annotations": []}
            evs += [{"type": "response.output_item.added", "output_index": 0,
                     "item": dict(item, content=[], status="in_progress")},
                    {"type": "response.content_part.added",
                     "output_index": 0, "item_id": item["id"],
                     "content_index": 0, "part": part},
                    {"type": "response.output_text.delta", "output_index": 0,
                     "item_id": item["id"], "content_index": 0,
                     "delta": reply[1]},
                    {"type": "response.output_text.done", "output_index": 0,
                     "item_id": item["id"], "content_index": 0,
                     "text": reply[1]},
                    {"type": "response.content_part.done",
                     "output_index": 0, "item_id": item["id"],
                     "content_index": 0, "part": dict(part, text=reply[1])}]
        evs += [{"type": "response.output_item.done", "output_index": 0,
                 "item": item},
                {"type": "response.completed", "response": resp}]
        for i, ev in enumerate(evs):
            ev["sequence_number"] = i
        self.sse(evs, named=True)

    def reply_gemini(self, model, reply, stream):
        if reply[0] == "tool":
            part = {"functionCall": {"name": reply[1], "args": reply[2]}}
        else:
            part = {"text": reply[1]}
        usage = {"promptTokenCount": USAGE_IN,
                 "candidatesTokenCount": USAGE_OUT,
                 "totalTokenCount": USAGE_IN + USAGE_OUT}
        last = {"candidates": [{"content": {"role": "model",
                                            "parts": [part]},
                                "finishReason": "STOP", "index": 0}],
                "usageMetadata": usage, "modelVersion": model,
                "responseId": "standin"}
        if not stream:
            self.send(200, json.dumps(last))
            return
        # As Google streams it: each chunk with the usage so far, the
        # last with the finish reason; events end in CRLF CRLF.
        first = {"candidates": [{"content": {"role": "model", "parts": [
            {"text": ""}]}, "index": 0}],
            "usageMetadata": {"promptTokenCount": USAGE_IN,
                              "totalTokenCount": USAGE_IN},
            "modelVersion": model, "responseId": "standin"}
        if "alt=sse" not in self.path:
            self.send(200, json.dumps([first, last]))
            return
        self.sse_head()
        for ev in (first, last):
            self.chunk(("data: %s\r\n\r\n" % json.dumps(ev)).encode())
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def api_of(path):
    p = path.split("?")[0]
    if p.startswith("/v1beta/") or p.startswith("/v1/models/"):
        return "gemini"
    if p.startswith("/v1/responses"):
        return "responses"
    if p.startswith("/v1/chat"):
        return "chat"
    return "anthropic"


def gemini_model(path):
    p = path.split("?")[0]
    return p.rsplit("/", 1)[-1].split(":")[0]


def wants_json(api, req):
    if api == "gemini":
        gc = req.get("generationConfig") or {}
        return gc.get("responseMimeType") == "application/json"
    if api == "chat":
        return (req.get("response_format") or {}).get("type", "") in (
            "json_object", "json_schema")
    if api == "responses":
        return ((req.get("text") or {}).get("format") or {}).get(
            "type", "") in ("json_object", "json_schema")
    return False


def read_anthropic(req):
    """The tools offered, the tool results so far, whether the last
    message is one."""
    def results(m):
        c = m.get("content") if isinstance(m, dict) else None
        return sum(1 for b in c if isinstance(b, dict) and
                   b.get("type") == "tool_result") \
            if isinstance(c, list) else 0
    msgs = req.get("messages") or [{}]
    return ([t.get("name") for t in req.get("tools") or []],
            sum(results(m) for m in msgs), results(msgs[-1]) > 0)


def read_chat(req):
    msgs = req.get("messages") or [{}]
    tools = [(t.get("function") or {}).get("name")
             for t in req.get("tools") or []]
    n = sum(1 for m in msgs if m.get("role") == "tool")
    return tools, n, msgs[-1].get("role") == "tool"


def read_responses(req):
    items = req.get("input")
    if not isinstance(items, list):
        items = [{}]
    outs = ("function_call_output", "custom_tool_call_output")
    tools = [t.get("name") for t in req.get("tools") or []]
    n = sum(1 for i in items if isinstance(i, dict) and
            i.get("type") in outs)
    last = items[-1] if items else {}
    return tools, n, isinstance(last, dict) and last.get("type") in outs


def read_gemini(req):
    tools = [d.get("name") for t in req.get("tools") or []
             for d in t.get("functionDeclarations") or []]
    contents = req.get("contents") or [{}]

    def results(c):
        return sum(1 for p in c.get("parts") or []
                   if isinstance(p, dict) and "functionResponse" in p)
    return (tools, sum(results(c) for c in contents),
            results(contents[-1]) > 0)


READERS = {"anthropic": read_anthropic, "chat": read_chat,
           "responses": read_responses, "gemini": read_gemini}


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
