"""Gymnasium wrappers for group environments (installed as ``agentgym_credit.wrappers``).

* :class:`RecordStepBatch` — records every step into a :class:`~agentgym_credit.records.StepBatch`;
* :class:`ParseActions` — extracts actions from LLM responses, reports the invalid-action penalty;
* :class:`PromptObservations` — the papers' prompt templates with a history window;
* :class:`AttachCredit` — attaches per-step advantages when a group has finished;
* :mod:`~agentgym_credit.wrappers.forking` — forks members through the whole stack (tree rollouts).
"""

from agentgym_credit.wrappers.action_parsing import (
    DEFAULT_PENALTIES,
    ParseActions,
    ParsedAction,
    default_penalty,
    parse_action,
)
from agentgym_credit.wrappers.credit import AttachCredit
from agentgym_credit.wrappers.forking import StackSnapshot, branch_members, restore_members, snapshot_members
from agentgym_credit.wrappers.prompting import TEMPLATES, HistoryStep, PromptObservations, render_prompt
from agentgym_credit.wrappers.recording import RecordStepBatch, TrajectoryRecorder, member_info

__all__ = [
    "AttachCredit",
    "DEFAULT_PENALTIES",
    "HistoryStep",
    "ParseActions",
    "ParsedAction",
    "PromptObservations",
    "RecordStepBatch",
    "StackSnapshot",
    "TEMPLATES",
    "TrajectoryRecorder",
    "branch_members",
    "default_penalty",
    "member_info",
    "parse_action",
    "render_prompt",
    "restore_members",
    "snapshot_members",
]
