"""What every model shares: the base classes, and the schema versions of reports and the probe."""

from __future__ import annotations

from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field

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

# Every whole-number field of a fact: pydantic checks the range as it validates (no Python
# call per model), and its error names the field.
FactInt = Annotated[int, Field(ge=-FACT_INT_LIMIT, le=FACT_INT_LIMIT)]


class _Fact(_Model):
    """A fact from the probe. A number that is not finite (NaN, Infinity) or out of range is
    a validation error naming its field: the pod's answer is probe_failed, never judged."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        # A plain `int` field would take any number: every one must be a FactInt.
        for name, field in cls.model_fields.items():
            options = get_args(field.annotation) if get_origin(field.annotation) in (Union, UnionType) else ()
            if (field.annotation is int and not field.metadata) or int in options:
                raise TypeError(f"{cls.__name__}.{name}: a fact's whole number is a FactInt (its range is checked)")

    def model_post_init(self, context: Any) -> None:
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
