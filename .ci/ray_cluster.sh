#!/usr/bin/env bash
# A local two-node Ray cluster on loopback for the Ray batch tests and benchmarks: a head node and
# one extra worker node, started with `ray start` exactly as on real machines, CPU counts bounded
# for a 2-core machine.
#
# Usage:
#   .ci/ray_cluster.sh start STATE_FILE  # starts both nodes, waits until `ray status` shows 2 alive
#                                        # nodes, writes the shell-sourceable STATE_FILE:
#                                        #   RUBRIC_STUDIO_RAY_ADDRESS=127.0.0.2:PORT
#                                        #   RUBRIC_STUDIO_RAY_DIR=DIR  (temporary; removed by stop)
#                                        # and prints the address. A cluster already recorded in
#                                        # STATE_FILE is stopped first.
#   .ci/ray_cluster.sh stop STATE_FILE   # stops exactly that cluster's processes, removes DIR;
#                                        # no-op if not running
#   (what `ray start` printed, and the tails of the nodes' and drivers' logs at a failed start
#   and at stop, go to STATE_FILE.log, kept)
#
# Why 127.0.0.2 and 127.0.0.3, not 127.0.0.1: `ray start --node-ip-address=127.0.0.1` is rewritten
# by Ray to the machine's routable address (ray._private.services.resolve_ip_for_localhost), and so
# is an address of 127.0.0.1:PORT given to ray.init or `ray start --address`. Any other loopback
# address is kept as given, so the nodes use 127.0.0.2 (head) and 127.0.0.3 (worker): every
# connection stays on loopback, and the two nodes have distinct addresses as on two machines.
# (Ray's gRPC servers still listen on all interfaces; no ray start option changes that.)
#
# Why not `ray stop --force`: it kills every Ray process on the machine, another cluster's too.
# stop here signals only the processes whose command line names this cluster's temporary
# directory (every Ray daemon's does) and their descendants (workers and agents retitle themselves
# "ray::..."): SIGTERM to the raylets first, as `ray stop` does, then SIGKILL to the rest.
#
# Environment (all optional):
#   RUBRIC_STUDIO_RAY_BIN            the ray CLI (default: `ray` on PATH, i.e. the active venv's)
#   RUBRIC_STUDIO_RAY_HEAD_IP        head node address (default 127.0.0.2)
#   RUBRIC_STUDIO_RAY_WORKER_IP      worker node address (default 127.0.0.3)
#   RUBRIC_STUDIO_RAY_HEAD_CPUS      logical CPUs of the head node (default 1)
#   RUBRIC_STUDIO_RAY_WORKER_CPUS    logical CPUs of the worker node (default 1)
#   RUBRIC_STUDIO_RAY_OBJECT_STORE   object store bytes per node (default 200000000)
#   RUBRIC_STUDIO_RAY_START_TIMEOUT  seconds to wait for both nodes (default 90)
#   RUBRIC_STUDIO_RAY_GRACE          seconds the raylets get to exit on SIGTERM at stop (default 5)
#   RAY_AUTH_MODE                    Ray's own; default `disabled` here. With it unset, Ray 2.60's
#                                    `ray start --head` turns token auth on whenever ~/.ray/auth_token
#                                    exists (any local ray.init() writes one), but `ray start
#                                    --address` does not, so the worker node never joins. Drivers
#                                    connect to the cluster either way.
set -euo pipefail

export RAY_AUTH_MODE="${RAY_AUTH_MODE:-disabled}"

RAY="${RUBRIC_STUDIO_RAY_BIN:-$(command -v ray || true)}"
HEAD_IP="${RUBRIC_STUDIO_RAY_HEAD_IP:-127.0.0.2}"
WORKER_IP="${RUBRIC_STUDIO_RAY_WORKER_IP:-127.0.0.3}"
HEAD_CPUS="${RUBRIC_STUDIO_RAY_HEAD_CPUS:-1}"
WORKER_CPUS="${RUBRIC_STUDIO_RAY_WORKER_CPUS:-1}"
OBJECT_STORE="${RUBRIC_STUDIO_RAY_OBJECT_STORE:-200000000}"
START_TIMEOUT="${RUBRIC_STUDIO_RAY_START_TIMEOUT:-90}"
GRACE="${RUBRIC_STUDIO_RAY_GRACE:-5}"

