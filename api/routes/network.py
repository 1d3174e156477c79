"""A conversation's own network rules: what its sandbox may reach, narrowed from the
deployment's egress allowlist (``runtime/sandbox/network.py``), and what the egress
proxies refused it."""

from __future__ import annotations

from dataclasses import replace

from anyio import to_thread
from fastapi import APIRouter

from siesta_contract.network import EgressRefusalsPublic, SandboxNetworkPublic, SandboxNetworkUpdate
from siesta_contract.secrets import SecretBindingPublic

from api.deps import CallerDep, ConversationDep, ServicesDep, requires, through_door
from api.responses import CONVERSATION, error_responses
from runtime.core.context import CallContext
from runtime.sandbox.network import NetworkView
from runtime.sandbox.secrets import SecretSpec
from runtime.services import Services

router = APIRouter(
    prefix="/v1/conversations/{conversation_id}/sandbox/network",
    tags=["network"],
    dependencies=requires("sandbox"),
    responses=error_responses(*CONVERSATION),
)


def public(view: NetworkView, services: Services, ctx: CallContext) -> SandboxNetworkPublic:
    rules, refusals = view.rules, view.refusals
    offered = [
        SecretBindingPublic(
            secret=binding.secret,
            env=binding.env,
            placeholder=services.secrets.placeholder(ctx.org, ctx.conversation, binding),
        )
        for binding in rules.secrets
    ]
    return SandboxNetworkPublic(
        allow=list(rules.allow) if rules.allow is not None else None,
        deny=list(rules.deny),
        internet=rules.internet,
        deployment=list(view.deployment),
        effective=list(view.effective),
        refusals=EgressRefusalsPublic(
            count=refusals.count,
            lastHost=refusals.last_host,
            lastReason=refusals.last_reason,
            lastAt=refusals.last_at,
        )
        if refusals is not None
        else None,
        secrets=offered,
    )


@router.get("", response_model=SandboxNetworkPublic)
async def get_network(ctx: ConversationDep, services: ServicesDep) -> SandboxNetworkPublic:
    """The rules in force (the defaults when none were set), the deployment's list they
    narrow, and the requests the egress proxies refused this sandbox."""
    return public(await to_thread.run_sync(lambda: services.network.view(ctx)), services, ctx)


@router.put("", response_model=SandboxNetworkPublic)
async def set_network(
    body: SandboxNetworkUpdate, ctx: ConversationDep, services: ServicesDep, caller: CallerDep
) -> SandboxNetworkPublic:
    """Replace the rules. They may be set before the sandbox exists; on a running one
    they apply to its next connections, its running processes' included, within
    ``SIESTA_EGRESS__NETWORK_RULES_CACHE_SECONDS`` (2). An ``allow`` entry outside the
    deployment's allowlist is refused (403 ``network_rule_outside_allowlist``, naming
    the list): rules only ever narrow it."""
    rules = services.network.checked(body.allow, body.deny, body.internet)
    shown = body.model_dump(mode="json")
    specs = [SecretSpec(spec.secret, spec.env) for spec in body.secrets]

    def set_rules() -> NetworkView:
        with through_door(services, ctx, caller.name, "setNetworkRules", shown):
            offered = services.secrets.bindings(ctx.org, specs)
            return services.network.set(ctx, replace(rules, secrets=offered))

    return public(await to_thread.run_sync(set_rules), services, ctx)
