"""The base of the agent functions' models: exactly the documented fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Arguments(BaseModel):
    """Function arguments: exactly the documented fields, nothing else."""

    model_config = ConfigDict(extra="forbid")


class Result(BaseModel):
    """A function's result, in the wire shape (camelCase) the model reads."""

    model_config = ConfigDict(extra="forbid")
