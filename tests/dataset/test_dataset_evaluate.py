"""The dataset rules beside their cases: the rules' own cases (pass, warn and block, with fixes that
name the real path) are data in tests/evaluate/cases/dataset.*/; here what needs code."""

from __future__ import annotations

import math

import pytest

from computefence import evaluate
from computefence.evaluate.checks.dataset import entropy
from computefence.models import CheckOptions, DatasetFacts, Facts

PATH = "/workspace/data/train.jsonl"
CLEAN = dict(
    path=PATH,
    exists=True,
    format="jsonl",
    columns=["text", "label"],
    input_column="text",
    label_column="label",
    input_column_guessed=True,
    label_column_guessed=True,
    rows=1000,
    distinct_inputs=1000,
    label_counts={"pos": 520, "neg": 480},
    distinct_labels=2,
)


def test_the_rules_are_registered_with_the_evaluator():
    assert {"dataset.unreadable", "dataset.label-skew"} <= evaluate.CHECK_IDS
    facts = Facts(dataset=DatasetFacts(**CLEAN))
    checks = CheckOptions(dataset=PATH)
    assert {f.check for f in evaluate.evaluate_host(facts, checks)} >= {"dataset.duplicates", "dataset.columns"}


def test_entropy_is_the_cross_entropy_of_predicting_the_prior():
    assert entropy([50, 50]) == pytest.approx(math.log(2))
    assert entropy([1, 1, 1, 1]) == pytest.approx(math.log(4))
    assert entropy([90, 10]) == pytest.approx(-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)))
    assert entropy([7]) == 0.0
