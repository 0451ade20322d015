"""A model's first validation error as one line (ordo.api.common.first_error)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError, field_validator

from ordo.api.common import first_error


class _Inner(BaseModel):
    size: int

    @field_validator("size")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            raise ValueError("size must be positive")
        return value


class _Outer(BaseModel):
    inner: _Inner


def _error(value: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Outer.model_validate(value)
    return caught.value


def test_the_first_error_names_its_field_path_and_says_what_is_wrong() -> None:
    assert first_error(_error({"inner": {"size": "many"}})).startswith("inner.size: Input should be")


def test_a_validators_message_comes_without_pydantics_prefix() -> None:
    assert first_error(_error({"inner": {"size": 0}})) == "inner.size: size must be positive"


def test_within_puts_the_values_own_place_before_the_field_path() -> None:
    assert first_error(_error({"inner": {"size": 0}}), within="spec.kafka") == (
        "spec.kafka.inner.size: size must be positive"
    )
