"""How probe output from a pod is read: whatever arrives, it is facts or one line of reason."""

import ast
import json
import subprocess
import zlib

import pytest

from computefence.connectors.payload import MAX_OUTPUT_BYTES, parse_probe_output
from computefence.connectors.ssh import probe_command
from computefence.errors import ProbeOutputError
from computefence.probe.assemble import BOOTSTRAP, probe_payload, probe_wire

# The smallest document the laptop takes as a probe's answer.
MINIMAL_ANSWER = {"probe_schema_version": 1, "identity": {}, "storage": {}, "gpu": {}}


def test_login_banner_before_the_document_is_ignored():
    raw = b"Welcome to your pod!\n" + json.dumps({**MINIMAL_ANSWER, "identity": {"hostname": "pod-a"}}).encode()
    assert parse_probe_output(raw).identity.hostname == "pod-a"


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"", "printed nothing"),
        (b"Segmentation fault\n", "not JSON"),
        (b"[1, 2, 3]", "not a JSON object"),
        (b'{"probe_error": "MemoryError: "}', "probe failed: MemoryError"),
        (b'{"gpu": {"gpus": [{"index": "zero", "name": "x"}]}}', "facts schema at gpu.gpus.0.index"),
    ],
)
def test_unusable_output_is_a_one_line_reason(raw, reason):
    with pytest.raises(ProbeOutputError) as caught:
        parse_probe_output(raw)
    message = str(caught.value)
    assert reason in message
    assert "\n" not in message


def test_oversized_output_is_refused_before_parsing():
    with pytest.raises(ProbeOutputError, match="cap"):
        parse_probe_output(b" " * (MAX_OUTPUT_BYTES + 1))


def test_control_characters_in_garbage_are_not_echoed_raw():
    with pytest.raises(ProbeOutputError) as caught:
        parse_probe_output(b"\x1b[2J\x1b]0;pwned\x07 not json")
    assert "\x1b" not in str(caught.value)


def test_lone_surrogates_become_replacement_and_real_pairs_survive():
    raw = b'{"probe_schema_version": 1, "storage": {}, "gpu": {}, "identity": {"hostname": "a\\udcffb \\ud83d\\ude00"}}'
    facts = parse_probe_output(raw)
    assert facts.identity.hostname == "a?b \U0001f600"
    facts.model_dump_json()  # must not raise on encode


def test_params_are_embedded_as_a_literal_not_code():
    hostile = "'); import os; os.system('touch /tmp/pwned'); ('"
    payload = probe_payload({"output_dir": hostile})
    namespace = {}
    line = next(l for l in payload.splitlines() if l.startswith("EMBEDDED_PARAMS = "))
    exec(line, namespace)
    assert json.loads(namespace["EMBEDDED_PARAMS"])["output_dir"] == hostile


def _unpack(wire: bytes) -> bytes:
    """What BOOTSTRAP does with its stdin: join the zlib streams."""
    script = b""
    while wire:
        stream = zlib.decompressobj()
        script += stream.decompress(wire)
        assert stream.eof
        wire = stream.unused_data
    return script


def test_the_wire_form_unpacks_to_the_plain_script_and_only_the_parameters_differ_per_pod():
    one, other = {"output_dir": "/a", "deadline_s": 5}, {"output_dir": "/b" * 50, "deadline_s": 9}
    assert _unpack(probe_wire(one)) == probe_payload(one).encode()
    assert _unpack(probe_wire(other)) == probe_payload(other).encode()
    assert len(probe_wire(one)) < len(probe_payload(one).encode()) / 3


def test_the_bootstrap_is_plain_python_a_shell_can_single_quote():
    assert "'" not in BOOTSTRAP
    ast.parse(BOOTSTRAP, feature_version=(3, 6))


def test_the_pod_command_runs_the_compressed_probe_and_refuses_a_cut_short_one():
    params = {"python": "/nonexistent/python3", "deadline_s": 20}
    ran = subprocess.run(["sh", "-c", probe_command(40)], input=probe_wire(params), capture_output=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert parse_probe_output(ran.stdout).torch.python_found is False
    cut = subprocess.run(
        ["sh", "-c", probe_command(40)], input=probe_wire(params)[:-20], capture_output=True, timeout=60
    )
    assert (cut.returncode, cut.stdout) == (1, b"")
    assert cut.stderr.decode().strip() == "computefence: the probe arrived cut short"


def _answer_with_mounts(*mounts: dict) -> bytes:
    return json.dumps({**MINIMAL_ANSWER, "storage": {"mounts": list(mounts)}}).encode()


def test_parsed_facts_share_fields_sets_but_each_still_knows_which_fields_it_was_given():
    full = {"mount_point": "/", "fs_type": "overlay", "source": "overlay"}
    a = parse_probe_output(_answer_with_mounts(full, {"mount_point": "/data", "fs_type": "ext4"}))
    b = parse_probe_output(_answer_with_mounts(full))
    assert a.storage.mounts[0].model_fields_set is b.storage.mounts[0].model_fields_set
    assert a.storage.mounts[0].model_fields_set == {"mount_point", "fs_type", "source"}
    assert a.storage.mounts[1].model_fields_set == {"mount_point", "fs_type"}
    assert a.storage.mounts[1].model_dump(exclude_unset=True) == {"mount_point": "/data", "fs_type": "ext4"}


def test_assigning_to_one_parsed_fact_leaves_the_others_fields_set_alone():
    a = parse_probe_output(_answer_with_mounts({"mount_point": "/", "fs_type": "overlay"}))
    b = parse_probe_output(_answer_with_mounts({"mount_point": "/", "fs_type": "overlay"}))
    a.storage.mounts[0].source = "overlay"
    assert a.storage.mounts[0].model_fields_set == {"mount_point", "fs_type", "source"}
    assert b.storage.mounts[0].model_fields_set == {"mount_point", "fs_type"}
    assert b.storage.mounts[0].model_dump(exclude_unset=True) == {"mount_point": "/", "fs_type": "overlay"}