# No usage reports (there is no network to send them to anyway), no color codes in the log.
export RAY_USAGE_STATS_ENABLED=0
export RAY_USAGE_STATS_PROMPT_ENABLED=0

log() { printf '[ray_cluster] %s\n' "$*" >&2; }
die() { printf '[ray_cluster] error: %s\n' "$*" >&2; exit 1; }

ensure_ray() {
    if [ -z "$RAY" ] || [ ! -x "$RAY" ]; then
        die "no ray CLI found (RUBRIC_STUDIO_RAY_BIN or ray on PATH): activate the project's venv, or pip install -r requirements.txt"
    fi
}

ray_python() {
    # The interpreter of the ray CLI's venv (its shebang), for the port check.
    local shebang
    shebang="$(head -n 1 "$RAY")"
    shebang="${shebang#\#!}"
    if [ -x "$shebang" ]; then echo "$shebang"; else echo python3; fi
}

free_port() {
    # A port free on every interface (Ray's GCS listens on all of them), chosen by the OS.
    "$(ray_python)" -c 'import socket; s = socket.socket(); s.bind(("0.0.0.0", 0)); print(s.getsockname()[1]); s.close()'
}

cluster_pids() {
    # cluster_pids DIR: every process whose command line contains DIR/, and their descendants.
    # DIR travels in the environment, so that neither ps nor awk names it in its own arguments.
    ps -eo pid=,ppid=,args= | RAY_CLUSTER_DIR="$1/" awk -v self="$$" '
        {
            pid = $1; ppid = $2
            parent[pid] = ppid
            $1 = ""; $2 = ""
            if (pid != self && index($0, ENVIRON["RAY_CLUSTER_DIR"]) > 0) keep[pid] = 1
        }
        END {
            do {
                grown = 0
                for (pid in parent) if (!(pid in keep) && (parent[pid] in keep)) { keep[pid] = 1; grown = 1 }
            } while (grown)
            for (pid in keep) print pid
        }'
}

alive_pids() {
    # alive_pids PID...: those still running (zombies are done).
    local pid state
    for pid in "$@"; do
        state="$(ps -o stat= -p "$pid" 2>/dev/null || true)"
        [ -n "$state" ] && [ "${state#Z}" = "$state" ] && echo "$pid"
    done
    return 0
}

wait_gone() {
    # wait_gone SECONDS PID...: waits until none of PIDs runs, or SECONDS passed; prints the
    # ones still running.
    local deadline=$((SECONDS + $1)) alive
    shift
    while :; do
        mapfile -t alive < <(alive_pids "$@")
        if [ "${#alive[@]}" -eq 0 ] || [ "$SECONDS" -ge "$deadline" ]; then
            break
        fi
        sleep 0.2
    done
    [ "${#alive[@]}" -eq 0 ] || echo "${alive[*]}"
}

stop_dir() {
    # stop_dir DIR: stops every process of the cluster rooted in DIR, then removes DIR.
    local dir="$1" raylets pids left
    mapfile -t pids < <(cluster_pids "$dir")
    if [ "${#pids[@]}" -gt 0 ]; then
        # The raylets first, as `ray stop` does: they take their workers down with them.
        mapfile -t raylets < <(pgrep -f -- "raylet/raylet .*$dir/" || true)
        if [ "${#raylets[@]}" -gt 0 ]; then
            kill -TERM "${raylets[@]}" 2>/dev/null || true
            wait_gone "$GRACE" "${raylets[@]}" >/dev/null
        fi
        # The rest (gcs_server and the autoscaler monitor outlive SIGTERM for tens of seconds)
        # and anything the cluster started meanwhile: SIGKILL, as `ray stop --force` would.
        mapfile -t pids < <(cluster_pids "$dir")
        [ "${#pids[@]}" -eq 0 ] || kill -KILL "${pids[@]}" 2>/dev/null || true
        left="$(wait_gone 10 "${pids[@]}")"
        [ -z "$left" ] || log "warning: processes $left of $dir survived SIGKILL"
        log "stopped the cluster in $dir"
    fi
    rm -rf "$dir"
}

node_count() {
    # node_count ADDRESS: alive nodes `ray status` lists under "Active:".
    "$RAY" status --address="$1" 2>/dev/null | awk '
        /^Active:/ { on = 1; next }
        /^[A-Z][a-z]+( [a-z]+)*:/ { on = 0 }
        on && /node_/ { n++ }
        END { print n + 0 }'
}

