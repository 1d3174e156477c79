"""The reference's confirmation rule and the three layers that decide a policy,
as tables (seeds/000: "Require confirmation for send, publish, create, update,
delete, permission, financial, or production-impacting actions")."""

from __future__ import annotations

import pytest

from siesta_contract.agents import Policy, ToolAnnotations

from runtime.functions import FUNCTIONS
from runtime.tools.policy import action_of, default_policy, effective_policy

CONFIRMED_SYSTEM = {
    "Platform_CreateTask",
    "Platform_CreateAgent",
    "Platform_CreateAgentFromTemplate",
    "Platform_UpdateAgent",
    "Platform_CreateSkill",
    "Platform_UpdateSkill",
    "Platform_CreateMemoryCollection",
    "Platform_UpdateMemoryCollection",
    "Platform_CreateMemoryPage",
    "Platform_UpdateMemoryPage",
    "publishFiles",
    "image_generation",
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_system_functions_that_create_update_delete_or_publish_ask_first(name: str) -> None:
    expected = "confirm" if name in CONFIRMED_SYSTEM else "enabled"
    assert default_policy(name, system=True).policy == expected


def test_every_confirmed_system_function_exists() -> None:
    assert set(FUNCTIONS) >= CONFIRMED_SYSTEM


@pytest.mark.parametrize(
    ("name", "action"),
    [
        ("Gmail.SendEmail", "send"),
        ("Gmail.ReplyToThread", "send"),
        ("Gmail.ForwardEmail", "send"),
        ("gmail_send_email", "send"),
        ("Slack.PostMessage", "publish"),
        ("Twitter.Tweet", "publish"),
        ("Jira.CreateIssue", "create"),
        ("createIssue", "create"),
        ("HubSpot.AddContact", "create"),
        ("Drive.UploadFile", "create"),
        ("Drive.CopyFile", "create"),
        ("Calendar.ScheduleMeeting", "create"),
        ("Sheets.AppendRow", "create"),
        ("Sheets.WriteRange", "update"),
        ("Jira.UpdateIssue", "update"),
        ("Jira.AssignIssue", "update"),
        ("Jira.TransitionIssue", "update"),
        ("Gmail.MarkAsRead", "update"),
        ("Crm.UpsertDeal", "update"),
        ("Drive.DeleteFile", "delete"),
        ("Gmail.TrashMessage", "delete"),
        ("Sheets.ClearRange", "delete"),
        ("Drive.ShareFile", "permission"),
        ("Drive.GrantPermission", "permission"),
        ("Drive.RevokeAccess", "permission"),
        ("Workspace.InviteUser", "permission"),
        ("Stripe.Refund", "financial"),
        ("Stripe.CreateCharge", "create"),  # the first word that names an action
        ("Stripe.Charge", "financial"),
        ("Bank.TransferFunds", "financial"),
        ("Shop.Purchase", "financial"),
        ("GitHub.MergePullRequest", "production-impacting"),
        ("Vercel.DeployProject", "production-impacting"),
        ("K8s.RestartDeployment", "production-impacting"),
        ("Aws.TerminateInstance", "production-impacting"),
        ("Aws.RollbackRelease", "production-impacting"),
    ],
)
def test_connection_names_that_say_so_ask_first(name: str, action: str) -> None:
    assert action_of(name) == action
    rule = default_policy(name, system=False)
    assert rule.policy == "confirm" and action in rule.reason


@pytest.mark.parametrize(
    "name",
    [
        "Gmail.ReadEmail",
        "Gmail.SearchThreads",
        "Drive.ListFiles",
        "Drive.ListSharedFiles",  # "shared" describes the files, it shares nothing
        "Drive.ListDeletedFiles",
        "Drive.GetFileSettings",  # "settings" is not "set"
        "Calendar.GetEvents",
        "Jira.GetIssue",
        "Slack.ListChannels",
        "SendGrid.ListTemplates",  # a service's name is not the action
        "Gmail.GetAddress",
        "Analytics.QueryReport",
        "Shop.ListOrders",
    ],
)
def test_reads_stay_enabled(name: str) -> None:
    assert action_of(name) is None
    rule = default_policy(name, system=False)
    assert (rule.policy, rule.reason) == ("enabled", "default: its name says it reads")


@pytest.mark.parametrize(
    "name",
    ["crm_op_17", "Jira.Issue", "Salesforce.Opportunity", "Db.Execute", "Gmail.SearchAndDelete"],
)
def test_a_connection_function_whose_name_says_nothing_asks_first(name: str) -> None:
    rule = default_policy(name, system=False)
    assert rule.policy == "confirm"


@pytest.mark.parametrize(
    ("name", "annotations", "policy", "reason"),
    [
        ("crm_op_17", {"readOnlyHint": True}, "enabled", "declared read-only"),
        ("Jira.Issue", {"readOnlyHint": False}, "confirm", "it may destroy"),
        (
            "Jira.Issue",
            {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
            "confirm",
            "it changes things",
        ),
        # a declaration tightens what its name seems to say ...
        ("Gmail.ReadEmail", {"readOnlyHint": False}, "confirm", "declared not read-only"),
        ("Drive.ListFiles", {"readOnlyHint": True}, "enabled", "declared read-only"),
        # ... but never loosens an action its name names
        ("Gmail.SendEmail", {"readOnlyHint": True}, "confirm", "cannot loosen"),
        # hints that say nothing about reading leave the name to decide
        ("Gmail.ReadEmail", {"openWorldHint": True}, "enabled", "its name says it reads"),
        ("crm_op_17", {"idempotentHint": True}, "confirm", "asks first"),
    ],
)
def test_declared_behaviour_decides_before_the_name(
    name: str, annotations: dict[str, bool], policy: Policy, reason: str
) -> None:
    declared = ToolAnnotations.model_validate(annotations)
    rule = default_policy(name, system=False, annotations=declared)
    assert rule.policy == policy and reason in rule.reason


@pytest.mark.parametrize(
    ("name", "policy", "reason"),
    [
        ("Drive.ListFiles", "enabled", "declared read-only (readOnlyHint)"),
        ("crm_op_17", "enabled", "declared read-only (readOnlyHint)"),
        ("Drive.ListSharedFiles", "enabled", "declared read-only (readOnlyHint)"),
        ("Gmail.SendEmail", "confirm", "send actions need confirmation"),
        ("Slack.PostMessage", "confirm", "publish actions need confirmation"),
        ("Jira.CreateIssue", "confirm", "create actions need confirmation"),
        ("Drive.DeleteFile", "confirm", "delete actions need confirmation"),
        ("Drive.ShareFile", "confirm", "permission actions need confirmation"),
        ("Stripe.Refund", "confirm", "financial actions need confirmation"),
        ("Vercel.DeployProject", "confirm", "production-impacting actions need confirmation"),
        ("Gmail.SearchAndDelete", "confirm", "delete actions need confirmation"),
    ],
)
def test_declaring_read_only_never_loosens_an_action_the_name_names(
    name: str, policy: Policy, reason: str
) -> None:
    declared = ToolAnnotations.model_validate({"readOnlyHint": True})
    rule = default_policy(name, system=False, annotations=declared)
    assert rule.policy == policy and reason in rule.reason
    if policy == "confirm":
        assert "its name names an action" in rule.reason and "cannot loosen" in rule.reason


@pytest.mark.parametrize(
    ("agent", "deployment", "organization", "reason"),
    [
        ("enabled", {}, {}, "the agent's configuration"),
        (None, {"Gmail.SendEmail": "enabled"}, {}, "the deployment's policy"),
        (None, {}, {"Gmail.SendEmail": "enabled"}, "the organization's policy"),
    ],
)
def test_the_operator_or_the_agent_may_still_run_a_declared_read_only_send_at_once(
    agent: Policy | None,
    deployment: dict[str, Policy],
    organization: dict[str, Policy],
    reason: str,
) -> None:
    declared = ToolAnnotations.model_validate({"readOnlyHint": True})
    rule = effective_policy(
        "Gmail.SendEmail",
        system=False,
        agent=agent,
        deployment=deployment,
        annotations=declared,
        organization=organization,
    )
    assert (rule.policy, rule.reason) == ("enabled", reason)


@pytest.mark.parametrize(
    ("agent", "org", "floor", "policy", "reason"),
    [
        # the organization's policy is used when the agent says nothing
        (None, "confirm", None, "confirm", "the organization's policy"),
        (None, "enabled", None, "enabled", "the organization's policy"),
        # ... and is a floor its agents cannot go below
        ("enabled", "confirm", None, "confirm", "the organization's policy (the agent asked"),
        ("disabled", "confirm", None, "disabled", "the agent's configuration"),
        # the deployment's floor holds over the organization's
        (None, "enabled", "confirm", "confirm", "the deployment's policy (the organization's"),
        ("enabled", "confirm", "disabled", "disabled", "the deployment's policy"),
        # an org stricter than the deployment wins
        (None, "disabled", "confirm", "disabled", "the organization's policy"),
    ],
)
def test_the_organizations_floor_sits_between_the_agent_and_the_deployment(
    agent: Policy | None, org: Policy, floor: Policy | None, policy: Policy, reason: str
) -> None:
    deployment: dict[str, Policy] = {"runCommand": floor} if floor else {}
    rule = effective_policy(
        "runCommand",
        system=True,
        agent=agent,
        deployment=deployment,
        organization={"runCommand": org},
    )
    assert rule.policy == policy and reason in rule.reason


def test_an_agent_or_the_deployment_still_decides_over_annotations() -> None:
    declared = ToolAnnotations.model_validate({"readOnlyHint": True})
    floor: dict[str, Policy] = {"crm_op_17": "confirm"}
    rule = effective_policy(
        "crm_op_17", system=False, agent=None, deployment=floor, annotations=declared
    )
    assert (rule.policy, rule.reason) == ("confirm", "the deployment's policy")


@pytest.mark.parametrize(
    ("name", "system", "agent", "floor", "policy", "reason"),
    [
        # the agent's configuration relaxes or tightens the default
        ("Gmail.SendEmail", False, "enabled", None, "enabled", "the agent's configuration"),
        ("Platform_CreateAgent", True, "enabled", None, "enabled", "the agent's configuration"),
        ("Gmail.ReadEmail", False, "confirm", None, "confirm", "the agent's configuration"),
        ("runCommand", True, "disabled", None, "disabled", "the agent's configuration"),
        # the deployment decides when the agent says nothing, even against the default
        ("runCommand", True, None, "confirm", "confirm", "the deployment's policy"),
        ("Gmail.SendEmail", False, None, "enabled", "enabled", "the deployment's policy"),
        # ... and is a floor the agent cannot go below
        ("runCommand", True, "enabled", "confirm", "confirm", "the agent asked for enabled"),
        ("Gmail.ReadEmail", False, "enabled", "disabled", "disabled", "the agent asked for"),
        ("Gmail.SendEmail", False, "confirm", "disabled", "disabled", "the agent asked for"),
        # above the floor the agent's stricter choice holds
        ("runCommand", True, "disabled", "confirm", "disabled", "the agent's configuration"),
        ("runCommand", True, "confirm", "enabled", "confirm", "the agent's configuration"),
        # nobody said anything: the reference's rule
        ("Gmail.SendEmail", False, None, None, "confirm", "send actions need confirmation"),
        ("publishFiles", True, None, None, "confirm", "publishes or creates"),
        ("readFile", True, None, None, "enabled", "default"),
    ],
)
def test_agent_then_deployment_floor_then_reference(
    name: str,
    system: bool,
    agent: Policy | None,
    floor: Policy | None,
    policy: Policy,
    reason: str,
) -> None:
    deployment: dict[str, Policy] = {"someOtherFunction": "disabled"}
    if floor:
        deployment[name] = floor
    rule = effective_policy(name, system=system, agent=agent, deployment=deployment)
    assert rule.policy == policy
    assert reason in rule.reason
