"""Files ComputeFence writes for other programs (the launch gate, `inventory export`): no pod,
provider or inventory value becomes an option, a host or a line of its own in them.

The attacker names a pod (a provider's pod name, an inventory name) or fills a provider
string (a GPU type) so that xargs, a shell, ssh or a YAML/ssh_config reader would read more
than a name: an option (`-oProxyCommand=`), another host (`user@host`, `ssh://`), or a line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fleet"))

from fleet_helpers import SPOTLESS, cli_subprocess_env, write_inventory
from sshfleet import PodSpec

from computefence.errors import ConfigError
from computefence.evaluate.fleet import build_report
from computefence.models import HostReport, HostStatus, ProviderInfo, Target
from computefence.operations.gate import healthy_file
from computefence.sources.export import export_ssh_config, export_yaml
from computefence.sources.inventory import load_inventory

REPO = Path(__file__).resolve().parents[2]
PWN = "touch${IFS}/tmp/computefence-PWN"

# Provider pod names (RunPod keeps quotes and dashes; only blanks become '-').
HOSTILE_NAMES = [
    f"'-oProxyCommand={PWN}'",  # xargs strips the quotes: ssh gets an option
    '"-oHostName=198.51.100.66"',
    'half"quote',  # xargs aborts on an unmatched quote: no pod starts at all
    "root@198.51.100.66",  # ssh reads user@host: a machine that was never checked
    "ssh://root@198.51.100.66:2222",
    "two\nlines",
    "esc\x1b[2Jape",
    "sep\u2028arator",
    "-leading-dash",
]


def _ready_report(targets: list[Target]):
    hosts = [HostReport(name=t.name, status=HostStatus.OK, host=t.host, port=t.port) for t in targets]
    return build_report(hosts, kind="fleet")


def _provider_target(name: str, host: str = "203.0.113.7", **extra) -> Target:
    return Target(
        name=name,
        host=host,
        port=40022,
        user=extra.pop("user", "root"),
        source="runpod",
        provider=ProviderInfo(provider="runpod", pod_id="p1", **extra),
    )


def _gate(targets: list[Target], fmt: str) -> tuple[str, list[str]]:
    warnings: list[str] = []
    return healthy_file(_ready_report(targets), targets, fmt, warn=warnings.append), warnings


@pytest.fixture
def argv_logger(tmp_path: Path) -> tuple[Path, Path]:
    """A program that writes each argument it gets, NUL-ended, to a log: what xargs handed on."""
    log = tmp_path / "argv.log"
    program = tmp_path / "log-args"
    program.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\0" "$a" >> {log}; done\nprintf "\\n\\0" >> {log}\n')
    program.chmod(0o755)
    return program, log


def _calls(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    calls, current = [], []
    for item in log.read_text().split("\0")[:-1]:
        if item == "\n":
            calls.append(current)
            current = []
        else:
            current.append(item)
    return calls


# ---------------------------------------------------------------- names, names0, ssh lines


# The hostile names a format carries as themselves: JSON escapes any string, and xargs -0
# reads no quoting (a quote is a quote); a name that is an option or user@host stays out.
CARRIED = {"json": HOSTILE_NAMES, "names0": ['"-oHostName=198.51.100.66"', 'half"quote']}


@pytest.mark.parametrize("fmt", ["names", "names0", "ssh", "inventory", "json"])
def test_a_ready_pod_with_a_hostile_name_is_left_out_where_the_format_cannot_carry_it(fmt):
    targets = [_provider_target("safe-pod", host="203.0.113.1")] + [_provider_target(n) for n in HOSTILE_NAMES]
    text, warnings = _gate(targets, fmt)

    left_out = [name for name in HOSTILE_NAMES if name not in CARRIED.get(fmt, [])]
    assert len(warnings) == len(left_out)
    for name, line in zip(left_out, warnings):
        assert "\n" not in line and "\x1b" not in line and "\u2028" not in line
        assert line.startswith(f"computefence: warning: --healthy-out leaves out ready pod {name[:20]!r}"[:-1])
        assert line.endswith("the job will not start there")
    for name in left_out:
        assert name not in text
    assert ("203.0.113.1" if fmt == "ssh" else "safe-pod") in text  # the ssh format writes the address


def test_json_and_names0_carry_a_ready_pod_whose_name_holds_a_quote_or_a_backslash():
    names = ["safe-pod", 'gpu"a', "gpu\\b", "team pod 3"]
    targets = [_provider_target(name) for name in names]

    text, warnings = _gate(targets, "json")
    assert warnings == [] and [entry["name"] for entry in json.loads(text)] == names
    text, warnings = _gate(targets, "names0")
    assert warnings == [] and text.split("\0") == [*names, ""]


def test_names_files_read_by_xargs_give_exactly_the_ready_names(argv_logger, tmp_path):
    program, log = argv_logger
    targets = [_provider_target(n) for n in ["pod-a", *HOSTILE_NAMES, "pod.b_2"]]
    for fmt, xargs in (
        ("names", ["xargs", "-d", "\n", "-I{}"]),
        ("names0", ["xargs", "-0", "-I{}"]),
        ("names", ["xargs", "-I{}"]),  # the old recipe's xargs, with its quote rules
    ):
        log.unlink(missing_ok=True)
        path = tmp_path / f"ready.{fmt}"
        path.write_text(_gate(targets, fmt)[0])
        done = subprocess.run([*xargs, "-a", str(path), str(program), "--", "{}"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        carried = [["--", name] for name in CARRIED.get(fmt, []) if "-0" in xargs]
        assert _calls(log) == [["--", "pod-a"], *carried, ["--", "pod.b_2"]]


def test_ssh_lines_hold_no_user_or_hop_that_ssh_reads_as_an_option_or_another_host(argv_logger, tmp_path):
    program, log = argv_logger
    targets = [
        _provider_target("pod-a", user="root"),
        _provider_target("pod-b", user="-oProxyCommand=x"),
        _provider_target("pod-c", user="root@198.51.100.66"),
        _provider_target("pod-d", host="198.51.100.66 -oProxyCommand=x"),
        Target(name="pod-e", host="10.0.0.5", proxy_jump="-oProxyCommand=x"),
        Target(name="pod-f", host="10.0.0.6", proxy_command="ssh -W %h:%p 'bastion'"),
        Target(name="pod-g", host="10.0.0.7", proxy_jump="jump@[fd00::1]:2222"),
    ]
    text, warnings = _gate(targets, "ssh")
    assert [re.search(r"ready pod '([^']+)'", w)[1] for w in warnings] == ["pod-b", "pod-c", "pod-d", "pod-e", "pod-f"]
    path = tmp_path / "ready.ssh"
    path.write_text(text)
    # One pod a line, each word whole: as `xargs -L 1` (and a shell) read it.
    done = subprocess.run(["xargs", "-L", "1", "-a", str(path), str(program)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _calls(log) == [
        ["root@203.0.113.7", "-p", "40022"],
        ["10.0.0.7", "-p", "22", "-J", "jump@[fd00::1]:2222"],
    ]


# ---------------------------------------------------------------- YAML and ssh_config exports

INJECTED_GPU = "H100\n- name: injected\n  host: 198.51.100.66\n  port: 22\nHost *\n  ProxyCommand " + PWN
SEPARATED_GPU = "H100\u2028- {name: injected, host: 198.51.100.66}\x85Host *\rProxyCommand " + PWN


@pytest.mark.parametrize("gpu", [INJECTED_GPU, SEPARATED_GPU])
def test_a_provider_string_never_adds_a_host_to_the_exported_yaml(gpu, tmp_path):
    targets = [_provider_target("pod-a", gpu_type=gpu, gpu_count=1), _provider_target("My Pod\u2029x", gpu_type=gpu)]
    for text in (export_yaml(targets), _gate(targets[:1], "inventory")[0]):
        path = tmp_path / "out.yaml"
        path.write_text(text)
        loaded = load_inventory(path)
        assert [t.host for t in loaded] == ["203.0.113.7"] * len(loaded)
        assert len(yaml.safe_load(text)["hosts"]) == len(loaded)
        # Every comment is one line of printable text
        for line in text.splitlines():
            if line.startswith("#"):
                assert line.isprintable()


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")
@pytest.mark.parametrize("gpu", [INJECTED_GPU])
def test_a_provider_string_never_adds_a_host_block_to_the_exported_ssh_config(gpu, tmp_path):
    targets = [_provider_target("pod-a", gpu_type=gpu), _provider_target("'-oProxyCommand=x'", gpu_type=gpu)]
    path = tmp_path / "ssh_config"
    path.write_text(export_ssh_config(targets))
    # ssh itself reads the file: no ProxyCommand for any host, and only the two Host entries
    for host in ("pod-a", "oProxyCommand=x", "anything-else"):
        resolved = subprocess.run(["ssh", "-G", "-F", str(path), "--", host], capture_output=True, text=True)
        assert resolved.returncode == 0, resolved.stderr
        assert "proxycommand" not in resolved.stdout
    assert re.findall(r"(?m)^Host (.*)$", path.read_text()) == ["pod-a", "oProxyCommand=x"]


@pytest.mark.parametrize(
    "target, what",
    [
        (Target(name="a", host="10.0.0.1", user="root ProxyCommand=x"), "user 'root ProxyCommand=x'"),
        (Target(name="a", host="10.0.0.1", user="root@10.9.9.9"), "user 'root@10.9.9.9'"),
        (Target(name="a", host="*"), "host '*'"),
        (Target(name="a", host="10.0.0.1 10.0.0.2"), "host '10.0.0.1 10.0.0.2'"),
        (Target(name="a", host="%h.evil"), "host '%h.evil'"),
        (Target(name="a", host="h", identity_files=["/k/${HOME}/id"]), "identity_file '/k/${HOME}/id'"),
        (Target(name="a", host="h", proxy_command="nc %h %p\u2028Host *"), "proxy_command"),
        (Target(name="a", host="h", proxy_jump="bastion,-oProxyCommand=x"), "proxy_jump host '-oProxyCommand=x'"),
    ],
)
def test_ssh_config_export_refuses_a_value_it_cannot_write_as_itself(target, what):
    with pytest.raises(ConfigError, match=re.escape(what)) as raised:
        export_ssh_config([target])
    assert str(raised.value).endswith("an ssh_config cannot hold it safely, nothing exported")


@pytest.mark.skipif(shutil.which("ssh") is None, reason="needs the OpenSSH client")
def test_ssh_config_paths_with_quotes_blanks_and_hashes_read_back_by_ssh(tmp_path):
    files = ["/k/a b", "/k/q\"uo'te", "/k/back\\slash", "/k/#hash", "/k/100%/x"]
    path = tmp_path / "ssh_config"
    path.write_text(export_ssh_config([Target(name="p1", host="10.0.0.1", identity_files=files)]))
    out = subprocess.run(["ssh", "-G", "-F", str(path), "p1"], capture_output=True, text=True, check=True).stdout
    # ssh -G prints the paths before %-expansion
    assert [line[len("identityfile ") :] for line in out.splitlines() if line.startswith("identityfile ")] == [
        f.replace("%", "%%") for f in files
    ]


# ---------------------------------------------------------------- the README recipe, run as written


def _readme_launch_recipe() -> str:
    readme = (REPO / "docs" / "operations.md").read_text()
    section = readme[readme.index("## Launch a sweep on the pods that passed") :]
    return re.search(r"```sh\n(.*?)```", section, re.S)[1]


def _ran(pod) -> str:
    """What the job wrote on the pod (its /workspace is mounted only in the pod's namespace)."""
    return pod.in_namespace(["sh", "-c", 'cat "$1" 2>/dev/null || true', "sh", f"{pod.merged}/workspace/ran"])


@pytest.mark.sshd
def test_the_readme_launch_recipe_starts_the_job_on_the_ready_pods_only(ssh_fleet, tmp_path):
    ready_a, ready_b, blocked, unchecked = ssh_fleet.start(
        [
            PodSpec("recipe-a", **SPOTLESS),
            PodSpec("recipe-b", **SPOTLESS),
            PodSpec("recipe-blocked", **dict(SPOTLESS, torch="cpu")),
            PodSpec("recipe-unchecked", **SPOTLESS),
        ]
    )
    pods = [ready_a, ready_b, blocked, unchecked]
    try:
        for pod in pods:
            pod.in_namespace(
                ["sh", "-c", 'printf "#!/bin/sh\\necho ran >> /workspace/ran\\n" > "$1" && chmod +x "$1"', "sh",
                 f"{pod.merged}/workspace/train.sh"]
            )  # fmt: skip
        hosts = [{"name": p.name, "host": p.host, "port": p.port} for p in (ready_a, ready_b, blocked)]
        # Names an inventory allows that ssh reads as another machine: the unchecked pod.
        hosts += [
            {"name": f"ssh://root@{unchecked.host}:{unchecked.port}", "host": ready_a.host, "port": ready_a.port},
            {"name": f"root@{unchecked.host}", "host": ready_b.host, "port": ready_b.port},
        ]
        work = tmp_path / "work"
        work.mkdir()
        write_inventory(work / "pool.yaml", ssh_fleet, hosts, trusted=pods, checks={})
        # ssh as the recipe calls it, logging its arguments first (PATH is the user's, the recipe is not changed)
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        log = tmp_path / "ssh.log"
        (bin_dir / "ssh").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec /usr/bin/ssh "$@"\n')
        (bin_dir / "ssh").chmod(0o755)
        home = tmp_path / "home"
        (home / ".ssh").mkdir(parents=True)
        env = cli_subprocess_env(home)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"

        done = subprocess.run(
            ["bash", "-c", _readme_launch_recipe()], cwd=work, env=env, capture_output=True, text=True, timeout=180
        )

        assert sorted(log.read_text().splitlines()) == [
            f"-F ready.ssh_config -- {name} cd /workspace && nohup ./train.sh >train.log 2>&1 </dev/null &"
            for name in ("recipe-a", "recipe-b")
        ], done.stderr
        for name in (f"ssh://root@{unchecked.host}:{unchecked.port}", f"root@{unchecked.host}"):
            assert f"leaves out ready pod {name!r}" in done.stderr
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not all(_ran(p) for p in (ready_a, ready_b)):
            time.sleep(0.2)
        ran = {p.name: _ran(p) for p in pods}
        assert ran == {"recipe-a": "ran\n", "recipe-b": "ran\n", "recipe-blocked": "", "recipe-unchecked": ""}
        assert not Path("/tmp/computefence-PWN").exists()
    finally:
        for pod in pods:
            ssh_fleet.stop(pod)
