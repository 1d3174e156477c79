"""Settings of the tool layer and its upstream services."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr


class OrgPolicies(BaseModel):
    """One organization's own floor (``SIESTA_TOOLS__ORG_POLICIES``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    function_policies: dict[str, Literal["enabled", "disabled", "confirm"]] = Field(
        default_factory=dict, alias="functionPolicies"
    )
    trusted_agents: dict[str, list[str]] = Field(default_factory=dict, alias="trustedAgents")
    """Function name → the agents of the org its floor does not hold for (agents the
    org has registered, ``POST /v1/agents``: an id a caller merely states is not one)."""

    def floor_for(self, agent: str | None) -> dict[str, Literal["enabled", "disabled", "confirm"]]:
        """The org's floor as it holds for the registered agent ``agent`` (``None``:
        none, or one not registered)."""
        return {
            name: policy
            for name, policy in self.function_policies.items()
            if agent is None or agent not in self.trusted_agents.get(name, [])
        }


class ToolSettings(BaseModel):
    """The tool-catalog layer."""

    model_config = ConfigDict(extra="forbid")

    system_connection_ids: dict[str, str] = Field(
        default_factory=lambda: {
            "google_search": "system-google-search",
            "web_scraper": "system-firecrawl",
        }
    )
    """The system-owned connection each connection-backed System Tool must reference."""
    max_batch_parallel: int = Field(40, ge=1)
    """``run_function_batch`` calls running at once (the reference's 40)."""
    max_batch_inputs: int = Field(1000, ge=1)
    """Inputs one ``run_function_batch`` call accepts."""
    http_timeout_seconds: float = Field(20.0, gt=0)
    """One request of an adapter to an external API."""
    fetch_max_bytes: int = Field(2 * 1024 * 1024, ge=1024)
    """Most bytes read from one fetched web page."""
    context_chars: int = Field(1500, ge=100)
    """Page text kept per search result / fetched page."""
    allow_private_networks: bool = False
    """Let web_fetch and search-result fetching reach loopback and private addresses
    (off: a model must not be able to probe the service's own network)."""
    google_base_url: str = "https://www.googleapis.com"
    google_api_key: SecretStr | None = None
    google_cx: str | None = None
    """The Custom Search engine id."""
    firecrawl_base_url: str = "https://api.firecrawl.dev"
    firecrawl_api_key: SecretStr | None = None
    crawl_timeout_seconds: float = Field(120.0, gt=0)
    crawl_poll_seconds: float = Field(2.0, gt=0)
    openai_base_url: str = "https://api.openai.com"
    openai_api_key: SecretStr | None = None
    image_model: str = "gpt-image-2"
    platform_base_url: str | None = None
    """The Siesta platform API that Platform_* functions are forwarded to."""
    platform_token: SecretStr | None = None
    platform_app_url: str | None = None
    """The Siesta app people open (``https://app.example.com``): Platform_CreateTask's
    "Open task" button links to ``{platform_app_url}/tasks/{taskId}``; unset, the
    link is the app-relative ``/tasks/{taskId}``."""
    connections_url: str | None = None
    """Where connection functions (Gmail.Send, ...) are executed (the agent backend)."""
    connections_token: SecretStr | None = None
    max_registered_agents: int = Field(1000, ge=1)
    """Agents one org may register (``POST /v1/agents``)."""
    approval_ttl_seconds: float = Field(3600.0, gt=0)
    """A call waiting for approval expires after this long: deciding it then answers
    ``approval_expired`` and the log shows it ``expired``."""
    allow_self_approval: bool = False
    """Let the token that asked for a call also decide it (off: a second caller, with
    the ``approve`` scope, must decide; single-token development setups turn it on)."""
    executions_retention_days: int = Field(30, ge=1)
    """Executions log entries older than this are removed by the reconciliation pass."""
    function_policies: dict[str, Literal["enabled", "disabled", "confirm"]] = Field(
        default_factory=dict
    )
    """The deployment's policy per function name, e.g. ``{"runCommand": "confirm"}``:
    used when an agent's configuration says nothing, and a floor it cannot go below
    (it holds on the direct sandbox and JS routes too). Functions nobody configured
    follow the reference: create/update/delete/send/publish actions ask first."""
    org_policies: dict[str, OrgPolicies] = Field(default_factory=dict)
    """Per organization (by id): a floor of its own between the deployment's and the
    agent's, e.g. ``{"acme": {"functionPolicies": {"JsExecutorAgent": "disabled"},
    "trustedAgents": {"JsExecutorAgent": ["agent-ops"]}}}``. The org's policy is used
    when the agent's configuration says nothing, and no agent of the org goes below it
    — except the agents it trusts with that function, once registered in the org (the
    deployment's floor still holds for them)."""
    docs_base_url: str | None = None
    """Where this service's repository is published (e.g.
    ``https://github.com/ORG/siesta/blob/main``): the help function links the manual's
    sections under it (``<this>/docs/guides/e2b.md#e2b-compatibility``). Unset: it
    names the section and its page, without a link."""
    search_deadline_seconds: float = Field(20.0, gt=0)
    """One ``GoogleSearch.Search`` call from start to answer: the search request and
    the fetches of its result pages together; pages not read by then get no context."""
    search_parallel_fetches: int = Field(5, ge=1)
    """Result pages one ``GoogleSearch.Search`` call fetches at once."""
    batch_deadline_seconds: float = Field(300.0, gt=0)
    """One ``run_function_batch`` call, all its inputs together: calls not finished by
    then are reported as failed, and the batch answers. Each call is also held to
    ``SIESTA_AGENTS__TIMEOUT_SECONDS``."""

    def org_floor(
        self, org: str | None, agent: str | None
    ) -> dict[str, Literal["enabled", "disabled", "confirm"]]:
        """``org``'s floor for ``agent`` (empty without an org or a policy for it).
        ``agent`` must be one the org registered (``Services.org_floor`` checks)."""
        policies = self.org_policies.get(org) if org is not None else None
        return policies.floor_for(agent) if policies is not None else {}
