"""The remote half of `foya tunnel`: the POSIX sh scripts, run through `ssh <dest> sh -c`, that
start a kernel on the remote's loopback unless something already listens on its port, and
(`--stop`) stop the kernel a tunnel started. Both find the data dir the same way: see
`data_dir`."""

from __future__ import annotations

import shlex

from app.ops.tunnel.config import TunnelConfig

# A LISTEN (0A) socket that accepts 127.0.0.1:<p>: loopback or wildcard, IPv4 or IPv6 (v4-mapped).
_LISTEN_AWK = (
    'NR > 1 && $4 == "0A" { n = split($2, a, ":"); if (a[n] == p && (a[1] == "0100007F"'
    ' || a[1] == "7F000001" || a[1] ~ /^0+$/ || a[1] == "0000000000000000FFFF00000100007F"))'
    " f = 1 } END { exit !f }"
)


def sh_path(path: str) -> str:
    """`path` quoted for the remote sh, with a leading `~/` expanded there."""
    if path == "~" or path.startswith("~/"):
        return '"$HOME"' + (f"/{shlex.quote(path[2:])}" if path[2:] else "")
    return shlex.quote(path)


def data_dir(config: TunnelConfig) -> str:
    """The data dir as a sh word: --remote-data-dir, else what `foya serve` there would use by
    default (FOYA_DATA_DIR, else platformdirs' `$XDG_CONFIG_HOME/foya`, `~/.config/foya`)."""
    if config.remote_data_dir:
        return sh_path(config.remote_data_dir)
    return '"${FOYA_DATA_DIR:-${XDG_CONFIG_HOME:-$HOME/.config}/foya}"'


def start_script(config: TunnelConfig) -> str:
    """The remote sh script: start the kernel detached unless 127.0.0.1:<port> is taken. It
    serves `--data-dir` explicitly and logs to `<data-dir>/kernel.log` (or --remote-log-file)."""
    foya, digest = sh_path(config.remote_foya), sh_path(config.remote_token_hash_file)
    log = sh_path(config.remote_log_file) if config.remote_log_file else '"$d/kernel.log"'
    listen = f"127.0.0.1:{config.remote_port}"
    serve = f'{foya} serve --listen {listen} --data-dir "$d" --auth-token-hash-file {digest}'
    return f"""d={data_dir(config)}
log={log}
listening() {{
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] && awk -v p={config.remote_port:04X} {shlex.quote(_LISTEN_AWK)} "$f" && return 0
  done
  return 1
}}
listening && {{ echo "kernel already running on {listen}"; exit 0; }}
command -v {foya} >/dev/null 2>&1 || {{ echo "cannot run "{foya}" on the remote" >&2; exit 3; }}
[ -r {digest} ] || {{ echo "cannot read the token digest "{digest}" on the remote" >&2; exit 3; }}
(umask 077 && mkdir -p "$d" "$(dirname "$log")" && : >>"$log") || exit 3
s=; command -v setsid >/dev/null 2>&1 && s=setsid
nohup $s {serve} --allow-plaintext </dev/null >>"$log" 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ]; do
  listening && {{ echo "started the kernel on {listen} (pid $pid, log $log)"; exit 0; }}
  if ! kill -0 $pid 2>/dev/null; then
    listening && exit 0
    echo "foya serve exited at once: $(tail -n 1 "$log")" >&2; exit 4
  fi
  sleep 0.1; i=$((i + 1))
done
echo "started the kernel on {listen} (pid $pid, log $log); still starting"
"""


def stop_script(config: TunnelConfig) -> str:
    """The remote sh script of `foya tunnel --stop`: SIGTERM the kernel whose PID
    `<data-dir>/kernel.lock` names, if it is one serving 127.0.0.1:<port> as `start_script`
    starts it, and wait until it has exited (a clean stop removes the lock file).
    Exit 0 stopped or nothing to stop, 3 not a kernel a tunnel started, 4 still running."""
    listen = f"127.0.0.1:{config.remote_port}"
    return f"""d={data_dir(config)}
pid=$(cat "$d/kernel.lock" 2>/dev/null)
alive() {{ [ -r /proc/$pid/stat ] && [ "$(sed 's/.*) //' /proc/$pid/stat | cut -c1)" != Z ]; }}
case "$pid" in ''|*[!0-9]*) echo "no kernel is running on $d"; exit 0;; esac
alive || {{ echo "no kernel is running on $d (pid $pid has exited)"; exit 0; }}
case "$(tr '\\0' ' ' </proc/$pid/cmdline)" in
  *" serve --listen {listen} "*) ;;
  *) echo "pid $pid (from $d/kernel.lock) is not a kernel foya tunnel started on {listen}; \
left it running" >&2; exit 3;;
esac
kill -TERM $pid
i=0
while alive; do
  [ $i -ge 150 ] && {{ echo "pid $pid did not stop within 15 s" >&2; exit 4; }}
  sleep 0.1; i=$((i + 1))
done
echo "stopped the kernel on {listen} (pid $pid)"
"""
