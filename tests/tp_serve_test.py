"""tp_serve_test.py - run by tp_serve.sh: the same greedy requests (chat and
completions, streamed and not, 4 clients at once) against a one-process
server and servers of several ranks; every answer must be the one-process
server's. Last line: "tp_serve: P passed, F failed"."""
import argparse
import sys
from concurrent.futures import ThreadPoolExecutor

from server_common import Server, check, run_groups

ap = argparse.ArgumentParser()
ap.add_argument("--one", required=True, help="the one-process server")
ap.add_argument("--ranks", action="append", required=True, help="a server under mpirun (repeatable): LABEL=URL")
ap.add_argument("--max-tokens", type=int, default=20)
args = ap.parse_args()

PROMPTS = ["The capital of France is", "List three prime numbers.", "What does a compiler do?"]


def requests():
    out = []
    for i, p in enumerate(PROMPTS):
        chat = {"messages": [{"role": "user", "content": p}], "max_tokens": args.max_tokens, "temperature": 0}
        comp = {"prompt": p, "max_tokens": args.max_tokens, "temperature": 0}
        out += [("chat", i, False, chat), ("chat", i, True, chat), ("completion", i, False, comp),
                ("completion", i, True, comp)]
    return out


def answer(srv, req):
    kind, _, stream, body = req
    path = "/v1/chat/completions" if kind == "chat" else "/v1/completions"
    st, ans = srv.post(path, dict(body, stream=stream), stream=stream)
    if st != 200:
        return f"HTTP {st}: {str(ans)[:200]}"
    if not stream:
        c = ans["choices"][0]
        text = (c["message"].get("reasoning_content") or "") + "|" + (c["message"]["content"] or "") \
            if kind == "chat" else c["text"]
        return text + " #" + c["finish_reason"]
    parts, finish = [], None
    for ev in ans:
        if not ev.get("choices"):
            continue
        c = ev["choices"][0]
        d = c.get("delta", {})
        parts.append(((d.get("reasoning_content") or "") + "\0" + (d.get("content") or "")) if kind == "chat"
                     else c.get("text", ""))
        finish = c.get("finish_reason") or finish
    if kind == "chat":
        text = "".join(p.split("\0")[0] for p in parts) + "|" + "".join(p.split("\0")[1] for p in parts)
    else:
        text = "".join(parts)
    return text + " #" + str(finish)


def answers(base):
    srv = Server(base)
    srv.timeout = 300
    with ThreadPoolExecutor(4) as ex:
        return list(ex.map(lambda r: answer(srv, r), requests()))


def test_same():
    ref = answers(args.one)
    check(all(not a.startswith("HTTP") for a in ref), f"one process: {[a for a in ref if a.startswith('HTTP')][:2]}")
    for spec in args.ranks:
        label, base = spec.split("=", 1)
        got = answers(base)
        diff = [(r[0], r[1], r[2], a, b) for r, a, b in zip(requests(), ref, got) if a != b]
        print(f"  {label}: {len(got) - len(diff)} of {len(got)} answers equal the one-process server's",
              file=sys.stderr)
        for d in diff[:3]:
            print(f"    {d[0]} prompt {d[1]} stream {d[2]}:\n      one: {d[3][:120]!r}\n      {label}: {d[4][:120]!r}",
                  file=sys.stderr)
        check(not diff, f"{label}: {len(diff)} answers differ from one process's")


def test_sdk():
    """The openai SDK against each server of several ranks: the one-process server's greedy answer."""
    import openai
    msgs = [{"role": "user", "content": PROMPTS[0]}]
    one = openai.OpenAI(base_url=args.one + "/v1", api_key="none", max_retries=0, timeout=300)
    want = one.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0).choices[0].message
    for spec in args.ranks:
        label, base = spec.split("=", 1)
        c = openai.OpenAI(base_url=base + "/v1", api_key="none", max_retries=0, timeout=300)
        got = c.chat.completions.create(model="m", messages=msgs, max_tokens=16, temperature=0).choices[0].message
        check(got.content == want.content, f"{label}, openai SDK: {got.content!r} vs {want.content!r}")
        check(c.models.list().data[0].id == one.models.list().data[0].id, f"{label}, openai SDK: models.list")


sys.exit(run_groups("tp_serve", [("greedy answers", test_same), ("openai SDK", test_sdk)]))
