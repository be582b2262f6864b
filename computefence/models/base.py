"""What every model shares: the base classes, and the schema versions of reports and the probe."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

# 2: findings and host statuses carry fix_commands/fix_advice; severity "skip"; summary.skipped;
#    later fix_steps ({run, on, kind}) beside them, and findings' key (readers of 2 without
#    them still read).
SCHEMA_VERSION = 2
PROBE_SCHEMA_VERSION = 1


class _Model(BaseModel):
    # Unknown keys from a newer probe are ignored, never fatal. Strings from pods and APIs
    # arrive already free of lone surrogates (computefence.jsontext). No number is NaN or
    # infinite (a saved report's, a provider's): JUnit and Prometheus readers reject them.
    model_config = ConfigDict(extra="ignore", validate_assignment=True, allow_inf_nan=False)


# Parsed fact models with the same fields set share one set of their names: pydantic keeps
# a set per instance, about 700 bytes each, 40 KB of a pod's 55 KB of parsed facts.
_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


# The largest magnitude a pod's whole-number fact may have (bytes, MiB, counts, error totals):
# beyond it a value is no measurement, and float() of it overflows in the evaluator.
FACT_INT_LIMIT = 2**63


class _Fact(_Model):
    """A fact from the probe. A number that is not finite (NaN, Infinity) or out of range is
    a validation error naming its field: the pod's answer is probe_failed, never judged."""

    def model_post_init(self, context: Any) -> None:
        for name, value in self.__dict__.items():
            if type(value) is int and not -FACT_INT_LIMIT <= value <= FACT_INT_LIMIT:
                raise ValueError(f"{name} is out of range (a {value.bit_length()}-bit number)")
        names = self.__pydantic_fields_set__
        object.__setattr__(self, "__pydantic_fields_set__", _FIELDS_SETS.setdefault(frozenset(names), names))

    def __setstate__(self, state: dict[Any, Any]) -> None:
        # Unpickled (a --workers worker's answer): shared as a parsed one is.
        super().__setstate__(state)
        names = self.__pydantic_fields_set__
        object.__setattr__(self, "__pydantic_fields_set__", _FIELDS_SETS.setdefault(frozenset(names), names))

    def __setattr__(self, name: str, value: Any) -> None:
        # Assignment records the name in the fields set: this instance gets a set of its own first.
        object.__setattr__(self, "__pydantic_fields_set__", set(self.__pydantic_fields_set__))
        super().__setattr__(name, value)
