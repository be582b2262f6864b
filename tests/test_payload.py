"""How probe output from a pod is read: whatever arrives, it is facts or one line of reason."""

import json

import pytest

from computefence.errors import ProbeOutputError
from computefence.payload import MAX_OUTPUT_BYTES, parse_probe_output, probe_payload


def test_login_banner_before_the_document_is_ignored():
    raw = b"Welcome to your pod!\n" + json.dumps({"identity": {"hostname": "pod-a"}}).encode()
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
    raw = b'{"identity": {"hostname": "a\\udcffb \\ud83d\\ude00"}}'
    facts = parse_probe_output(raw)
    assert facts.identity.hostname == "a?b \U0001F600"
    facts.model_dump_json()  # must not raise on encode


def test_params_are_embedded_as_a_literal_not_code():
    hostile = "'); import os; os.system('touch /tmp/pwned'); ('"
    payload = probe_payload({"output_dir": hostile})
    namespace = {}
    line = next(l for l in payload.splitlines() if l.startswith("EMBEDDED_PARAMS = "))
    exec(line, namespace)
    assert json.loads(namespace["EMBEDDED_PARAMS"])["output_dir"] == hostile
