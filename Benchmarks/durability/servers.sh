# Sourced by durability/run and durability/ab (from Benchmarks/): starts, times and stops one
# server at a time. The caller sets OUT (where logs go) and SERVER_CPU (the command prefix that
# pins the server, or an empty array).

PID=""; PORT=""; LOG=""
# launch LABEL COMMAND...: starts a server (on core 0 when pinned), logging to out/durability/
# LABEL.log, and waits until it answers /healthz.
launch() {
  LOG=$OUT/$1.log; shift
  "${SERVER_CPU[@]}" "$@" >"$LOG" 2>&1 &
  PID=$!
  PORT=""
  for _ in $(seq 300); do
    PORT=$(sed -nE 's/.*listening on http:\/\/[^:]+:([0-9]+).*/\1/p' "$LOG" | head -1)
    if [ -n "$PORT" ] && curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz"; then return; fi
    sleep 0.1
  done
  echo "server $LOG did not start" >&2; cat "$LOG" >&2; exit 1
}
# stop: SIGTERM, then SIGKILL after 5 s.
stop() {
  [ -n "$PID" ] || return 0
  kill "$PID" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=""
}
# What the server has used so far, in clock ticks of CPU (utime + stime): all of it, and by thread.
TICK=$(getconf CLK_TCK)
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$PID/stat"; }
# reactor-server's CPU ticks by thread role (its threads are named rs-http, rs-reactor, rs-commit,
# rs-checkpoint, …): "http N reactor N commit N checkpoint N" (0 for a role it does not run).
thread_ticks() {
  local task
  for task in /proc/"$PID"/task/*; do
    printf '%s %s\n' "$(cat "$task/comm" 2>/dev/null)" "$(awk '{ print $14 + $15 }' "$task/stat" 2>/dev/null)"
  done | awk '{ t[$1] += $2 } END { printf "http %d reactor %d commit %d checkpoint %d\n", t["rs-http"], t["rs-reactor"], t["rs-commit"], t["rs-checkpoint"] }'
}
# role_ticks ROLE TICKS: the ticks of ROLE in a line thread_ticks printed.
role_ticks() { awk -v r="$1" '{ for (i = 1; i < NF; i += 2) if ($i == r) print $(i + 1) }' <<<"$2"; }
