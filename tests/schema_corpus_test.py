"""schema_corpus_test.py - run by schema_corpus.sh: every schema of
llama.cpp's converter test file as response_format against one server.
A schema llama.cpp converts must be accepted (200) and one it refuses
refused (400); each answer that finishes ("stop") must validate with
jsonschema. A schema refused when strict but accepted otherwise has a
pattern the grammar cannot express: its answers validate against the
schema without its patterns. Last line: "schema_corpus: P passed, F failed"."""
import argparse
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import jsonschema

from server_common import Server, check, run_groups

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--cases", required=True, help="llama.cpp's tests/test-json-schema-to-grammar.cpp")
ap.add_argument("--seeds", type=int, default=2)
ap.add_argument("--max-tokens", type=int, default=112)
args = ap.parse_args()
srv = Server(args.base)
srv.timeout = 300

# test({ STATUS, "name", R"""(schema)""", R"""(grammar)""" });
CASE = re.compile(r'test\(\{\s*(SUCCESS|FAILURE),\s*"((?:[^"\\]|\\.)*)",\s*R"""\((.*?)\)"""', re.S)
cases = []
for m in CASE.finditer(open(args.cases, encoding="utf-8").read()):
    cases.append((m.group(1) == "SUCCESS", m.group(2), m.group(3)))


def ask(schema, seed, strict, max_tokens):
    js = {"name": "answer", "schema": schema}
    if strict:
        js["strict"] = True
    return srv.post("/v1/chat/completions", {
        "messages": [{"role": "system", "content": "You answer with JSON only."},
                     {"role": "user", "content": "Give one JSON value valid against this JSON schema: "
                                                 + json.dumps(schema)[:1500]}],
        "max_tokens": max_tokens, "temperature": 0.7, "seed": seed,
        "response_format": {"type": "json_schema", "json_schema": js}})


def without_patterns(s):
    if isinstance(s, dict):
        return {k: without_patterns(v) for k, v in s.items() if k != "pattern"}
    if isinstance(s, list):
        return [without_patterns(v) for v in s]
    return s


def validator(schema):
    """The validator of the schema's draft; a schema the 2020-12 meta-schema
    refuses (prefixItems given as one schema) is read as draft 7, which
    ignores the keyword (the grammar is stricter)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        cls = jsonschema.Draft7Validator
    return cls(schema)


def test_corpus():
    check(len(cases) >= 40, f"{len(cases)} cases read from {args.cases}")
    parsed = []
    for ok, name, text in cases:
        try:
            parsed.append((ok, name, json.loads(text)))
        except ValueError as e:
            check(False, f"'{name}': the schema is not JSON ({e})")
    good = [(n, s) for ok, n, s in parsed if ok]
    bad = [(n, s) for ok, n, s in parsed if not ok]
    refused_ok = 0
    for name, schema in bad:
        st, ans = ask(schema, 1, False, 1)
        refused_ok += check(st == 400, f"'{name}' (llama.cpp refuses it) gives {st}: {str(ans)[:160]}")
    # which accepted schemas leave a pattern unenforced (refused when strict)
    lenient = set()
    for name, schema in good:
        st, ans = ask(schema, 1, True, 1)
        if st == 400 and "pattern" in ans["error"]["message"]:
            lenient.add(name)
        elif st != 200:
            check(False, f"'{name}' refused when strict: {st} {str(ans)[:200]}")
    jobs = [(name, schema, seed) for name, schema in good for seed in range(1, args.seeds + 1)]

    def one(job):
        name, schema, seed = job
        return job, ask(schema, seed, False, args.max_tokens)

    with ThreadPoolExecutor(4) as ex:
        res = list(ex.map(one, jobs))
    errors = finished = invalid = 0
    for (name, schema, seed), (st, ans) in res:
        if not check(st == 200, f"'{name}' seed {seed}: {st} {str(ans)[:200]}"):
            errors += 1
            continue
        ch = ans["choices"][0]
        if ch["finish_reason"] != "stop":
            continue
        finished += 1
        text = ch["message"]["content"]
        target = without_patterns(schema) if name in lenient else schema
        try:
            validator(target).validate(json.loads(text))
            check(True, "")
        except (ValueError, jsonschema.ValidationError) as e:
            invalid += 1
            check(False, f"'{name}' seed {seed}: the answer does not validate "
                         f"({type(e).__name__}: {str(e)[:160]}): {text[:200]!r}")
    print(f"  corpus: {len(good)} schemas accepted, {refused_ok} of {len(bad)} refused as llama.cpp does, "
          f"{len(lenient)} with a pattern left unenforced ({', '.join(sorted(lenient))}); {len(res)} answers: "
          f"{errors} errors, {finished} finished, {invalid} invalid", file=sys.stderr)
    check(finished >= len(res) // 2, f"only {finished} of {len(res)} answers finished within {args.max_tokens} tokens")


sys.exit(run_groups("schema_corpus", [("llama.cpp schema corpus", test_corpus)]))
