#!/usr/bin/python3
"""Checks a `verity loadgen` record on stdin (scripts/bench-serve.sh's
output): every one of REQUESTS requests at CONCURRENCY completed, none
failed or was left unrun, and the record says ok. Prints one summary line
and exits 0 only then; a record that is missing or cannot be read fails.

usage: ... | tests/serve/expect_load.py REQUESTS CONCURRENCY
"""
import json
import sys


def main():
    requests, concurrency = int(sys.argv[1]), int(sys.argv[2])
    text = sys.stdin.read().strip()
    try:
        r = json.loads(text.splitlines()[-1])
    except (IndexError, json.JSONDecodeError) as e:
        print(f"serve load: no loadgen record ({e}) verdict=FAIL")
        return 1
    errors = r.get("errors", {})
    ok = (r.get("completed") == requests and r.get("concurrency") == concurrency and errors.get("failed") == 0
          and errors.get("not_run") == 0 and r.get("ok") is True)
    print(f"serve load: {r.get('completed')}/{requests} requests at {r.get('concurrency')} clients, "
          f"{errors.get('failed')} failed, {errors.get('not_run')} not run, ok={r.get('ok')} "
          f"verdict={'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
