"""The policy's own commands (`custom:`), each run on the pod by the probe: custom.<id>
passes when it exits and prints what the policy expects."""

from __future__ import annotations

import functools

from computefence.evaluate.context import Rule, block, collector_error, passed, q, warn
from computefence.evaluate.spec import CheckSpec, Remedy
from computefence.models import Facts, Finding, Fix
from computefence.policy import EffectivePolicy
from computefence.text import one_line

# The ids are the policy's own (custom.<id>), known to --only and --skip from the policy.
CHECKS: dict[str, CheckSpec] = {}
# Judged with the policy (policy_rules.policy_findings), which no rule of one host's facts alone sees.
RULES: tuple[Rule, ...] = ()


def check_custom(facts: Facts, policy: EffectivePolicy) -> list[Finding]:
    results = {r.id: r for r in facts.custom}
    found = []
    for check in policy.custom:
        cid = check.check
        result = results.get(check.id)
        fail = functools.partial(block if check.severity == "block" else warn, remedy=Remedy(check.remedy))
        if check.fix or check.advice:
            fix = Fix(commands=[check.fix] if check.fix else [], advice=check.advice)
        else:
            fix = Fix(commands=[f"sh -c {q(check.run)}"], advice="run it by hand to see why")
        if result is None:
            why = collector_error(facts, "custom") or "the probe reported no result for it"
            found.append(fail(cid, f"`{one_line(check.run, 80)}` did not run: {one_line(why, 160)}", fix))
            continue
        if result.error:
            found.append(fail(cid, f"`{one_line(check.run, 80)}` failed to run: {one_line(result.error, 160)}", fix))
            continue
        if result.timed_out:
            found.append(
                fail(
                    cid,
                    f"`{one_line(check.run, 80)}` did not finish within its {result.timeout_s or check.timeout:g} s "
                    "timeout and was killed",
                    fix,
                )
            )
            continue
        problems = []
        if result.signal is not None:
            problems.append(f"was killed by signal {result.signal}")
        elif result.exit_code != check.expect.exit:
            problems.append(f"exited {result.exit_code} (expected {check.expect.exit})")
        pattern = check.expect.stdout_matches
        if pattern is not None and not result.stdout_matched:
            problems.append(f"printed nothing matching /{pattern}/")
        if problems:
            tail = one_line(result.stderr or result.stdout, 120)
            found.append(
                fail(cid, f"`{one_line(check.run, 80)}` {' and '.join(problems)}" + (f": {tail}" if tail else ""), fix)
            )
        else:
            found.append(passed(cid, f"`{one_line(check.run, 80)}` passed", remedy=Remedy(check.remedy)))
    return found
