"""The service side of the JS helpers: one ``HelperHost`` per script execution.

Every helper checks its arguments and raises ``HelperError`` with a clear
message, which the script receives as a catchable ``Error``. Parsed workbooks
are cached for the length of one execution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from python_calamine import CalamineWorkbook

from runtime.agents import AgentCallFailed, AgentGateway, Deadline, call_parallel, check_allowed
from runtime.agents.settings import AgentSettings
from runtime.core.context import CallContext
from runtime.core.errors import SiestaError
from runtime.core.records import FileKind, FileRecord
from runtime.files.conversation import ConversationFiles
from runtime.functions.files import file_public
from runtime.jsexec import excel
from runtime.jsexec.session import HelperError
from runtime.jsexec.settings import JsSettings


class HelperHost:
    def __init__(
        self,
        ctx: CallContext,
        files: ConversationFiles,
        agents: AgentGateway,
        settings: JsSettings,
        agent_settings: AgentSettings,
    ) -> None:
        self._ctx = ctx
        self._files = files
        self._agents = agents
        self._settings = settings
        self._agent_settings = agent_settings
        self._workbooks: dict[str, CalamineWorkbook] = {}
        self._rows: dict[tuple[str, str], list[excel.Row]] = {}
        self._helpers: dict[str, Callable[[list[Any], float], Any]] = {
            "callAgent": self._call_agent,
            "callAgentsParallel": self._call_agents_parallel,
            "readExcelFile": self._read_excel_file,
            "listExcelSheets": self._list_excel_sheets,
            "writeExcelFile": self._write_excel_file,
            "createExcelDocument": self._create_excel_document,
            "searchExcelRows": self._search_excel_rows,
            "getExcelColumnStats": self._get_excel_column_stats,
            "copyFileAsArtifact": self._copy_file_as_artifact,
            "editArtifactFile": self._edit_artifact_file,
        }

    def dispatch(self, helper: str, args: list[Any], remaining: float) -> Any:
        handler = self._helpers.get(helper)
        if handler is None:
            msg = f"unknown helper {helper!r}"
            raise _error(msg)
        try:
            return handler(args, remaining)
        except (excel.ExcelError, AgentCallFailed) as error:
            msg = f"{helper}: {error}"
            raise HelperError(msg) from error
        except SiestaError as error:
            msg = f"{helper}: {error.message}"
            raise HelperError(msg, error.code) from error
        except HelperError as error:
            msg = f"{helper}: {error}"
            raise HelperError(msg, error.code) from error

    # -- sub-agents --------------------------------------------------------------------

    def _call_agent(self, args: list[Any], remaining: float) -> str:
        name, prompt = _text(args, 0, "name"), _text(args, 1, "prompt")
        check_allowed(self._ctx, [name])
        return self._agents.call(self._ctx, name, prompt, self._agent_timeout(remaining))

    def _call_agents_parallel(self, args: list[Any], remaining: float) -> list[dict[str, Any]]:
        names, prompts = _texts(args, 0, "names"), _texts(args, 1, "prompts")
        if len(names) != len(prompts):
            msg = f"names and prompts must have equal lengths ({len(names)} != {len(prompts)})"
            raise _error(msg)
        check_allowed(self._ctx, names)
        return call_parallel(
            self._agents,
            self._ctx,
            names,
            prompts,
            self._agent_settings.timeout_seconds,
            self._agent_settings.max_parallel,
            Deadline.after(remaining, "the script's remaining time"),
        )

    def _agent_timeout(self, remaining: float) -> float:
        return min(self._agent_settings.timeout_seconds, remaining)

    # -- spreadsheets ------------------------------------------------------------------

    def _read_excel_file(self, args: list[Any], _: float) -> list[excel.Row]:
        name, sheet = _text(args, 0, "fileName"), _text(args, 1, "sheetName")
        max_rows = _optional_int(args, 2, "maxRows")
        if max_rows is not None and max_rows < 0:
            msg = "maxRows must not be negative"
            raise _error(msg)
        limit = self._settings.max_excel_rows
        rows = self._sheet_rows(name, sheet)
        return rows[: min(max_rows, limit) if max_rows is not None else limit]

    def _list_excel_sheets(self, args: list[Any], _: float) -> list[str]:
        return excel.sheet_names(self._workbook(_text(args, 0, "fileName")))

    def _write_excel_file(self, args: list[Any], _: float) -> dict[str, Any]:
        return self._new_workbook(args, FileKind.WORKING)

    def _create_excel_document(self, args: list[Any], _: float) -> dict[str, Any]:
        return self._new_workbook(args, FileKind.ARTIFACT)

    def _search_excel_rows(self, args: list[Any], _: float) -> list[excel.Row]:
        name = _text(args, 0, "fileName")
        value = args[3] if len(args) > 3 else None
        if value is None or not isinstance(value, str | int | float | bool):
            msg = "searchValue must be a string, number or boolean (dates as text, 2026-01-31)"
            raise _error(msg)
        match = _match_mode(args[4] if len(args) > 4 else None)
        rows = self._sheet_rows(name, _text(args, 1, "sheetName"))
        return excel.search(rows, name, _text(args, 2, "columnName"), value, match)

    def _get_excel_column_stats(self, args: list[Any], _: float) -> dict[str, Any]:
        name = _text(args, 0, "fileName")
        rows = self._sheet_rows(name, _text(args, 1, "sheetName"))
        return excel.stats(rows, name, _text(args, 2, "columnName"))

    def _new_workbook(self, args: list[Any], kind: FileKind) -> dict[str, Any]:
        name, sheet = _text(args, 0, "fileName"), _text(args, 1, "sheetName")
        rows = args[2] if len(args) > 2 else None
        if not isinstance(rows, list):
            msg = "rows must be an array"
            raise _error(msg)
        if len(rows) > self._settings.max_excel_rows:
            msg = f"{len(rows)} rows, over the limit of {self._settings.max_excel_rows}"
            raise _error(msg)
        if not name.lower().endswith(".xlsx"):
            name += ".xlsx"
        record = self._files.add_bytes(self._ctx, name, kind, excel.write_rows(sheet, rows))
        return _metadata(record)

    def _sheet_rows(self, file_name: str, sheet: str) -> list[excel.Row]:
        key = (file_name, sheet)
        if key not in self._rows:
            workbook = self._workbook(file_name)
            self._rows[key] = excel.read_rows(
                workbook, file_name, sheet, self._settings.max_excel_rows
            )
        return self._rows[key]

    def _workbook(self, file_name: str) -> CalamineWorkbook:
        if file_name not in self._workbooks:
            record = self._files.find(self._ctx, file_name)
            data = self._files.read_bytes(record, self._files_limit())
            self._workbooks[file_name] = excel.open_workbook(data, file_name)
        return self._workbooks[file_name]

    def _files_limit(self) -> int:
        return self._files.settings.max_upload_bytes

    # -- artifacts ---------------------------------------------------------------------

    def _copy_file_as_artifact(self, args: list[Any], _: float) -> dict[str, Any]:
        source = self._files.find(self._ctx, _text(args, 0, "sourceFileName"))
        new_name = _text(args, 1, "newFileName")
        data = self._files.read_bytes(source, self._files_limit())
        record = self._files.add_bytes(self._ctx, new_name, FileKind.ARTIFACT, data, editable=True)
        return _metadata(record)

    def _edit_artifact_file(self, args: list[Any], _: float) -> dict[str, Any]:
        file_id, content = _text(args, 0, "fileId"), _text(args, 1, "content", allow_empty=True)
        record = self._files.replace_content(self._ctx, file_id, content.encode("utf-8"))
        return _metadata(record)


def _metadata(record: FileRecord) -> dict[str, Any]:
    return file_public(record).model_dump(mode="json")


def _error(message: str) -> HelperError:
    return HelperError(message)


def _text(args: list[Any], index: int, name: str, *, allow_empty: bool = False) -> str:
    value = args[index] if index < len(args) else None
    if not isinstance(value, str) or (not allow_empty and not value):
        msg = f"{name} must be a non-empty string (got {type(value).__name__})"
        raise _error(msg)
    return value


def _texts(args: list[Any], index: int, name: str) -> list[str]:
    value = args[index] if index < len(args) else None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        msg = f"{name} must be an array of strings"
        raise _error(msg)
    return value


def _match_mode(options: Any) -> excel.Match:
    """``searchExcelRows``'s options: ``{match: "equals" | "contains"}``, equals by default."""
    if options is None:
        return "equals"
    if not isinstance(options, dict) or set(options) - {"match"}:
        msg = 'options must be an object with only "match" ("equals" or "contains")'
        raise _error(msg)
    match = options.get("match", "equals")
    if match not in ("equals", "contains"):
        msg = f'options.match must be "equals" or "contains" (got {match!r})'
        raise _error(msg)
    return "contains" if match == "contains" else "equals"


def _optional_int(args: list[Any], index: int, name: str) -> int | None:
    value = args[index] if index < len(args) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        msg = f"{name} must be a whole number"
        raise _error(msg)
    return int(value)
