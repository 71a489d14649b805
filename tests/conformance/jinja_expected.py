"""Renders chat templates with Jinja2 itself, in the environment Hugging Face
transformers' apply_chat_template builds (an immutable sandbox with
trim_blocks and lstrip_blocks, the loopcontrols extension, and its globals
raise_exception and strftime_now and its tojson filter), so verity's own
renderer (serve/jinja.h) can be compared with the implementation chat
templates are written for, byte for byte. Debian's python3-jinja2.

usage: /usr/bin/python3 jinja_expected.py CASES.json OUT.json
CASES.json: {"templates": {name: source}, "contexts": [{messages, bos_token, eos_token, add_generation_prompt, ...}]}
OUT.json:   {name: {"parse_error": msg} | {"renders": [{"text": s} | {"error": msg}, ...]}}
"""
import json
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def main():
    if len(sys.argv) != 3:
        print("usage: jinja_expected.py CASES.json OUT.json", file=sys.stderr)
        return 2
    cases = json.load(open(sys.argv[1], encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    out, renders = {}, 0
    for name, source in cases["templates"].items():
        try:
            t = env.from_string(source)
        except Exception as e:  # a template Jinja2 itself cannot parse
            out[name] = {"parse_error": f"{type(e).__name__}: {e}"}
            continue
        results = []
        for ctx in cases["contexts"]:
            renders += 1
            try:
                results.append({"text": t.render(**ctx)})
            except Exception as e:
                results.append({"error": f"{type(e).__name__}: {e}"})
        out[name] = {"renders": results}
    json.dump(out, open(sys.argv[2], "w", encoding="utf-8"), ensure_ascii=False)
    print(f"jinja expected: {len(out)} templates, {renders} renders, Jinja2 {jinja2.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
