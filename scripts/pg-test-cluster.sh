#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the ledger tests (Debian's postgresql).
#   pg-test-cluster.sh start STATE_DIR   initdb into a new temp dir, start it on a
#                                        Unix socket only, write STATE_DIR/url
#   pg-test-cluster.sh stop STATE_DIR    stop it and remove its temp dir
#   pg-test-cluster.sh restart STATE_DIR restart it (every connection is dropped)
# The URL names database `postgres` as superuser `verity` (trust, socket only):
# tests create a database per case from it. initdb refuses to run as root, so
# as root the cluster runs as the `postgres` user the Debian package creates.
set -euo pipefail
cmd=${1:?start|stop}
state=${2:?STATE_DIR}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "pg-test-cluster: no PostgreSQL server found (/usr/lib/postgresql/*/bin/initdb); scripts/setup.sh installs Debian's postgresql" >&2; exit 1; }
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

stop() {
  [ -f "$state/dir" ] || { echo "pg-test-cluster: nothing to stop ($state/dir missing)"; return 0; }
  local dir; dir=$(cat "$state/dir")
  as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir" "$state/dir" "$state/url"
  echo "pg-test-cluster: stopped and removed $dir"
}

start() {
  mkdir -p "$state"
  stop >/dev/null
  local dir; dir=$(mktemp -d /tmp/verity-pg.XXXXXX)
  echo "$dir" > "$state/dir"
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "pg-test-cluster: running as root and there is no postgres user to run the server as" >&2; exit 1; }
    chown postgres: "$dir"
  fi
  chmod 755 "$dir"
  # SQL_ASCII and C: a verity ledger keeps bytes as given and orders text by bytes.
  as_owner "$bin/initdb" -D "$dir/data" -U verity --auth=trust -E SQL_ASCII --locale=C >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  as_owner mkdir -m 755 "$dir/sock"
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses= -k $dir/sock -c max_connections=200 -c fsync=off" start >/dev/null ||
    { cat "$dir/server.log" >&2; exit 1; }
  # The socket directory percent-encoded as the host: no `?` or `&`, so the URL
  # passes through a shell command line unquoted.
  echo "postgresql://verity@${dir//\//%2F}%2Fsock/postgres" > "$state/url"
  echo "pg-test-cluster: started $("$bin/postgres" --version) in $dir, url $(cat "$state/url")"
}

restart() {
  local dir; dir=$(cat "$state/dir")
  as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 60 restart >/dev/null
  echo "pg-test-cluster: restarted $dir"
}

case "$cmd" in
  start) start ;;
  restart) restart ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop|restart STATE_DIR" >&2; exit 2 ;;
esac
