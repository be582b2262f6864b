"""The check areas, one module each, and the one table of them (`checks.areas.AREAS`).

An area module holds its CHECKS (id -> CheckSpec) and its RULES (facts, checks, ctx) ->
findings, as the CheckArea protocol says. The engine that runs them (`evaluate.judge`) and
the fleet-level steps stay in `evaluate/`.
"""
