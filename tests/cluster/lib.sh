# shellcheck shell=bash
# Shared helpers for the test-rig scripts (build-bins, up, down).
# Sourced, not executed. The caller sets KF_PROG (used as the message prefix)
# and runs with `set -euo pipefail`.

KF_RIG_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

kf_log() { printf '%s: %s\n' "$KF_PROG" "$*" >&2; }
kf_die() { printf '%s: error: %s\n' "$KF_PROG" "$*" >&2; exit 1; }

kf_require_tools() {
  local tool
  for tool in "$@"; do
    command -v "$tool" >/dev/null 2>&1 || kf_die "'$tool' is required but not on PATH"
  done
}

# Loads KUBERNETES_VERSION / ETCD_VERSION. Values from the environment are
# ignored on purpose: the rig runs exactly what versions.env pins.
kf_load_versions() {
  # shellcheck source=versions.env
  source "$KF_RIG_DIR/versions.env"
  [[ -n ${KUBERNETES_VERSION:-} && -n ${ETCD_VERSION:-} ]] ||
    kf_die "$KF_RIG_DIR/versions.env must set KUBERNETES_VERSION and ETCD_VERSION"
}

kf_one_line() { printf '%s\n' "${1//$'\n'/ }"; } # "1\n2" -> "1 2", for messages

kf_cache_root() { printf '%s\n' "${KUBE_FANOUT_CACHE:-$HOME/.cache/kube-fanout}"; }

# Milliseconds since the epoch, for "took N.Ns" messages.
kf_now_ms() { date +%s%3N; }
kf_elapsed() { # start_ms -> "12.3s"
  local ms=$(( $(kf_now_ms) - $1 ))
  printf '%d.%ds' $(( ms / 1000 )) $(( ms % 1000 / 100 ))
}

# --- processes ---------------------------------------------------------------
#
# A cluster's processes are recognised by one exact argument that embeds the
# cluster directory (see kf_marker). That survives lost pid files and guards
# against acting on a recycled pid. Zombies have an empty cmdline, so an
# exited-but-unreaped process (no reaping init in some containers) counts as
# gone, which is what we want: it holds no ports or files.

kf_marker() { # dir component -> the argv entry that identifies it
  case $2 in
    etcd) printf -- '--data-dir=%s/etcd\n' "$1" ;;
    kube-apiserver) printf -- '--token-auth-file=%s/auth/tokens.csv\n' "$1" ;;
    *) kf_die "internal: unknown component '$2'" ;;
  esac
}

# Pids of live processes of one component of the cluster in dir.
kf_component_pids() { # dir component
  local marker file
  marker=$(kf_marker "$1" "$2")
  # -z: NUL-separated argv entries are "lines"; -x: whole-argument match.
  # Processes may vanish mid-scan, hence 2>/dev/null and `|| true`.
  for file in $(grep -lzxF -e "$marker" /proc/[0-9]*/cmdline 2>/dev/null || true); do
    file=${file#/proc/}
    printf '%s\n' "${file%/cmdline}"
  done
}

kf_cluster_pids() { # dir -> all live pids of the cluster
  kf_component_pids "$1" kube-apiserver
  kf_component_pids "$1" etcd
}

kf_pgid() { # pid -> process group id, empty if gone
  local stat
  { stat=$(<"/proc/$1/stat"); } 2>/dev/null || return 0
  # Fields after "(comm)", which may contain spaces: state ppid pgrp ...
  local pgrp
  read -r _ _ pgrp _ <<<"${stat##*) }"
  printf '%s\n' "$pgrp"
}

# Sends a signal to each pid's process group when the pid leads one (they
# were started with setsid), else to the pid alone.
kf_signal() { # signal pid...
  local sig=$1 pid; shift
  for pid in "$@"; do
    if [[ $(kf_pgid "$pid") == "$pid" ]]; then
      kill "-$sig" -- "-$pid" 2>/dev/null || true
    else
      kill "-$sig" "$pid" 2>/dev/null || true
    fi
  done
}

# Waits until no process of the component is left; 0 if none left.
kf_wait_gone() { # dir component timeout_seconds
  local deadline=$(( $(kf_now_ms) + $3 * 1000 ))
  while [[ -n $(kf_component_pids "$1" "$2") ]]; do
    (( $(kf_now_ms) < deadline )) || return 1
    sleep 0.1
  done
}

# Stops one component: SIGTERM, bounded wait, SIGKILL, bounded wait.
# Also covers a pid from the pid file whose leader is gone but whose group
# still has members. Returns non-zero if something survived.
kf_stop_component() { # dir component term_timeout_seconds
  local dir=$1 name=$2 timeout=$3 pidfile pids
  pidfile=$dir/run/$name.pid
  pids=$(kf_component_pids "$dir" "$name")
  if [[ -z $pids ]]; then
    rm -f "$pidfile"
    return 0
  fi
  kf_log "stopping $name (pid $(kf_one_line "$pids"))"
  # shellcheck disable=SC2086
  kf_signal TERM $pids
  if ! kf_wait_gone "$dir" "$name" "$timeout"; then
    pids=$(kf_component_pids "$dir" "$name")
    kf_log "$name did not exit within ${timeout}s of SIGTERM; sending SIGKILL to pid $(kf_one_line "$pids")"
    # shellcheck disable=SC2086
    kf_signal KILL $pids
    if ! kf_wait_gone "$dir" "$name" 5; then
      pids=$(kf_component_pids "$dir" "$name")
      printf '%s: error: could not stop %s: pid %s still running after SIGKILL\n' \
        "$KF_PROG" "$name" "$(kf_one_line "$pids")" >&2
      return 1
    fi
  fi
  rm -f "$pidfile"
}

# Stops the whole cluster, apiserver first so it does not spend its last
# seconds logging about a vanished etcd.
kf_stop_cluster() { # dir term_timeout_seconds
  local rc=0
  kf_stop_component "$1" kube-apiserver "$2" || rc=1
  kf_stop_component "$1" etcd "$2" || rc=1
  return "$rc"
}

# --- ports ---------------------------------------------------------------------

# True if some TCP socket (v4 or v6, any address) uses the local port.
# With "listen", only listening sockets count: those are what make bind()
# fail for servers that set SO_REUSEADDR (etcd and the apiserver do).
# Reads /proc/net directly so the rig needs neither ss nor netstat.
kf_port_used() { # port [listen]
  local hex state_filter=
  hex=$(printf '%04X' "$1")
  [[ ${2:-} == listen ]] && state_filter=0A
  awk -v port=":$hex" -v st="$state_filter" '
    FNR > 1 && substr($2, length($2) - 4) == port && (st == "" || $4 == st) { found = 1 }
    END { exit !found }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