start_node() {
    # start_node LOG ARGS...: one `ray start`, its output appended to LOG.
    local logfile="$1"
    shift
    printf '\n$ ray start %s\n' "$*" >>"$logfile"
    (cd / && "$RAY" start --disable-usage-stats --log-style=record --log-color=false \
        --num-gpus=0 --object-store-memory="$OBJECT_STORE" "$@") >>"$logfile" 2>&1
}

dump_logs() {
    # dump_logs DIR LOG: the tails of the nodes' daemon logs, and of every driver's core-worker
    # log (a driver whose raylet or GCS connection fails ends with _exit(1) and says why only
    # there), appended to LOG.
    local dir="$1" logfile="$2" f
    for f in "$dir"/*/session_latest/logs/{gcs_server,raylet}.{out,err} \
        "$dir"/*/session_latest/logs/python-core-driver-*.log; do
        [ -s "$f" ] || continue
        printf '\n== %s (last 20 lines)\n' "$f" >>"$logfile"
        tail -n 20 "$f" >>"$logfile" 2>/dev/null || true
    done
}

cmd_start() {
    local state="${1:-}"
    [ -n "$state" ] || die "start needs a state file: $0 start STATE_FILE"
    ensure_ray
    if [ -f "$state" ]; then
        cmd_stop "$state"
    fi
    mkdir -p "$(dirname "$state")"
    local logfile="$state.log" dir port address attempt started=0 deadline n=0
    : >"$logfile"
    # Short: Ray puts Unix sockets under it, and their paths may not exceed 107 bytes.
    dir="$(mktemp -d /tmp/rray.XXXXXX)"
    # shellcheck disable=SC2064
    trap "dump_logs '$dir' '$logfile'; stop_dir '$dir'" EXIT
    for attempt in 1 2 3; do
        port="$(free_port)"
        address="$HEAD_IP:$port"
        log "starting the head node at $address ($HEAD_CPUS CPU, attempt $attempt), log $logfile"
        if start_node "$logfile" --head --node-ip-address="$HEAD_IP" --port="$port" \
            --num-cpus="$HEAD_CPUS" --include-dashboard=false --temp-dir="$dir/head"; then
            started=1
            break
        fi
        tail -n 5 "$logfile" >&2 || true
        stop_dir "$dir"
        mkdir -p "$dir"
        log "the head node did not start (port taken?); retrying on another port"
    done
    [ "$started" = 1 ] || die "the Ray head node failed to start 3 times; see $logfile"
    log "starting a worker node at $WORKER_IP ($WORKER_CPUS CPU)"
    start_node "$logfile" --address="$address" --node-ip-address="$WORKER_IP" \
        --num-cpus="$WORKER_CPUS" --temp-dir="$dir/worker" ||
        { tail -n 5 "$logfile" >&2 || true; die "the Ray worker node did not join $address; see $logfile"; }
    deadline=$((SECONDS + START_TIMEOUT))
    while [ "$SECONDS" -lt "$deadline" ]; do
        n="$(node_count "$address")"
        [ "$n" -ge 2 ] && break
        sleep 1
    done
    [ "$n" -ge 2 ] || die "ray status --address=$address showed $n alive node(s), not 2, after ${START_TIMEOUT}s; see $logfile"
    {
        echo "RUBRIC_STUDIO_RAY_ADDRESS=$address"
        echo "RUBRIC_STUDIO_RAY_DIR=$dir"
    } >"$state"
    trap - EXIT
    log "cluster ready at $address: 2 nodes ($HEAD_IP, $WORKER_IP)"
    echo "$address"
}

cmd_stop() {
    local state="${1:-}"
    [ -n "$state" ] || die "stop needs the state file given to start: $0 stop STATE_FILE"
    [ -f "$state" ] || return 0
    local dir
    dir="$(sed -n 's/^RUBRIC_STUDIO_RAY_DIR=//p' "$state")"
    case "$dir" in
        /tmp/rray.?*) dump_logs "$dir" "$state.log"; stop_dir "$dir" ;;
        *) die "$state names no cluster directory of ours (RUBRIC_STUDIO_RAY_DIR=$dir)" ;;
    esac
    rm -f "$state"
}

case "${1:-}" in
    start) shift; cmd_start "$@" ;;
    stop) shift; cmd_stop "$@" ;;
    *) die "unknown command '${1:-}'; use one of: start STATE_FILE, stop STATE_FILE" ;;
esac
