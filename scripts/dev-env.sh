#!/usr/bin/env bash
# Makes a fresh clone runnable: installs npm dependencies when they are missing and makes sure a
# local NATS server with JetStream (and, for tests, PostgreSQL) answers. Idempotent and quiet when
# everything is already up.
#
#   scripts/dev-env.sh start   # for `npm start`: dependencies + NATS
#   scripts/dev-env.sh test    # for `npm test`: dependencies + NATS + PostgreSQL
#   scripts/dev-env.sh deps    # for `npm run test:unit`: dependencies only (no server)
set -euo pipefail
mode=${1:-test}
cd "$(dirname "$0")/.."

NATS_URL=${NATS_URL:-nats://127.0.0.1:4222}
# NATS_URL may list several servers (`nats://a:4222,nats://b:4222`, a cluster): any live one will do.
nats_urls=()
IFS=',' read -r -a nats_urls <<<"$NATS_URL"
host_of() { local hp=${1#*://}; hp=${hp##*@}; hp=${hp%%/*}; printf '%s' "${hp%:*}"; }
port_of() { local hp=${1#*://}; hp=${hp##*@}; hp=${hp%%/*}; case $hp in *:*) printf '%s' "${hp##*:}" ;; *) printf 4222 ;; esac; }
first_url=$(echo "${nats_urls[0]}" | tr -d '[:space:]')
nats_host=$(host_of "$first_url")
nats_port=$(port_of "$first_url")

say() { printf 'toolgate: %s\n' "$*" >&2; }

if [ ! -d node_modules/.bin ] || [ ! -e node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  say "installing npm dependencies (npm ci)"
  npm ci --no-audit --no-fund >&2
fi

[ "$mode" = deps ] && exit 0

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_port() {
  local host=$1 port=$2 what=$3
  for _ in $(seq 1 60); do
    port_open "$host" "$port" && return 0
    sleep 0.5
  done
  say "$what did not come up on $host:$port"
  return 1
}

is_local() { [ "$1" = 127.0.0.1 ] || [ "$1" = localhost ] || [ "$1" = "::1" ]; }

nats_answers() {
  local url
  for url in "${nats_urls[@]}"; do
    url=$(echo "$url" | tr -d '[:space:]')
    [ -n "$url" ] && port_open "$(host_of "$url")" "$(port_of "$url")" && return 0
  done
  return 1
}

if ! nats_answers; then
  if [ "${#nats_urls[@]}" -gt 1 ] || ! is_local "$nats_host"; then
    say "no NATS server in $NATS_URL answers; start one or point NATS_URL at a JetStream server"
    exit 1
  fi
  bin=$(command -v nats-server || true)
  [ -z "$bin" ] && [ -x /usr/sbin/nats-server ] && bin=/usr/sbin/nats-server
  if [ -z "$bin" ]; then
    say "no nats-server here: install it (Debian: apt-get install nats-server) or set NATS_URL"
    exit 1
  fi
  store=${TOOLGATE_NATS_STORE:-/var/lib/nats-server}
  # Not under the repository: a tool's scope (EXECUTOR_CWD) must never hold the journal's files.
  [ -w "$(dirname "$store")" ] || store="${XDG_STATE_HOME:-$HOME/.local/state}/toolgate/nats"
  mkdir -p "$store"
  say "starting nats-server with JetStream on $nats_host:$nats_port (store $store)"
  if command -v start-stop-daemon >/dev/null && [ "$(id -u)" = 0 ]; then
    start-stop-daemon --start --oknodo --background --exec "$bin" -- -a "$nats_host" -p "$nats_port" -js -sd "$store"
  else
    nohup "$bin" -a "$nats_host" -p "$nats_port" -js -sd "$store" >"$store/nats.log" 2>&1 &
  fi
  wait_port "$nats_host" "$nats_port" "nats-server"
fi

# The tool-executor runs shell and subprocess tools under bubblewrap and refuses to start without it.
if [ "${EXECUTOR_SANDBOX:-on}" != off ]; then
  for need in bwrap:bubblewrap prlimit:util-linux; do
    if ! command -v "${need%%:*}" >/dev/null; then
      say "no ${need%%:*} here: the tool-executor's sandbox needs it (Debian: apt-get install ${need##*:})"
      exit 1
    fi
  done
fi

# The container executor's tests run runc on a root file system made from the static busybox.
if [ "$mode" = test ]; then
  if ! command -v runc >/dev/null; then
    say "no runc here: the container executor's tests need it (Debian: apt-get install runc)"
    exit 1
  fi
  if [ ! -x /usr/bin/busybox ] || ldd /usr/bin/busybox >/dev/null 2>&1; then
    say "no static busybox here: the container tests build an image from it (Debian: apt-get install busybox-static)"
    exit 1
  fi
  if ! command -v promtool >/dev/null; then
    say "no promtool here: the alert rules' tests need it (Debian: apt-get install --no-install-recommends prometheus)"
    exit 1
  fi
fi

# The approvals console's browser test drives the system Chromium (nothing downloads a browser);
# the bench and the journal recorder, which come through here too, do not need it.
if [ "$mode" = test ] && [ ! -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then
  say "no chromium here: the approvals console's browser test will fail (Debian: apt-get install chromium)"
fi

if [ "$mode" = test ] || [ -n "${DATABASE_URL:-}" ]; then
  pg_host=127.0.0.1 pg_port=5432
  if [ -n "${DATABASE_URL:-}" ]; then
    rest=${DATABASE_URL#*://}; rest=${rest##*@}; rest=${rest%%/*}
    pg_host=${rest%%:*}; [ "$rest" != "$pg_host" ] && pg_port=${rest##*:}
  fi
  if ! port_open "$pg_host" "$pg_port"; then
    if ! is_local "$pg_host" || ! command -v pg_ctlcluster >/dev/null; then
      say "PostgreSQL at $pg_host:$pg_port does not answer: install it (Debian: apt-get install postgresql) and start it, or set DATABASE_URL"
      exit 1
    fi
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n1)" main start
    wait_port "$pg_host" "$pg_port" "PostgreSQL"
  fi
fi
