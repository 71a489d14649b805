# Sourced by the scripts that run a `verity serve` for a while: start one,
# wait for its listening line, stop it. Its stdout and stderr go to DIR/out
# and DIR/err.
#
#   serve_up DIR VERITY [serve flags ...]   sets serve_pid and serve_url; non-zero (its output on
#                                           stderr) if it exits, or says nothing, before listening
#   serve_down                              SIGTERM, wait; returns the server's exit code

serve_up() {
  local dir=$1 bin=$2
  shift 2
  "$bin" serve --port 0 "$@" >"$dir/out" 2>"$dir/err" &
  serve_pid=$!
  serve_url=""
  for _ in $(seq 1 1200); do
    grep -q '^serve: listening on ' "$dir/out" && break
    kill -0 "$serve_pid" 2>/dev/null || break
    sleep 0.1
  done
  serve_url=$(sed -n 's/^serve: listening on \(http:[^ ]*\).*/\1/p' "$dir/out")
  if [ -z "$serve_url" ]; then
    cat "$dir/out" "$dir/err" >&2
    echo "serve_up: the server exited or never said where it listens" >&2
    kill "$serve_pid" 2>/dev/null
    serve_pid=""
    return 1
  fi
}

serve_down() {
  local rc=0
  [ -n "${serve_pid:-}" ] || return 0
  kill -TERM "$serve_pid"
  wait "$serve_pid" || rc=$?
  serve_pid=""
  return $rc
}
