"""The remote half of `foya tunnel`: the POSIX sh script, run through `ssh <dest> sh -c`, that
starts a kernel on the remote's loopback unless something already listens on its port."""

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


def start_script(config: TunnelConfig) -> str:
    """The remote sh script: start the kernel detached unless 127.0.0.1:<port> is taken."""
    foya, digest = sh_path(config.remote_foya), sh_path(config.remote_token_hash_file)
    data = ["--data-dir", sh_path(config.remote_data_dir)] if config.remote_data_dir else []
    log_path = config.remote_log_file or (
        f"{config.remote_data_dir.rstrip('/')}/kernel.log"
        if config.remote_data_dir
        else "~/.local/share/foya/run/kernel.log"
    )
    log = sh_path(log_path)
    listen = f"127.0.0.1:{config.remote_port}"
    serve = " ".join([foya, "serve", "--listen", listen, *data, "--auth-token-hash-file", digest])
    return f"""listening() {{
  for f in /proc/net/tcp /proc/net/tcp6; do
    [ -r "$f" ] && awk -v p={config.remote_port:04X} {shlex.quote(_LISTEN_AWK)} "$f" && return 0
  done
  return 1
}}
listening && {{ echo "kernel already running on {listen}"; exit 0; }}
command -v {foya} >/dev/null 2>&1 || {{ echo "cannot run "{foya}" on the remote" >&2; exit 3; }}
[ -r {digest} ] || {{ echo "cannot read the token digest "{digest}" on the remote" >&2; exit 3; }}
mkdir -p "$(dirname {log})" || exit 3
s=; command -v setsid >/dev/null 2>&1 && s=setsid
nohup $s {serve} --allow-plaintext </dev/null >>{log} 2>&1 &
pid=$!
i=0
while [ $i -lt 100 ]; do
  listening && {{ echo "started the kernel on {listen} (pid $pid, log "{log}")"; exit 0; }}
  if ! kill -0 $pid 2>/dev/null; then
    listening && exit 0
    echo "foya serve exited at once: $(tail -n 1 {log})" >&2; exit 4
  fi
  sleep 0.1; i=$((i + 1))
done
echo "started the kernel on {listen} (pid $pid); still starting"
"""
