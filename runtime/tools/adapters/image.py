"""image_generation: the OpenAI Images API; the PNG becomes a conversation artifact."""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any

from siesta_contract.functions.assistant import ImageArgs, ImageResult

from runtime.core.errors import ProviderFailed, ToolNotConfigured
from runtime.core.records import FileKind
from runtime.core.upstreams import Upstreams
from runtime.files.conversation import ConversationFiles
from runtime.functions.base import parse_arguments as parse
from runtime.functions.files import file_public
from runtime.tools.adapters.search import call_api
from runtime.tools.call import Adapter, ToolCall
from runtime.tools.settings import ToolSettings

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def image_adapter(
    settings: ToolSettings, files: ConversationFiles, upstreams: Upstreams
) -> Adapter:
    """OpenAI Images API; the PNG becomes an artifact of the conversation."""
    client = upstreams.client("openai")

    def run(call: ToolCall, arguments: dict[str, Any]) -> dict[str, Any]:
        args = parse(ImageArgs, "image_generation", arguments)
        if settings.openai_api_key is None:
            msg = "image_generation needs SIESTA_TOOLS__OPENAI_API_KEY"
            raise ToolNotConfigured(msg)
        request: dict[str, Any] = {"model": settings.image_model, "prompt": args.prompt, "n": 1}
        if args.chosen_size:
            request["size"] = args.chosen_size
        body = call_api(
            client,
            "POST",
            f"{settings.openai_base_url}/v1/images/generations",
            "the OpenAI Images API",
            headers={"Authorization": f"Bearer {settings.openai_api_key.get_secret_value()}"},
            json=request,
        )
        try:
            png = base64.b64decode(body["data"][0]["b64_json"], validate=True)
        except (KeyError, IndexError, TypeError, binascii.Error) as exc:
            msg = "the OpenAI Images API answered without an image"
            raise ProviderFailed(msg) from exc
        if not png.startswith(PNG_SIGNATURE):
            msg = "the OpenAI Images API answered with something that is not a PNG"
            raise ProviderFailed(msg)
        # The artifact belongs to the call's assistant message (the backend's header
        # or ``messageId``), which the model cannot know.
        record = files.add_bytes(call.ctx, image_name(), FileKind.ARTIFACT, png)
        return ImageResult(
            artifact=file_public(record),
            size=args.chosen_size or "auto",
            messageId=record.message_id,
        ).model_dump(mode="json")

    return run


def image_name() -> str:
    """A name no other call can take: random, not counted from a listing (two calls
    at once would both count the same files)."""
    return f"generated-image-{secrets.token_hex(6)}.png"
