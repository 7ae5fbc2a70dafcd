"""`foya tunnel`: reach a kernel on another machine through `ssh -L`.

`cli` is the command's Typer definition; `config` holds `TunnelConfig`, the one thing both sides
share; `local` is the supervisor that runs ssh here (see its docstring for the exit codes and
known limits), with `ssh` the argv it runs and how it starts, ends and reads each ssh; `remote`
builds the POSIX sh script that ssh runs on the other machine to start the kernel there.
"""
