"""structured_test.py - structured outputs through the openai client, run by
structured.sh against one server (--model tiny: a random synthetic model,
where only the grammar makes an answer valid; --model default: the default
model). Last line: "structured: P passed, F failed"."""
import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import openai

from server_common import Server, check, run_groups
from structured_schemas import FUZZ_SCHEMAS, PERSON

RUNS = 20

ap = argparse.ArgumentParser()
ap.add_argument("--base", required=True)
ap.add_argument("--model", choices=["tiny", "default"], required=True)
args = ap.parse_args()
srv = Server(args.base)
client = openai.OpenAI(base_url=args.base + "/v1", api_key="none", max_retries=0, timeout=120)
TINY = args.model == "tiny"
# the tiny model thinks forever (R1 template): its think block is closed empty
EXTRA = {"chat_template_kwargs": {"enable_thinking": False}} if TINY else {}
MAX = 400 if TINY else 200
ASK = [{"role": "system", "content": "You answer in JSON."},
       {"role": "user", "content": "Describe a person who lives in Paris, in JSON with name, age and city."}]


def chat(**kw):
    extra = dict(EXTRA)
    extra.update(kw.pop("extra_body", {}))
    kw.setdefault("max_tokens", MAX)
    return client.chat.completions.create(model="m", messages=kw.pop("messages", ASK), extra_body=extra, **kw)


def validates(text, schema):
    try:
        jsonschema.validate(json.loads(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError) as e:
        print(f"  invalid ({type(e).__name__}): {text[:200]!r}", file=sys.stderr)
        return False


def test_json_schema():
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON, "strict": True}}

    def one(i):
        r = chat(response_format=rf, temperature=0.6, seed=100 + i)
        return r.choices[0].message.content, r.choices[0].finish_reason

    with ThreadPoolExecutor(4) as ex:
        res = list(ex.map(one, range(RUNS)))
    ok = sum(validates(c, PERSON) for c, _ in res)
    print(f"  json_schema at temperature 0.6: {ok}/{RUNS} validate ({args.model} model)", file=sys.stderr)
    check(ok == RUNS, f"json_schema: {ok} of {RUNS} answers validate")
    check(all(f == "stop" for _, f in res), f"json_schema: finish reasons {[f for _, f in res]}")


def test_json_object():
    for i in range(2 if TINY else 4):
        r = chat(response_format={"type": "json_object"}, temperature=0.6, seed=i, max_tokens=150)
        c = r.choices[0].message.content
        try:
            obj = json.loads(c)
        except ValueError:
            obj = None
        check(isinstance(obj, dict) or r.choices[0].finish_reason == "length",
              f"json_object: not an object: {c[:200]!r}")


def test_grammar_field():
    for i in range(4):
        r = chat(temperature=1.0, seed=i, extra_body={"grammar": 'root ::= ("yes" | "no") "."'})
        check(r.choices[0].message.content in ("yes.", "no."), f"grammar: {r.choices[0].message.content!r}")


def test_stream():
    rf = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}}
    text = "".join(ch.choices[0].delta.content or "" for ch in
                   chat(response_format=rf, temperature=0.6, seed=7, stream=True) if ch.choices)
    check(validates(text, PERSON), f"streamed json_schema: {text[:200]!r}")


def first_id(text):
    st, toks = srv.post("/tokenize", {"content": text})
    return toks["tokens"][0] if st == 200 and toks["tokens"] else None


def test_logit_bias():
    kw = dict(model="m", prompt="The capital of France is", max_tokens=4, temperature=0, extra_body=EXTRA)
    a = client.completions.create(**kw).choices[0].text
    banned = first_id(a)
    check(banned is not None, f"logit_bias: no token in {a!r}")
    b = client.completions.create(logit_bias={str(banned): -100}, **kw).choices[0].text
    check(first_id(b) != banned and not b.startswith(a[:1] if len(a) == 1 else a),
          f"logit_bias -100 on {banned}: {a!r} then {b!r}")
    # a strong positive bias makes that token the greedy pick
    c = client.completions.create(logit_bias={str(banned): 100}, **dict(kw, max_tokens=2)).choices[0].text
    check(first_id(c) == banned, f"logit_bias +100 on {banned}: {c!r}")


def test_refused():
    bad = [
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "^(?=a)a$"},
                                                                     "strict": True}}}, "lookarounds"),
        ({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "pattern": "^(a$"}}}},
         "pattern"),
        ({"response_format": {"type": "yaml"}}, "json_schema"),
        ({"grammar": "root ::= \"a"}, "grammar"),
        ({"logit_bias": {"abc": 1}}, "token ids"),
        ({"logit_bias": {"5": 500}}, "between -100 and 100"),
        ({"logit_bias": {"99999999": 1}}, "vocabulary"),
        ({"functions": [{"name": "f"}]}, "not supported"),
        ({"tool_choice": "required"}, "no 'tools'"),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "not in 'tools'"),
        ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "together"),
        ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0]"),
        ({"grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}, "together"),
    ]
    for body, needle in bad:
        st, ans = srv.post("/v1/chat/completions", dict({"messages": ASK, "max_tokens": 4}, **body))
        msg = ans.get("error", {}).get("message", "") if isinstance(ans, dict) else ""
        check(st == 400 and needle in msg, f"{body}: {st} {msg!r}")


def test_think_then_grammar():
    """R1 template: the grammar starts after </think> (made the first token by a bias on the random model),
    the answer validates (with the grammar from the start, </think> could not come and all would be reasoning)."""
    end = first_id("</think>")
    for i in range(3):
        r = client.chat.completions.create(
            model="m", messages=ASK, max_tokens=MAX, temperature=0.6, seed=50 + i, logit_bias={str(end): 100},
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}})
        m = r.choices[0].message
        check(validates(m.content or "", PERSON), f"think, then the grammar: {m}")


WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                          "unit": {"enum": ["C", "F"]}}, "required": ["city"]}
TIME = {"type": "object", "properties": {"tz": {"type": "string", "maxLength": 20}}, "required": ["tz"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a time zone",
                                           "parameters": TIME}}]
SCHEMA_OF = {"get_weather": WEATHER, "get_time": TIME}
ASK_TOOL = [{"role": "user", "content": "What is the weather in Paris?"}]
# a random model under tool_choice required writes call after call until max_tokens (a trained one stops):
# one call each, but in test_tools_parallel
ONE_CALL = {"parallel_tool_calls": False} if TINY else {}


def test_tools_required():
    ok = 0
    for i in range(5):
        r = chat(messages=ASK_TOOL, tools=TOOLS, tool_choice="required", temperature=0.6, seed=i, **ONE_CALL)
        ch = r.choices[0]
        calls = ch.message.tool_calls or []
        good = ch.finish_reason == "tool_calls" and len(calls) >= 1
        for c in calls:
            good = good and c.function.name in SCHEMA_OF and validates(c.function.arguments, SCHEMA_OF[c.function.name])
            good = good and c.id.startswith("call_") and c.type == "function"
        good = good and len({c.id for c in calls}) == len(calls)
        ok += bool(good)
        if not good:
            print(f"  tool_choice required: {ch}", file=sys.stderr)
    print(f"  tool_choice required: {ok}/5 parsed calls with valid arguments ({args.model} model)", file=sys.stderr)
    check(ok == 5, f"tool_choice required: {ok} of 5 answers are calls whose arguments validate")


def assemble(chunks):
    """A streamed answer's tool calls as a client puts them together: per index the first delta's id, type and
    name, the arguments' pieces in order; and the finish reason."""
    calls, finish = {}, None
    for ch in chunks:
        if not ch.choices:
            continue
        finish = ch.choices[0].finish_reason or finish
        for d in ch.choices[0].delta.tool_calls or []:
            c = calls.setdefault(d.index, {"id": None, "type": None, "name": None, "args": "", "pieces": 0, "first": True})
            if c["first"]:
                c.update(id=d.id, type=d.type, name=d.function.name, first=False)
            elif d.id or d.function.name:
                c["again"] = True  # the head is sent once
            if d.function.arguments:
                c["args"] += d.function.arguments
                c["pieces"] += 1
    return [calls[k] for k in sorted(calls)], finish


def test_tools_named_stream():
    r = chat(messages=ASK_TOOL, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}},
             temperature=0.6, seed=3, **ONE_CALL)
    calls = r.choices[0].message.tool_calls or []
    check(len(calls) == 1 and calls[0].function.name == "get_time" and validates(calls[0].function.arguments, TIME),
          f"named tool_choice: {r.choices[0].message}")
    kw = dict(messages=ASK_TOOL, tools=TOOLS, tool_choice="required", temperature=0, seed=4, **ONE_CALL)
    w = chat(**kw).choices[0]
    whole, whole_finish = w.message.tool_calls or [], w.finish_reason
    streamed, finish = assemble(chat(stream=True, **kw))
    good = len(streamed) == len(whole) >= 1 and finish == whole_finish and len({c["id"] for c in streamed}) == len(streamed)
    for s_, w in zip(streamed, whole):
        good = good and (s_["id"] or "").startswith("call_") and s_["type"] == "function" and s_["name"] == w.function.name
        good = good and not s_.get("again") and s_["pieces"] >= 2 and validates(s_["args"], SCHEMA_OF[s_["name"]])
        good = good and json.loads(s_["args"]) == json.loads(w.function.arguments)
    print(f"  streamed calls: {[(c['name'], c['pieces']) for c in streamed]} (name, argument pieces)", file=sys.stderr)
    check(good, f"streamed tool calls (id and name first, then arguments in pieces, as unstreamed): {streamed} "
                f"{finish} vs {whole}")


