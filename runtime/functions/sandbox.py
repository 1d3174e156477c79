"""The five sandbox functions as the catalog lists them (their models:
``siesta_contract.functions.sandbox``)."""

from __future__ import annotations

from siesta_contract.functions.sandbox import (
    ListFilesArgs,
    ListFilesResult,
    PublishFilesArgs,
    PublishFilesResult,
    ReadFileArgs,
    ReadFileResult,
    RunCommandArgs,
    RunCommandResult,
    WriteFileArgs,
    WriteFileResult,
)

from runtime.functions.base import FunctionSpec

SANDBOX = [
    FunctionSpec(
        "runCommand",
        "Run a shell command (fresh bash -lc) in the conversation's Linux "
        "workspace /mnt/work. Returns exit code, stdout and stderr; a wall-clock timeout "
        "and output truncation apply. List conversation files to stage in `files`.",
        RunCommandArgs,
        RunCommandResult,
    ),
    FunctionSpec(
        "writeFile",
        "Write a UTF-8 text file inside /mnt/work. Large content must be "
        "created with a command instead.",
        WriteFileArgs,
        WriteFileResult,
    ),
    FunctionSpec(
        "readFile",
        "Read a workspace file: text as text, binary as base64; reports truncation. "
        "Page through a large file with offset and the result's nextOffset.",
        ReadFileArgs,
        ReadFileResult,
    ),
    FunctionSpec(
        "listFiles",
        "List one workspace folder (not recursive): name, size, isDirectory.",
        ListFilesArgs,
        ListFilesResult,
    ),
    FunctionSpec(
        "publishFiles",
        "Publish workspace files as downloadable message artifacts. "
        "Nothing is published automatically.",
        PublishFilesArgs,
        PublishFilesResult,
    ),
]
