"""``evaluate``'s transcripts: the held-out steps a policy took, as the environment recorded them."""

from __future__ import annotations

import numpy as np

from agentgym_credit.baselines.policy import load_policy
from agentgym_credit.baselines.rollout import evaluate


def test_evaluate_transcripts_hold_every_step_of_the_first_episodes(cache_dir):
    policy = load_policy("tiny", cache_dir=cache_dir)
    kwargs = dict(max_new_tokens=6, temperature=1.0, batch=2, max_steps=2)
    everything: list[dict] = []
    score = evaluate(policy, "Sokoban-Group-v0", 3, transcripts=everything, **kwargs)
    first: list[dict] = []
    again = evaluate(policy, "Sokoban-Group-v0", 3, transcripts=first, transcript_episodes=2, **kwargs)
    assert again == score  # recording changes nothing: fixed seeds
    # three episodes over two batches: the second batch's episode is numbered from the first's end
    assert sorted({s["episode"] for s in everything}) == [0, 1, 2]
    assert first == [s for s in everything if s["episode"] < 2]
    for e in range(3):
        steps = [s for s in everything if s["episode"] == e]
        assert [s["t"] for s in steps] == list(range(len(steps)))
        assert "#" in steps[0]["observation"]  # the room the policy saw
        assert all(s["response"] and isinstance(s["action"], str) for s in steps)  # what was written, what ran
    # the score is the transcripts' own: the same steps, validity and wins
    assert len(everything) == round(score["mean_steps"] * 3)
    assert np.mean([s["valid"] for s in everything]) == score["valid_rate"]
    wins = {s["episode"]: s["success"] for s in everything}
    assert sum(wins.values()) / 3 == score["success_rate"]
