"""`computefence probe --print`: the probe script, to run by hand on a pod."""

from __future__ import annotations

import typer

from computefence.cli.app import app
from computefence.cli.output import write_stdout
from computefence.connectors.payload import probe_params
from computefence.errors import ConfigError
from computefence.models import CheckOptions
from computefence.probe.assemble import probe_payload


@app.command("probe")
def probe_command(
    print_script: bool = typer.Option(
        False, "--print", help="Write the probe script (default parameters embedded) to stdout."
    ),
) -> None:
    """The zero-dependency probe, to run by hand on a pod:
    `computefence probe --print | ssh POD python3 -`.

    --print writes the plain script. `fleet check` sends the same script zlib-compressed (a
    third of the bytes) to a small bootstrap that decompresses it on the pod.
    """
    if not print_script:
        raise ConfigError("nothing to do: `computefence probe --print > probe.py` writes the probe script")
    write_stdout(probe_payload(probe_params(CheckOptions())))