def test_tools_parallel():
    """parallel_tool_calls false: one call at most, streamed or not; left on, every call of an answer is taken
    (the tiny model writes several under tool_choice required with some seeds)."""
    one = []
    for seed in range(3):
        r = chat(messages=ASK_TOOL, tools=TOOLS, tool_choice="required", temperature=1.0, seed=seed,
                 parallel_tool_calls=False)
        one.append(len(r.choices[0].message.tool_calls or []))
        streamed, _ = assemble(chat(messages=ASK_TOOL, tools=TOOLS, tool_choice="required", temperature=1.0,
                                    seed=seed, parallel_tool_calls=False, stream=True))
        one.append(len(streamed))
    check(one == [1] * len(one), f"parallel_tool_calls false: calls per answer {one}")
    if not TINY:
        return
    many = []
    for seed in range(4):
        r = chat(messages=ASK_TOOL, tools=TOOLS, tool_choice="required", temperature=1.0, seed=seed, max_tokens=160)
        calls = r.choices[0].message.tool_calls or []
        many.append(len(calls))
        check(all(c.function.name in SCHEMA_OF and validates(c.function.arguments, SCHEMA_OF[c.function.name])
                  for c in calls), f"parallel calls of seed {seed} validate: {calls}")
    print(f"  parallel_tool_calls on: calls per answer {many}", file=sys.stderr)
    check(max(many) >= 2, f"parallel_tool_calls on: no answer of 4 has several calls ({many})")


def test_tools_auto_stream():
    """tool_choice auto, streamed: a text answer streams as it comes (many deltas), the same text as unstreamed."""
    kw = dict(messages=ASK_TOOL, tools=TOOLS, temperature=1.0, seed=11, max_tokens=40)
    whole = chat(**kw).choices[0].message.content or ""
    parts = [ch.choices[0].delta.content for ch in chat(stream=True, **kw) if ch.choices and ch.choices[0].delta.content]
    check(len(parts) > 5 and "".join(parts) == whole, f"auto tools streamed: {len(parts)} deltas, "
          f"{''.join(parts)[:80]!r} vs {whole[:80]!r}")


def test_tool_turns():
    """A conversation with the assistant's call and the tool's result is accepted and answered."""
    msgs = ASK_TOOL + [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                              "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"}]
    r = chat(messages=msgs, tools=TOOLS, temperature=0, max_tokens=8)
    check(r.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"tool turns: {r.choices[0]}")
    st, _ = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 2, "tool_choice": "none",
                                              "tools": TOOLS})
    check(st == 200, f"tool turns with tool_choice none: {st}")


def test_fuzz():
    """Random weights at temperature 1 under every schema of the corpus: never a server error, and every
    answer that finished (not cut by max_tokens) validates."""
    def one(job):
        k, seed = job
        rf = {"type": "json_schema", "json_schema": {"name": f"s{k}", "schema": FUZZ_SCHEMAS[k], "strict": True}}
        st, ans = srv.post("/v1/chat/completions", dict({"messages": ASK, "max_tokens": 256, "temperature": 1.0,
                                                         "seed": seed, "response_format": rf}, **EXTRA))
        return k, seed, st, ans

    jobs = [(k, seed) for k in range(len(FUZZ_SCHEMAS)) for seed in range(3)]
    with ThreadPoolExecutor(4) as ex:
        res = list(ex.map(one, jobs))
    errors = [(k, seed, st, str(ans)[:160]) for k, seed, st, ans in res if st != 200]
    check(not errors, f"fuzz: {len(errors)} of {len(res)} requests failed: {errors[:3]}")
    done = [(k, ans["choices"][0]["message"]["content"]) for k, _, st, ans in res
            if st == 200 and ans["choices"][0]["finish_reason"] == "stop"]
    bad = [k for k, text in done if not validates(text, FUZZ_SCHEMAS[k])]
    print(f"  fuzz: {len(res)} requests, {len(errors)} errors, {len(done)} finished, {len(bad)} invalid",
          file=sys.stderr)
    check(not bad, f"fuzz: finished answers of schemas {bad} do not validate")
    check(len(done) >= len(res) // 3, f"fuzz: only {len(done)} of {len(res)} answers finished")


def test_tool_no_arguments():
    """A strict tool without arguments (the openai SDK's empty parameters) under tool_choice required."""
    tools = [{"type": "function", "function": {"name": "ping", "parameters": {
        "type": "object", "properties": {}, "additionalProperties": False}, "strict": True}}]
    r = chat(tools=tools, tool_choice="required", temperature=0, max_tokens=64)
    calls = r.choices[0].message.tool_calls or []
    check(len(calls) >= 1 and calls[0].function.name == "ping" and json.loads(calls[0].function.arguments) == {},
          f"no-argument tool: {r.choices[0]}")


sys.exit(run_groups("structured", [("json_schema", test_json_schema), ("json_object", test_json_object),
                                   ("grammar", test_grammar_field), ("stream", test_stream),
                                   ("logit_bias", test_logit_bias), ("refused", test_refused),
                                   ("tools required", test_tools_required),
                                   ("tools named, streamed", test_tools_named_stream),
                                   ("parallel tool calls", test_tools_parallel),
                                   ("tool turns", test_tool_turns),
                                   ("tool without arguments", test_tool_no_arguments)]
                    + ([("think, then the grammar", test_think_then_grammar), ("fuzz", test_fuzz),
                        ("tools auto, streamed", test_tools_auto_stream)] if TINY else [])))
