"""structured_cost.py - what a JSON schema costs a server's decode: the
same greedy chat request streamed with and without response_format
(json_schema: an object holding an array of objects, so that the answer
is long), alternating, 6 rounds; decode rate = tokens after the first over
the time after the first. Prints each round and the medians.

  build/r1infer serve -m MODEL --parallel 1 --port 8090 &
  python3 tools/structured_cost.py 8090
"""
import http.client
import json
import statistics
import sys
import time

port = int(sys.argv[1])
SCHEMA = {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {
    "name": {"type": "string"}, "qty": {"type": "integer", "minimum": 0, "maximum": 1000}, "note": {"type": "string"}},
    "required": ["name", "qty", "note"]}}}, "required": ["items"]}
def one(rf):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    body = {"messages": [{"role": "user", "content": "List twenty things to buy for a picnic, in JSON, with a quantity and a note each."}],
            "max_tokens": 160, "temperature": 0, "stream": True}
    if rf: body["response_format"] = {"type": "json_schema", "json_schema": {"name": "l", "schema": SCHEMA}}
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse(); ts = []
    for line in r:
        if line.startswith(b"data: {"):
            ev = json.loads(line[6:]); d = ev["choices"][0].get("delta", {}) if ev.get("choices") else {}
            if d.get("content") or d.get("reasoning_content"): ts.append(time.time())
    return (len(ts) - 1) / (ts[-1] - ts[0]), len(ts)
res = {0: [], 1: []}
for k in range(6):
    for rf in (0, 1):
        rate, n = one(rf); res[rf].append(rate)
        print(f"round {k} {'schema' if rf else 'free  '}: {rate:.1f} tok/s over {n} tokens", flush=True)
a, b = statistics.median(res[0]), statistics.median(res[1])
print(f"median: free {a:.1f} tok/s, json_schema {b:.1f} tok/s: cost {100 * (1 - b / a):.1f}%")
