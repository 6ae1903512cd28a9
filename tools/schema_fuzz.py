"""schema_fuzz.py - the grammar sampler under load for as long as asked:
every schema of llama.cpp's converter test (tests/schema_corpus.sh caches
it in build/cache) and of tests/structured_test.py's fuzz corpus, as
response_format on a server with a random-weight model (r1infer synth),
one new seed per request, temperature 1, long max_tokens. Counts server
errors (any non-200 of an accepted schema), finished answers and invalid
ones; prints a line per minute and the totals.

  build/r1infer synth --config tiny -o /tmp/tiny
  build/r1infer serve -m /tmp/tiny --parallel 4 --port 8090 &
  python3 tools/schema_fuzz.py --base http://127.0.0.1:8090 --minutes 30
"""
import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import jsonschema

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--cases", default="build/cache/test-json-schema-to-grammar.cpp")
ap.add_argument("--minutes", type=float, default=30)
ap.add_argument("--max-tokens", type=int, default=1024)
ap.add_argument("--clients", type=int, default=4)
args = ap.parse_args()

sys.path.insert(0, "tests")
CASE = re.compile(r'test\(\{\s*SUCCESS,\s*"((?:[^"\\]|\\.)*)",\s*R"""\((.*?)\)"""', re.S)
schemas = [(m.group(1), json.loads(m.group(2))) for m in CASE.finditer(open(args.cases, encoding="utf-8").read())]
schemas += [(f"structured fuzz {i}", s) for i, s in enumerate(__import__("structured_schemas").FUZZ_SCHEMAS)]


def post(body):
    req = urllib.request.Request(args.base + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace")[:300]
    except Exception as e:  # noqa: BLE001 (a dropped connection is an error too)
        return -1, repr(e)


def pattern_free(s):
    if isinstance(s, dict):
        return {k: pattern_free(v) for k, v in s.items() if k != "pattern"}
    return [pattern_free(v) for v in s] if isinstance(s, list) else s


def one(k):
    name, schema = schemas[k % len(schemas)]
    st, ans = post({"messages": [{"role": "user", "content": "JSON please."}], "max_tokens": args.max_tokens,
                    "temperature": 1.0, "seed": k, "chat_template_kwargs": {"enable_thinking": False},
                    "response_format": {"type": "json_schema", "json_schema": {"name": "f", "schema": schema}}})
    if st != 200:
        return name, k, "error", f"{st} {str(ans)[:200]}"
    ch = ans["choices"][0]
    if ch["finish_reason"] != "stop":
        return name, k, "cut", ""
    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError:
            cls = jsonschema.Draft7Validator
        # the one schema whose lookahead pattern is left unenforced (not strict) is checked without it
        cls(pattern_free(schema) if "(?=" in json.dumps(schema) else schema).validate(json.loads(ch["message"]["content"]))
        return name, k, "valid", ""
    except (ValueError, jsonschema.ValidationError) as e:
        return name, k, "invalid", f"{type(e).__name__}: {str(e)[:160]} in {ch['message']['content'][:160]!r}"


t0 = time.time()
counts = {"error": 0, "cut": 0, "valid": 0, "invalid": 0}
k, last = 0, t0
with ThreadPoolExecutor(args.clients) as ex:
    while time.time() - t0 < args.minutes * 60:
        for name, seed, kind, why in ex.map(one, range(k, k + args.clients * 4)):
            counts[kind] += 1
            if kind in ("error", "invalid"):
                print(f"{kind}: '{name}' seed {seed}: {why}", flush=True)
        k += args.clients * 4
        if time.time() - last >= 60:
            last = time.time()
            print(f"{(last - t0) / 60:.0f} min: {k} requests {counts}", flush=True)
print(f"schema_fuzz: {len(schemas)} schemas, {k} requests in {(time.time() - t0) / 60:.1f} min: "
      f"{counts['error']} errors, {counts['valid'] + counts['invalid']} finished, {counts['invalid']} invalid, "
      f"{counts['cut']} cut by max_tokens")
sys.exit(1 if counts["error"] or counts["invalid"] else 0)
